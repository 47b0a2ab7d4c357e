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
// starts. Where a zone's clocks skip local midnight (a daylight saving
// change at 00:00, as in America/Santiago or America/Havana), the period
// starts when the skipped day begins: the instant of the change.
func Bounds(t time.Time, loc *time.Location, u Unit) (start, reset time.Time) {
	y, m, d := t.In(loc).Date()
	if u == Month {
		return midnight(y, m, 1, loc), midnight(y, m+1, 1, loc)
	}
	return midnight(y, m, d, loc), midnight(y, m, d+1, loc)
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

// midnight is the first instant of the local date y-m-d (m and d
// normalised as time.Date does). time.Date resolves a local time inside a
// skipped hour with either offset; resolved with the later one, 00:00
// lands in the day before, and the day's first instant is the end of
// that zone period: the change itself.
func midnight(y int, m time.Month, d int, loc *time.Location) time.Time {
	t := time.Date(y, m, d, 0, 0, 0, 0, loc)
	if _, _, ld := t.Date(); ld != time.Date(y, m, d, 12, 0, 0, 0, time.UTC).Day() {
		_, end := t.ZoneBounds()
		return end
	}
	return t
}
