// Package calendar finds the calendar period (a day, a month) an instant
// falls in, in a time zone: where a calendar quota's window starts and when
// it resets. It is pure: the instant is an argument, nothing reads the clock.
package calendar

import "time"

// Unit is the length of a calendar period.
type Unit uint8

const (
	// Day: from local midnight to the next (23 or 25 hours on a day
	// daylight saving time starts or ends).
	Day Unit = iota
	// Month: from the 1st at local midnight to the next 1st.
	Month
)

// Nominal is a period's length where no calendar is at hand (a local
// fallback that counts in a rate rather than a calendar): a day is 24
// hours, a month its longest, 31 days, so that such a rate never passes
// more than the quota would.
func (u Unit) Nominal() time.Duration {
	if u == Month {
		return 31 * 24 * time.Hour
	}
	return 24 * time.Hour
}

// Bounds returns the period of unit u that holds t in loc: its first
// instant (start <= t) and the first instant of the next one (the reset,
// t < reset). An instant exactly at a boundary belongs to the period it
// starts. A period starts at the first instant whose local date reaches
// its first day: where a zone's clocks skip local midnight (a daylight
// saving change at 00:00, as in America/Santiago or America/Havana), that
// is the instant of the change; where they go back across midnight (00:01
// to 23:01 in America/Goose_Bay in 2010, 01:00 to 00:00 in Asia/Amman),
// the new day has begun and the repeated hour of the old date belongs to
// it, so the local date never takes a period back and every instant lies
// in exactly one period.
func Bounds(t time.Time, loc *time.Location, u Unit) (start, reset time.Time) {
	y, m, d := t.In(loc).Date()
	if u == Month {
		d = 1
	}
	start, reset = reach(y, m, d, loc), reach(y, m, d+1, loc)
	if u == Month {
		reset = reach(y, m+1, 1, loc)
	}
	// t's local date may lag a period that has already begun (the clock
	// went back across its midnight): step on while the next has begun.
	for !t.Before(reset) {
		start = reset
		if u == Month {
			m++
			reset = reach(y, m+1, 1, loc)
		} else {
			d++
			reset = reach(y, m, d+1, loc)
		}
	}
	return start, reset
}

// Label names the period that starts at start (as Bounds gives it) in
// loc: "2026-03-08" for a day, "2026-03" for a month. Every gateway names
// a period alike, whatever its own zone: the Redis key of a value's quota
// ends with it.
func Label(start time.Time, loc *time.Location, u Unit) string {
	if u == Month {
		return start.In(loc).Format("2006-01")
	}
	return start.In(loc).Format("2006-01-02")
}

// reach is the first instant whose local date in loc is y-m-d or later
// (m and d normalised as time.Date does). Within one zone period (one
// offset) local time runs with the instant, so there it is the later of
// the period's start and the local midnight at that offset; the first
// zone period where that falls before its end holds the answer. The scan
// starts two days early: no offset is near a day, so no instant before
// it has reached the date.
func reach(y int, m time.Month, d int, loc *time.Location) time.Time {
	wall := time.Date(y, m, d, 0, 0, 0, 0, time.UTC)
	for at := wall.Add(-48 * time.Hour); ; {
		_, off := at.In(loc).Zone()
		from, to := at.In(loc).ZoneBounds()
		t := wall.Add(-time.Duration(off) * time.Second)
		if !from.IsZero() && t.Before(from) {
			t = from
		}
		if to.IsZero() || t.Before(to) {
			return t.In(loc)
		}
		at = to
	}
}
