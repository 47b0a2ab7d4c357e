package calendar_test

import (
	"archive/zip"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
	_ "time/tzdata" // the zones below, on a machine without zoneinfo

	"sluice/internal/calendar"
)

func zone(t *testing.T, name string) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation(name)
	if err != nil {
		t.Fatal(err)
	}
	return loc
}

func utc(s string) time.Time {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		panic(err)
	}
	return t
}

// TestBounds: the period that holds an instant, on synthetic instants, with
// the expected boundaries written out in UTC from the zones' published
// rules: a day is 23 or 25 hours when daylight saving time starts or ends,
// months end on the 28th to the 31st, a year changes, and an instant
// exactly at a boundary (to the nanosecond) is the first of the new period.
func TestBounds(t *testing.T) {
	cases := []struct {
		name, zone, at string
		unit           calendar.Unit
		start, reset   string
		label          string
	}{
		{"utc day", "UTC", "2026-12-02T10:00:00Z", calendar.Day, "2026-12-02T00:00:00Z", "2026-12-03T00:00:00Z", "2026-12-02"},
		{"utc day, a nanosecond before midnight", "UTC", "2026-12-02T23:59:59.999999999Z", calendar.Day, "2026-12-02T00:00:00Z", "2026-12-03T00:00:00Z", "2026-12-02"},
		{"utc day, exactly midnight", "UTC", "2026-12-03T00:00:00Z", calendar.Day, "2026-12-03T00:00:00Z", "2026-12-04T00:00:00Z", "2026-12-03"},
		{"utc month", "UTC", "2026-12-02T10:00:00Z", calendar.Month, "2026-12-01T00:00:00Z", "2027-01-01T00:00:00Z", "2026-12"},

		// New York: EST (-5) -> EDT (-4) at 02:00 on 2026-03-08; back at 02:00 on 2026-11-01.
		{"new york spring forward: 23 hours", "America/New_York", "2026-03-08T12:00:00Z", calendar.Day, "2026-03-08T05:00:00Z", "2026-03-09T04:00:00Z", "2026-03-08"},
		{"new york spring forward, inside the skipped hour's instant", "America/New_York", "2026-03-08T07:00:00Z", calendar.Day, "2026-03-08T05:00:00Z", "2026-03-09T04:00:00Z", "2026-03-08"},
		{"new york day before spring forward", "America/New_York", "2026-03-08T04:59:59.999999999Z", calendar.Day, "2026-03-07T05:00:00Z", "2026-03-08T05:00:00Z", "2026-03-07"},
		{"new york, exactly the spring-forward day's midnight", "America/New_York", "2026-03-08T05:00:00Z", calendar.Day, "2026-03-08T05:00:00Z", "2026-03-09T04:00:00Z", "2026-03-08"},
		{"new york fall back: 25 hours", "America/New_York", "2026-11-01T12:00:00Z", calendar.Day, "2026-11-01T04:00:00Z", "2026-11-02T05:00:00Z", "2026-11-01"},
		{"new york fall back, the repeated hour", "America/New_York", "2026-11-01T06:30:00Z", calendar.Day, "2026-11-01T04:00:00Z", "2026-11-02T05:00:00Z", "2026-11-01"},
		{"new york, exactly after the fall-back day", "America/New_York", "2026-11-02T05:00:00Z", calendar.Day, "2026-11-02T05:00:00Z", "2026-11-03T05:00:00Z", "2026-11-02"},
		{"new york march: 31 days less an hour", "America/New_York", "2026-03-20T12:00:00Z", calendar.Month, "2026-03-01T05:00:00Z", "2026-04-01T04:00:00Z", "2026-03"},
		{"new york, a UTC instant already in the next UTC day", "America/New_York", "2026-12-03T03:00:00Z", calendar.Day, "2026-12-02T05:00:00Z", "2026-12-03T05:00:00Z", "2026-12-02"},

		// Berlin: CET (+1) -> CEST (+2) at 02:00 on 2026-03-29; back at 03:00 on 2026-10-25.
		{"berlin spring forward: 23 hours", "Europe/Berlin", "2026-03-29T12:00:00Z", calendar.Day, "2026-03-28T23:00:00Z", "2026-03-29T22:00:00Z", "2026-03-29"},
		{"berlin fall back: 25 hours", "Europe/Berlin", "2026-10-25T12:00:00Z", calendar.Day, "2026-10-24T22:00:00Z", "2026-10-25T23:00:00Z", "2026-10-25"},
		{"berlin, a nanosecond before the fall-back day ends", "Europe/Berlin", "2026-10-25T22:59:59.999999999Z", calendar.Day, "2026-10-24T22:00:00Z", "2026-10-25T23:00:00Z", "2026-10-25"},
		{"berlin, a UTC instant still in the previous UTC day", "Europe/Berlin", "2026-12-31T23:30:00Z", calendar.Day, "2026-12-31T23:00:00Z", "2027-01-01T23:00:00Z", "2027-01-01"},
		{"berlin october: 31 days and an hour", "Europe/Berlin", "2026-10-10T00:00:00Z", calendar.Month, "2026-09-30T22:00:00Z", "2026-10-31T23:00:00Z", "2026-10"},

		// Santiago skips local midnight: -04 -> -03 at 00:00 on 2026-09-06,
		// so that day starts at 01:00 local, the instant of the change; and
		// repeats 23:00-24:00 of 2026-04-04 (-03 -> -04).
		{"santiago, a day whose midnight is skipped", "America/Santiago", "2026-09-06T12:00:00Z", calendar.Day, "2026-09-06T04:00:00Z", "2026-09-07T03:00:00Z", "2026-09-06"},
		{"santiago, the day before it", "America/Santiago", "2026-09-05T12:00:00Z", calendar.Day, "2026-09-05T04:00:00Z", "2026-09-06T04:00:00Z", "2026-09-05"},
		{"santiago, a day with an hour repeated", "America/Santiago", "2026-04-04T12:00:00Z", calendar.Day, "2026-04-04T03:00:00Z", "2026-04-05T04:00:00Z", "2026-04-04"},

		// Clocks that go back across local midnight: the new date has
		// begun and the old date's repeated hour belongs to it, so the day
		// runs 25 or 27 hours and never hands a period back.
		{"goose bay, 00:01 ADT back to 23:01 AST, inside the repeat", "America/Goose_Bay", "2010-11-07T03:15:00Z", calendar.Day, "2010-11-07T03:00:00Z", "2010-11-08T04:00:00Z", "2010-11-07"},
		{"st johns, 00:01 NDT back to 23:01 NST", "America/St_Johns", "2010-11-07T02:45:00Z", calendar.Day, "2010-11-07T02:30:00Z", "2010-11-08T03:30:00Z", "2010-11-07"},
		{"amman, 01:00 back to 00:00", "Asia/Amman", "2021-10-28T21:30:00Z", calendar.Day, "2021-10-28T21:00:00Z", "2021-10-29T22:00:00Z", "2021-10-29"},
		{"casey, 00:00 +11 back to 21:00 +08: 27 hours", "Antarctica/Casey", "2023-03-08T13:00:00Z", calendar.Day, "2023-03-08T13:00:00Z", "2023-03-09T16:00:00Z", "2023-03-09"},
		{"goose bay, the month that holds the repeat", "America/Goose_Bay", "2010-11-07T03:15:00Z", calendar.Month, "2010-11-01T03:00:00Z", "2010-12-01T04:00:00Z", "2010-11"},
		// Samoa skipped 2011-12-30 altogether: the 29th ends where the 31st begins.
		{"apia, the day after the skipped one", "Pacific/Apia", "2011-12-30T12:00:00Z", calendar.Day, "2011-12-30T10:00:00Z", "2011-12-31T10:00:00Z", "2011-12-31"},
		{"apia, the day before the skipped one", "Pacific/Apia", "2011-12-30T09:59:59Z", calendar.Day, "2011-12-29T10:00:00Z", "2011-12-30T10:00:00Z", "2011-12-29"},

		// Month ends, a year's end, a leap day.
		{"jan 31 -> feb 1", "UTC", "2026-01-31T23:59:59.999999999Z", calendar.Day, "2026-01-31T00:00:00Z", "2026-02-01T00:00:00Z", "2026-01-31"},
		{"exactly feb 1", "UTC", "2026-02-01T00:00:00Z", calendar.Day, "2026-02-01T00:00:00Z", "2026-02-02T00:00:00Z", "2026-02-01"},
		{"january -> february", "UTC", "2026-01-31T12:00:00Z", calendar.Month, "2026-01-01T00:00:00Z", "2026-02-01T00:00:00Z", "2026-01"},
		{"dec 31 -> jan 1", "UTC", "2026-12-31T18:00:00Z", calendar.Day, "2026-12-31T00:00:00Z", "2027-01-01T00:00:00Z", "2026-12-31"},
		{"december -> january", "UTC", "2026-12-31T23:59:59.999999999Z", calendar.Month, "2026-12-01T00:00:00Z", "2027-01-01T00:00:00Z", "2026-12"},
		{"exactly the new year, month", "UTC", "2027-01-01T00:00:00Z", calendar.Month, "2027-01-01T00:00:00Z", "2027-02-01T00:00:00Z", "2027-01"},
		{"new york, new year", "America/New_York", "2027-01-01T04:59:59Z", calendar.Month, "2026-12-01T05:00:00Z", "2027-01-01T05:00:00Z", "2026-12"},
		{"leap day", "UTC", "2028-02-29T08:00:00Z", calendar.Day, "2028-02-29T00:00:00Z", "2028-03-01T00:00:00Z", "2028-02-29"},
		{"feb 28 of a leap year -> feb 29", "UTC", "2028-02-28T08:00:00Z", calendar.Day, "2028-02-28T00:00:00Z", "2028-02-29T00:00:00Z", "2028-02-28"},
		{"february of a leap year: 29 days", "UTC", "2028-02-10T00:00:00Z", calendar.Month, "2028-02-01T00:00:00Z", "2028-03-01T00:00:00Z", "2028-02"},
		{"feb 28 of 2027 -> mar 1 (no feb 29)", "UTC", "2027-02-28T08:00:00Z", calendar.Day, "2027-02-28T00:00:00Z", "2027-03-01T00:00:00Z", "2027-02-28"},
		{"february of 2027: 28 days", "UTC", "2027-02-28T23:59:59.999999999Z", calendar.Month, "2027-02-01T00:00:00Z", "2027-03-01T00:00:00Z", "2027-02"},
		{"berlin leap day", "Europe/Berlin", "2028-02-29T23:30:00Z", calendar.Day, "2028-02-29T23:00:00Z", "2028-03-01T23:00:00Z", "2028-03-01"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			loc := zone(t, c.zone)
			start, reset := calendar.Bounds(utc(c.at), loc, c.unit)
			if !start.Equal(utc(c.start)) || !reset.Equal(utc(c.reset)) {
				t.Errorf("Bounds(%s) = [%s, %s), want [%s, %s)", c.at, start.UTC().Format(time.RFC3339Nano), reset.UTC().Format(time.RFC3339Nano), c.start, c.reset)
			}
			if got := calendar.Label(start, loc, c.unit); got != c.label {
				t.Errorf("Label = %q, want %q", got, c.label)
			}
		})
	}
}

