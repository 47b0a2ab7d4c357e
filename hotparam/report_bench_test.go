package hotparam_test

import (
	"strconv"
	"testing"
)

// BenchmarkReportTop is GET /api/params' top list over a table of 100,000
// values, every one of them blocked in the last minute (a client that
// varies the value at each call): what one operator's read costs, and
// holds each shard's lock for.
func BenchmarkReportTop(b *testing.B) {
	c := compile(b, seedRule()).For("get-order")
	now := sec(100)
	for i := range 100000 {
		flood(c, now, strconv.Itoa(1000+i), 3+i%7)
	}
	if got := c.Report(now, nil, 100)[0].Values; len(got) != 100 {
		b.Fatalf("top list of %d values, want 100", len(got))
	}
	b.ReportAllocs()
	for b.Loop() {
		c.Report(now, nil, 100)
	}
}

// The top list of n is the first n of the whole list, for every n, with
// values that tie on blocks (listed by value) and values offered in
// every order of blocks: the heap that keeps the n best as the table is
// walked picks what sorting every value picked.
func TestReportTopIsThePrefixOfTheWholeList(t *testing.T) {
	c := compile(t, seedRule()).For("get-order")
	now := sec(100)
	for i := range 300 {
		// 2 of each value's calls pass; blocks 0..12, many ties, in an
		// order unrelated to the values' names or the table's.
		flood(c, now, strconv.Itoa((i*7919)%1000), 2+(i*37)%13)
	}
	all := c.Report(now, nil, 1000)[0].Values
	if len(all) < 200 {
		t.Fatalf("whole list of %d values, want most of the 300 blocked", len(all))
	}
	for i := 1; i < len(all); i++ {
		if a, b := all[i-1], all[i]; a.Blocks < b.Blocks || a.Blocks == b.Blocks && a.Value >= b.Value {
			t.Fatalf("whole list out of order at %d: %+v before %+v", i, a, b)
		}
	}
	for _, n := range []int{1, 2, 3, 10, 63, 64, 65, 100, len(all) - 1, len(all), len(all) + 1} {
		got := c.Report(now, nil, n)[0].Values
		want := all[:min(n, len(all))]
		if len(got) != len(want) {
			t.Errorf("top %d: %d values, want %d", n, len(got), len(want))
			continue
		}
		for i := range want {
			if got[i] != want[i] {
				t.Errorf("top %d, place %d: %+v, want %+v", n, i, got[i], want[i])
				break
			}
		}
	}
}
