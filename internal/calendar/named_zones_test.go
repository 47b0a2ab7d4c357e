package calendar

import (
	"testing"
	"time"
	_ "time/tzdata"
)

// Review: the days and months the brief names, checked against hand-worked
// answers.
func TestBoundsNamedCases(t *testing.T) {
	cases := []struct {
		zone       string
		at         string // RFC 3339
		u          Unit
		start, end string // RFC 3339
	}{
		// Berlin: spring forward 2026-03-29 02:00 -> 03:00 (23 h day)
		{"Europe/Berlin", "2026-03-29T12:00:00+02:00", Day, "2026-03-29T00:00:00+01:00", "2026-03-30T00:00:00+02:00"},
		{"Europe/Berlin", "2026-03-28T23:59:59+01:00", Day, "2026-03-28T00:00:00+01:00", "2026-03-29T00:00:00+01:00"},
		// fall back 2026-10-25 03:00 -> 02:00 (25 h day)
		{"Europe/Berlin", "2026-10-25T02:30:00+01:00", Day, "2026-10-25T00:00:00+02:00", "2026-10-26T00:00:00+01:00"},
		{"Europe/Berlin", "2026-10-25T02:30:00+02:00", Day, "2026-10-25T00:00:00+02:00", "2026-10-26T00:00:00+01:00"},
		{"Europe/Berlin", "2026-03-15T00:00:00+01:00", Month, "2026-03-01T00:00:00+01:00", "2026-04-01T00:00:00+02:00"},
		{"Europe/Berlin", "2026-10-31T23:59:59+01:00", Month, "2026-10-01T00:00:00+02:00", "2026-11-01T00:00:00+01:00"},
		// Sao Paulo 2018-11-04: midnight skipped (00:00 -> 01:00): the day starts at 01:00
		{"America/Sao_Paulo", "2018-11-04T10:00:00-02:00", Day, "2018-11-04T01:00:00-02:00", "2018-11-05T00:00:00-02:00"},
		{"America/Sao_Paulo", "2018-11-03T23:59:59-03:00", Day, "2018-11-03T00:00:00-03:00", "2018-11-04T01:00:00-02:00"},
		// 2019-02-17 00:00 (-02) back to 2019-02-16 23:00 (-03): midnight
		// -02 never shows; the 16th lasts 25 h
		{"America/Sao_Paulo", "2019-02-16T23:30:00-03:00", Day, "2019-02-16T00:00:00-02:00", "2019-02-17T00:00:00-03:00"},
		{"America/Sao_Paulo", "2019-02-16T22:30:00-02:00", Day, "2019-02-16T00:00:00-02:00", "2019-02-17T00:00:00-03:00"},
		{"America/Sao_Paulo", "2026-07-01T12:00:00-03:00", Day, "2026-07-01T00:00:00-03:00", "2026-07-02T00:00:00-03:00"},
		// 30-minute offsets: Kolkata, Adelaide (DST), Lord Howe (a 30-minute DST shift)
		{"Asia/Kolkata", "2026-03-31T23:59:59+05:30", Month, "2026-03-01T00:00:00+05:30", "2026-04-01T00:00:00+05:30"},
		{"Asia/Kolkata", "2026-04-01T00:00:00+05:30", Day, "2026-04-01T00:00:00+05:30", "2026-04-02T00:00:00+05:30"},
		{"Australia/Adelaide", "2026-04-05T12:00:00+09:30", Day, "2026-04-05T00:00:00+10:30", "2026-04-06T00:00:00+09:30"},
		{"Australia/Lord_Howe", "2026-04-05T12:00:00+10:30", Day, "2026-04-05T00:00:00+11:00", "2026-04-06T00:00:00+10:30"},
		{"Australia/Lord_Howe", "2026-10-04T12:00:00+11:00", Day, "2026-10-04T00:00:00+10:30", "2026-10-05T00:00:00+11:00"},
		{"Asia/Kathmandu", "2026-12-31T23:59:59+05:45", Month, "2026-12-01T00:00:00+05:45", "2027-01-01T00:00:00+05:45"},
		// leap year
		{"UTC", "2028-02-29T12:00:00Z", Day, "2028-02-29T00:00:00Z", "2028-03-01T00:00:00Z"},
		{"UTC", "2028-02-29T23:59:59Z", Month, "2028-02-01T00:00:00Z", "2028-03-01T00:00:00Z"},
		{"America/New_York", "2028-02-29T23:59:59-05:00", Month, "2028-02-01T00:00:00-05:00", "2028-03-01T00:00:00-05:00"},
		{"Pacific/Chatham", "2026-01-31T23:59:59+13:45", Month, "2026-01-01T00:00:00+13:45", "2026-02-01T00:00:00+13:45"},
	}
	for _, c := range cases {
		loc, err := time.LoadLocation(c.zone)
		if err != nil {
			t.Fatal(err)
		}
		at, _ := time.Parse(time.RFC3339, c.at)
		ws, _ := time.Parse(time.RFC3339, c.start)
		we, _ := time.Parse(time.RFC3339, c.end)
		s, e := Bounds(at, loc, c.u)
		if !s.Equal(ws) || !e.Equal(we) {
			t.Errorf("%s %s: [%s, %s), want [%s, %s)", c.zone, c.at, s.Format(time.RFC3339), e.Format(time.RFC3339), c.start, c.end)
		}
		if s2, e2 := Bounds(e, loc, c.u); !s2.Equal(e) || !e2.After(e) {
			t.Errorf("%s: the next period starts at %v, want %v", c.zone, s2, e)
		}
		if s3, _ := Bounds(e.Add(-time.Nanosecond), loc, c.u); !s3.Equal(s) {
			t.Errorf("%s: the last instant belongs to %v", c.zone, s3)
		}
	}
}
