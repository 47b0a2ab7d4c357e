package hotparam_test

import (
	"strconv"
	"sync"
	"sync/atomic"
	"testing"

	"sluice/hotparam"
)

// Many goroutines entering and ending calls on a few values, with a cap that
// forces evictions: the in-flight limit holds at every instant and every
// slot is released (run with -race).
func TestConcurrencyUnderParallelLoad(t *testing.T) {
	r := inFlightRule()
	r.Items, r.Count, r.MaxTrackedValues = nil, 3, 4
	s := compile(t, r)
	c := s.For("get-order")
	const values, workers, rounds = 6, 8, 2000
	var inFlight [values]atomic.Int64
	var over atomic.Int64
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range rounds {
				k := (w + i) % values
				tok, v := c.Enter(int64(i), one(strconv.Itoa(k)), 1)
				if v.Blocked {
					continue
				}
				if inFlight[k].Add(1) > 3 {
					over.Add(1)
				}
				inFlight[k].Add(-1)
				if i%2 == 0 {
					tok.Exit(int64(i), 200)
				} else {
					tok.Cancel(int64(i))
				}
			}
		}()
	}
	wg.Wait()
	if n := over.Load(); n > 0 {
		t.Errorf("%d times more than 3 calls of one value were in flight", n)
	}
	if n := s.Tracked("get-order"); n > 4 {
		t.Errorf("tracked %d values, cap 4", n)
	}
	// Everything was released: each value takes 3 calls again.
	for k := range values {
		var held []hotparam.Token
		for i := range 3 {
			tok, v := c.Enter(0, one(strconv.Itoa(k)), 1)
			if v.Blocked {
				t.Fatalf("value %d call %d blocked after all calls ended", k, i)
			}
			held = append(held, tok)
		}
		for i := range held {
			held[i].Exit(0, 200)
		}
	}
}

func TestQPSUnderParallelLoadPassesExactlyTheBucket(t *testing.T) {
	r := seedRule()
	r.Items, r.Count, r.BurstCount = nil, 100, 50
	c := compile(t, r).For("get-order")
	var passed atomic.Int64
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 100 {
				if _, v := c.Enter(0, one("hot"), 1); !v.Blocked {
					passed.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	if n := passed.Load(); n != 150 {
		t.Errorf("800 parallel calls at one instant: %d passed, want count+burst = 150", n)
	}
}