// TestBoundsHoldsEveryInstant: across two years of New York and Berlin,
// hour by hour, every instant is in its period (start <= t < reset), the
// period's start is its own (Bounds(start) = start) and the reset starts
// the next period: periods tile time without a gap or an overlap.
func TestBoundsHoldsEveryInstant(t *testing.T) {
	for _, name := range []string{"America/New_York", "Europe/Berlin", "America/Santiago", "Australia/Lord_Howe"} {
		loc := zone(t, name)
		for _, u := range []calendar.Unit{calendar.Day, calendar.Month} {
			for at := utc("2026-01-01T00:00:00Z"); at.Before(utc("2028-01-01T00:00:00Z")); at = at.Add(17 * time.Minute) {
				start, reset := calendar.Bounds(at, loc, u)
				if at.Before(start) || !at.Before(reset) {
					t.Fatalf("%s %d: %s not in [%s, %s)", name, u, at, start, reset)
				}
				if s2, _ := calendar.Bounds(start, loc, u); !s2.Equal(start) {
					t.Fatalf("%s %d: the period starting %s starts at %s", name, u, start, s2)
				}
				if s3, _ := calendar.Bounds(reset, loc, u); !s3.Equal(reset) {
					t.Fatalf("%s %d: the reset %s is not a period's start (%s)", name, u, reset, s3)
				}
				if s4, _ := calendar.Bounds(reset.Add(-1), loc, u); !s4.Equal(start) {
					t.Fatalf("%s %d: a nanosecond before the reset %s is not in [%s, ...)", name, u, reset, start)
				}
			}
		}
	}
}

