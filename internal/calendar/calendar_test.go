package calendar_test

import (
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
