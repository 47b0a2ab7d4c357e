package throttle_test

import (
	"math"
	"sync/atomic"
	"testing"

	"sluice/internal/throttle"
)

const ms = int64(1e6)

// step is one call on a queue with 100 ms spacing and a 300 ms bound: a take
// at now (wantAt -1: refused, with wantWait), or, with back, the give-back
// of the slot taken by step back-1 (GiveBackStored with store).
type step struct {
	now      int64
	spacing  int64 // 0: 100 ms
	store    int64 // ns of spacing an idle queue stores (TakeStored); 0: none
	back     int   // >0: give back step back-1's slot instead of taking one
	wantAt   int64
	wantWait int64
	wantTail bool // give-back: the tail moved back
}

func TestQueue(t *testing.T) {
	tests := []struct {
		name  string
		steps []step
	}{
		{"an idle queue lets a call go at once, then spaces them", []step{
			{now: 0, wantAt: 0},
			{now: 0, wantAt: 100 * ms, wantWait: 100 * ms},
			{now: 50 * ms, wantAt: 200 * ms, wantWait: 150 * ms},
			{now: 1000 * ms, wantAt: 1000 * ms}, // idle again
		}},
		{"a call past the bound is refused and takes nothing", []step{
			{now: 0, wantAt: 0},
			{now: 0, wantAt: 100 * ms, wantWait: 100 * ms},
			{now: 0, wantAt: 200 * ms, wantWait: 200 * ms},
			{now: 0, wantAt: 300 * ms, wantWait: 300 * ms},
			{now: 0, wantAt: -1, wantWait: 400 * ms},
			{now: 0, wantAt: -1, wantWait: 400 * ms},
		}},
		{"the last slot given back moves the tail back", []step{
			{now: 0, wantAt: 0},
			{now: 0, wantAt: 100 * ms, wantWait: 100 * ms},
			{now: 10 * ms, back: 2, wantTail: true},
			{now: 20 * ms, wantAt: 100 * ms, wantWait: 80 * ms},
		}},
		{"a slot given back inside the queue is the next call's", []step{
			{now: 0, wantAt: 0},
			{now: 0, wantAt: 100 * ms, wantWait: 100 * ms},
			{now: 0, wantAt: 200 * ms, wantWait: 200 * ms},
			{now: 0, wantAt: 300 * ms, wantWait: 300 * ms},
			{now: 10 * ms, back: 2}, // 200 and 300 ms are behind it
			{now: 20 * ms, wantAt: 100 * ms, wantWait: 80 * ms},
			{now: 20 * ms, wantAt: -1, wantWait: 380 * ms}, // the hole is used up
		}},
		{"a hole standing for less spacing than a call needs is left", []step{
			{now: 0, wantAt: 0},
			{now: 0, wantAt: 100 * ms, wantWait: 100 * ms},
			{now: 0, wantAt: 200 * ms, wantWait: 200 * ms},
			{now: 0, back: 2},
			{now: 0, spacing: 200 * ms, wantAt: -1, wantWait: 400 * ms},
			{now: 0, wantAt: 100 * ms, wantWait: 100 * ms},
		}},
		{"a hole whose time passed is forgotten", []step{
			{now: 0, wantAt: 0},
			{now: 0, wantAt: 100 * ms, wantWait: 100 * ms},
			{now: 0, wantAt: 200 * ms, wantWait: 200 * ms},
			{now: 0, back: 2},
			{now: 150 * ms, wantAt: 300 * ms, wantWait: 150 * ms},
		}},
		{"a slot given back when already due is not a hole", []step{
			{now: 0, wantAt: 0},
			{now: 0, wantAt: 100 * ms, wantWait: 100 * ms},
			{now: 0, wantAt: 200 * ms, wantWait: 200 * ms},
			{now: 100 * ms, back: 2},
			{now: 100 * ms, wantAt: 300 * ms, wantWait: 200 * ms},
		}},
		{"a queue that stores 3 permits spends them at once, then spaces", []step{
			{now: 0, store: 300 * ms, wantAt: -300 * ms}, // new: idle for ever
			{now: 0, store: 300 * ms, wantAt: -200 * ms},
			{now: 0, store: 300 * ms, wantAt: -100 * ms},
			{now: 0, store: 300 * ms, wantAt: 0}, // 3 stored + the call whose turn came
			{now: 0, store: 300 * ms, wantAt: 100 * ms, wantWait: 100 * ms},
		}},
		{"idle 1.5 spacings past the next free slot stores 1 permit", []step{
			{now: 0, store: 300 * ms, wantAt: -300 * ms},
			{now: 0, store: 300 * ms, wantAt: -200 * ms},
			{now: 0, store: 300 * ms, wantAt: -100 * ms},
			{now: 0, store: 300 * ms, wantAt: 0},
			{now: 0, store: 300 * ms, wantAt: 100 * ms, wantWait: 100 * ms},
			{now: 350 * ms, store: 300 * ms, wantAt: 200 * ms}, // next free slot: 200 ms
			{now: 350 * ms, store: 300 * ms, wantAt: 300 * ms},
			{now: 350 * ms, store: 300 * ms, wantAt: 400 * ms, wantWait: 50 * ms},
		}},
		{"a long idle stores no more than store", []step{
			{now: 0, store: 200 * ms, wantAt: -200 * ms},
			{now: 0, store: 200 * ms, wantAt: -100 * ms},
			{now: 0, store: 200 * ms, wantAt: 0},
			{now: 10_000 * ms, store: 200 * ms, wantAt: 9_800 * ms},
			{now: 10_000 * ms, store: 200 * ms, wantAt: 9_900 * ms},
			{now: 10_000 * ms, store: 200 * ms, wantAt: 10_000 * ms},
			{now: 10_000 * ms, store: 200 * ms, wantAt: 10_100 * ms, wantWait: 100 * ms},
		}},
		{"a stored permit given back is stored again", []step{
			{now: 0, store: 200 * ms, wantAt: -200 * ms},
			{now: 0, store: 200 * ms, wantAt: -100 * ms},
			{now: 0, back: 2, wantTail: true},
			{now: 0, store: 200 * ms, wantAt: -100 * ms},
			{now: 0, store: 200 * ms, wantAt: 0},
			{now: 0, store: 200 * ms, wantAt: 100 * ms, wantWait: 100 * ms},
		}},
		{"a stored permit given back out of order is stored again", []step{
			{now: 0, store: 200 * ms, wantAt: -200 * ms},
			{now: 0, store: 200 * ms, wantAt: -100 * ms},
			{now: 0, store: 200 * ms, wantAt: 0},
			{now: 0, store: 200 * ms, back: 1, wantTail: true}, // -100 and 0 are behind it
			{now: 0, store: 200 * ms, wantAt: 0},
			{now: 0, store: 200 * ms, wantAt: 100 * ms, wantWait: 100 * ms},
		}},
		{"a stored permit given back out of order later is stored in part", []step{
			{now: 0, store: 200 * ms, wantAt: -200 * ms},
			{now: 0, store: 200 * ms, wantAt: -100 * ms},
			{now: 0, store: 200 * ms, wantAt: 0},
			// 50 ms on, the queue would hold half a permit more had the
			// call never come: the tail moves back by 50 ms, not 100.
			{now: 50 * ms, store: 200 * ms, back: 1, wantTail: true},
			{now: 50 * ms, store: 200 * ms, wantAt: 50 * ms},
			{now: 50 * ms, store: 200 * ms, wantAt: 150 * ms, wantWait: 100 * ms},
		}},
		{"a stored permit given back out of order past its store is gone", []step{
			{now: 0, store: 200 * ms, wantAt: -200 * ms},
			{now: 0, store: 200 * ms, wantAt: -100 * ms},
			{now: 0, store: 200 * ms, wantAt: 0},
			{now: 100 * ms, store: 200 * ms, back: 1},
			{now: 100 * ms, store: 200 * ms, wantAt: 100 * ms},
			{now: 100 * ms, store: 200 * ms, wantAt: 200 * ms, wantWait: 100 * ms},
		}},
		{"a stored permit given back with calls queued behind it is gone", []step{
			{now: 0, store: 200 * ms, wantAt: -200 * ms},
			{now: 0, store: 200 * ms, wantAt: -100 * ms},
			{now: 0, store: 200 * ms, wantAt: 0},
			{now: 0, store: 200 * ms, wantAt: 100 * ms, wantWait: 100 * ms},
			{now: 0, store: 200 * ms, back: 1},
			{now: 0, store: 200 * ms, wantAt: 200 * ms, wantWait: 200 * ms},
		}},
		{"a queue that stores nothing keeps its tail for a past slot out of order", []step{
			{now: 0, wantAt: 0},
			{now: 0, wantAt: 100 * ms, wantWait: 100 * ms},
			{now: 100 * ms, back: 1}, // the call at 100 ms is forwarded now
			{now: 100 * ms, wantAt: 200 * ms, wantWait: 100 * ms},
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var tail atomic.Int64
			tail.Store(math.MinInt64 / 4)
			var h throttle.Holes
			at := make([]int64, len(tc.steps))
			for i, st := range tc.steps {
				sp := st.spacing
				if sp == 0 {
					sp = 100 * ms
				}
				if st.back > 0 {
					if moved := throttle.GiveBackStored(&tail, &h, st.now, at[st.back-1], sp, st.store); moved != st.wantTail {
						t.Fatalf("step %d: give-back moved the tail %v, want %v", i, moved, st.wantTail)
					}
					continue
				}
				a, wait, ok := throttle.TakeStored(&tail, &h, st.now, sp, st.store, 300*ms)
				if !ok {
					a = -1
				}
				at[i] = a
				if a != st.wantAt || wait != st.wantWait {
					t.Fatalf("step %d at %d ms: slot %d wait %d, want %d wait %d (-1: refused)", i, st.now/ms, a, wait, st.wantAt, st.wantWait)
				}
			}
		})
	}
}

// A queue remembers at most 1024 holes, keeping the earliest: 2000 slots
// given back inside a long queue leave 1024 for later calls, in order.
func TestHolesBounded(t *testing.T) {
	var tail atomic.Int64
	tail.Store(math.MinInt64 / 4)
	var h throttle.Holes
	const n = 2001 // slots 0 .. 2000 ms
	for range n {
		throttle.Take(&tail, &h, 0, ms, math.MaxInt64/4)
	}
	// Given back just before 0, latest first; the last slot is kept, so
	// that each is inside the queue.
	for i := range int64(n - 1) {
		throttle.GiveBack(&tail, &h, -1, (n-2-i)*ms, ms)
	}
	for i := range int64(1024) {
		if at, _, _ := throttle.Take(&tail, &h, -1, ms, math.MaxInt64/4); at != i*ms {
			t.Fatalf("take %d: slot %d ms, want hole %d ms", i, at/ms, i)
		}
	}
	if at, _, _ := throttle.Take(&tail, &h, -1, ms, math.MaxInt64/4); at != n*ms {
		t.Errorf("after 1024 holes: slot %d ms, want the tail %d ms", at/ms, n)
	}
}