// zones lists every zone Go's own zone database holds (the one time/tzdata
// embeds), so that the sweep below reaches each zone's history.
func zones(t *testing.T) []*time.Location {
	t.Helper()
	// The toolchain's GOROOT: runtime.GOROOT is empty in a binary built
	// with -trimpath (as CI builds).
	root, err := exec.Command("go", "env", "GOROOT").Output()
	if err != nil {
		t.Fatalf("go env GOROOT: %v", err)
	}
	db := filepath.Join(strings.TrimSpace(string(root)), "lib", "time", "zoneinfo.zip")
	z, err := zip.OpenReader(db)
	if err != nil {
		t.Fatalf("the zone list: %v", err)
	}
	defer z.Close()
	var locs []*time.Location
	for _, f := range z.File {
		if !strings.HasSuffix(f.Name, "/") {
			locs = append(locs, zone(t, f.Name))
		}
	}
	if len(locs) < 300 {
		t.Fatalf("only %d zones in %s", len(locs), db)
	}
	return locs
}

// TestBoundsProperty: in every zone, around every change of its clocks
// from 1970 to 2040 (where a period's edge goes wrong if anywhere), an
// instant every hour from 26 hours before to 26 hours after (7 minutes
// past the change's minute, so inside a repeated or skipped hour), and a
// nanosecond either side of the change, lies in its
// period (start <= t < reset), periods tile time (the reset starts the
// next, the start is its own), and the period is never one whose date
// the local clock has already passed.
func TestBoundsProperty(t *testing.T) {
	from, until := utc("1970-01-01T00:00:00Z"), utc("2040-01-01T00:00:00Z")
	var changes, checks int
	all := zones(t)
	for i := 0; i < len(all); i += zoneStride {
		loc := all[i]
		for at := from; at.Before(until); {
			_, change := at.In(loc).ZoneBounds()
			if change.IsZero() || !change.Before(until) {
				break
			}
			changes++
			probe := []time.Time{change.Add(-1), change, change.Add(1)}
			for d := -26*time.Hour + 7*time.Minute; d <= 26*time.Hour; d += time.Hour {
				probe = append(probe, change.Add(d))
			}
			for _, u := range []calendar.Unit{calendar.Day, calendar.Month} {
				for _, p := range probe {
					checks++
					if msg := boundsBroken(p, loc, u); msg != "" {
						t.Fatalf("%s, unit %d, %s (local %s), near the change at %s: %s", loc, u, p.UTC().Format(time.RFC3339Nano), p.In(loc), change.UTC(), msg)
					}
				}
			}
			at = change
		}
	}
	t.Logf("%d clock changes, %d instants", changes, checks)
}

func boundsBroken(at time.Time, loc *time.Location, u calendar.Unit) string {
	start, reset := calendar.Bounds(at, loc, u)
	switch {
	case at.Before(start) || !at.Before(reset):
		return fmt.Sprintf("not in [%s, %s)", start.In(loc), reset.In(loc))
	case !first(calendar.Bounds(start, loc, u)).Equal(start):
		return fmt.Sprintf("the period starting %s is not its own", start.In(loc))
	case !first(calendar.Bounds(reset, loc, u)).Equal(reset):
		return fmt.Sprintf("the reset %s starts no period", reset.In(loc))
	case calendar.Label(start, loc, u) < calendar.Label(at, loc, u):
		return fmt.Sprintf("the period %s is behind the local date", calendar.Label(start, loc, u))
	}
	return ""
}

func first(start, _ time.Time) time.Time { return start }
