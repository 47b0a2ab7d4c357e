package ring

import (
	"math"
	"sync"
	"sync/atomic"
	"testing"
)

func TestFloorDivMod(t *testing.T) {
	for _, c := range []struct{ a, b, div, mod int64 }{
		{0, 10, 0, 0},
		{9, 10, 0, 9},
		{10, 10, 1, 0},
		{-1, 10, -1, 9},
		{-10, 10, -1, 0},
		{-11, 10, -2, 9},
		{math.MinInt64, 10, math.MinInt64/10 - 1, 2},
	} {
		if got := FloorDiv(c.a, c.b); got != c.div {
			t.Errorf("FloorDiv(%d, %d) = %d, want %d", c.a, c.b, got, c.div)
		}
		if got := Mod(c.a, c.b); got != c.mod {
			t.Errorf("Mod(%d, %d) = %d, want %d", c.a, c.b, got, c.mod)
		}
	}
}

type pair struct{ n, m int64 }

func (p *pair) Add(o pair) { p.n += o.n; p.m += o.m }
func (p *pair) Sub(o pair) { p.n -= o.n; p.m -= o.m }

// op is one step on a ring of 4 buckets of 10 ns: add d at instant at (or
// only read the total at at, if d is zero), then the window must sum to want.
type op struct {
	at   int64
	d    pair
	want pair
}

func TestRing(t *testing.T) {
	for _, c := range []struct {
		name string
		ops  []op
	}{
		{"one bucket", []op{{5, pair{1, 0}, pair{1, 0}}, {9, pair{1, 1}, pair{2, 1}}}},
		{"buckets sum", []op{{0, pair{1, 0}, pair{1, 0}}, {10, pair{2, 0}, pair{3, 0}}, {39, pair{4, 0}, pair{7, 0}}}},
		{"oldest bucket drops", []op{{0, pair{1, 0}, pair{1, 0}}, {10, pair{2, 0}, pair{3, 0}}, {40, pair{}, pair{2, 0}}, {59, pair{}, pair{0, 0}}}},
		{"a gap of a whole window clears", []op{{0, pair{1, 1}, pair{1, 1}}, {35, pair{1, 0}, pair{2, 1}}, {75, pair{}, pair{0, 0}}, {1000, pair{3, 0}, pair{3, 0}}}},
		{"late instant counts in the newest", []op{{25, pair{1, 0}, pair{1, 0}}, {3, pair{1, 0}, pair{2, 0}}, {55, pair{}, pair{2, 0}}, {60, pair{}, pair{0, 0}}}},
		{"negative instants", []op{{-15, pair{1, 0}, pair{1, 0}}, {-1, pair{1, 0}, pair{2, 0}}, {15, pair{}, pair{2, 0}}, {25, pair{}, pair{1, 0}}}},
		{"first instant far before origin", []op{{math.MinInt64, pair{1, 0}, pair{1, 0}}, {0, pair{}, pair{0, 0}}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := New[pair](4, 10)
			for i, o := range c.ops {
				var got pair
				if o.d == (pair{}) {
					got = r.Total(o.at)
				} else {
					r.Add(o.at, o.d)
					got = r.Sum()
				}
				if got != o.want {
					t.Fatalf("step %d (at %d): sum %+v, want %+v", i, o.at, got, o.want)
				}
				var slots pair
				for _, b := range r.Slots() {
					slots.Add(b)
				}
				if slots != got {
					t.Fatalf("step %d: slots sum to %+v, the running sum is %+v", i, slots, got)
				}
			}
		})
	}
}

func TestRingClearAndGeometry(t *testing.T) {
	r := New[pair](3, 100)
	r.Add(250, pair{2, 1})
	if r.Head() != 2 || r.NewestSlot() != 2 || r.Len() != 3 || r.Width() != 100 {
		t.Fatalf("head %d slot %d len %d width %d", r.Head(), r.NewestSlot(), r.Len(), r.Width())
	}
	r.Add(310, pair{1, 0})
	if r.NewestSlot() != 0 {
		t.Fatalf("bucket 3 is in slot %d, want 0", r.NewestSlot())
	}
	// Buckets 3, 2 and 1 by age; 1 got nothing.
	if r.Ago(0) != (pair{1, 0}) || r.Ago(1) != (pair{2, 1}) || r.Ago(2) != (pair{}) {
		t.Fatalf("by age: %+v %+v %+v", r.Ago(0), r.Ago(1), r.Ago(2))
	}
	r.Clear()
	if r.Sum() != (pair{}) || r.Head() != 3 {
		t.Fatalf("after Clear: sum %+v head %d", r.Sum(), r.Head())
	}
	if got := r.Total(320); got != (pair{}) {
		t.Fatalf("cleared ring sums to %+v", got)
	}
}

type counter struct{ n atomic.Int64 }

func (c *counter) Reset() { c.n.Store(0) }

func TestAtomic(t *testing.T) {
	var slots [4]Slot[counter]
	var a Atomic[counter, *counter]
	a.Init(10, slots[:])
	sum := func(now int64) (s int64) {
		k := a.Num(now)
		for i := range a.Len() {
			if b := a.Live(k, i); b != nil {
				s += b.n.Load()
			}
		}
		return s
	}
	for _, o := range []struct {
		at, add, want int64
		dropped       bool
	}{
		{at: 0, add: 1, want: 1},
		{at: 15, add: 2, want: 3},
		{at: 39, add: 1, want: 4},
		{at: 40, add: 0, want: 3},                // bucket 0 left the window
		{at: 41, add: 5, want: 8},                // slot 0 now holds bucket 4
		{at: 2, add: 7, want: 0, dropped: true},  // bucket 0's slot holds a newer one: dropped
		{at: 85, add: 1, want: 1},                // buckets 5..8: only 8 counts
		{at: -5, add: 1, want: 0, dropped: true}, // before the ring
	} {
		b := a.At(o.at)
		if (b == nil) != o.dropped {
			t.Fatalf("At(%d) = %v, dropped want %v", o.at, b, o.dropped)
		}
		if b != nil {
			b.n.Add(o.add)
		}
		if got := sum(o.at); got != o.want {
			t.Fatalf("after add at %d: window sums %d, want %d", o.at, got, o.want)
		}
	}
	if got := sum(85); got != 1 {
		t.Fatalf("window at 85 sums %d, want 1 (the dropped adds counted nowhere)", got)
	}
	if a.Still(85) == nil || a.Still(41) != nil {
		t.Fatal("Still: bucket 8 is held; bucket 4's slot now holds bucket 8")
	}
}

func TestAtomicStill(t *testing.T) {
	var slots [2]Slot[counter]
	var a Atomic[counter, *counter]
	a.Init(10, slots[:])
	a.At(5).n.Add(3)
	if b := a.Still(5); b == nil || b.n.Load() != 3 {
		t.Fatal("Still does not find the bucket of an instant it holds")
	}
	a.At(25) // bucket 2 takes bucket 0's slot
	if a.Still(5) != nil {
		t.Fatal("Still finds a bucket whose slot moved on")
	}
}

// Concurrent adds and rotations: no count is lost within one bucket, and
// the race detector sees no unsynchronised access.
func TestAtomicConcurrent(t *testing.T) {
	var slots [4]Slot[counter]
	var a Atomic[counter, *counter]
	a.Init(10, slots[:])
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for range 1000 {
				if b := a.At(int64(g + 100)); b != nil {
					b.n.Add(1)
				}
			}
		})
	}
	wg.Wait()
	if got := a.At(100).n.Load(); got != 4000 {
		t.Fatalf("bucket holds %d, want 4000", got)
	}
}
