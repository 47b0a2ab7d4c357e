package system_test

import (
	"testing"

	"sluice/config"
	"sluice/limiter/system"
)

// A call waiting to be forwarded (a flow rule's throttle queue, a
// prioritized call's reserved pass) is not in flight: with maxConcurrency 1
// a queued call leaves the slot to a call another route forwards meanwhile,
// and takes it back only if it is free when its wait ends, so the calls
// forwarded never exceed maxConcurrency. Each slot is given back once,
// whether the call is cancelled while queued, refused when its wait ends
// or forwarded.
func TestQueuedCallIsNotInFlight(t *testing.T) {
	g := system.New(config.System{MaxConcurrency: 1}, nil, nil)
	queued, v := g.Enter(0)
	if v.Blocked {
		t.Fatal("first call blocked")
	}
	queued.Queue()
	other, v := g.Enter(1 * ms)
	if v.Blocked {
		t.Fatal("a call while the only other one waits in a queue: blocked (the queued call held the slot)")
	}
	if v := queued.Resume(2 * ms); !v.Blocked {
		t.Fatal("wait over while another call is in flight: resumed past maxConcurrency 1")
	}
	queued.Cancel(2 * ms) // refused: nothing more to give back
	other.Exit(3*ms, false)
	for _, end := range []struct {
		name string
		end  func(tok *system.Token)
	}{
		{"cancelled while queued", func(tok *system.Token) { tok.Cancel(5 * ms) }},
		{"resumed and forwarded", func(tok *system.Token) {
			if v := tok.Resume(5 * ms); v.Blocked {
				t.Fatal("wait over, nothing in flight: blocked")
			}
			tok.Exit(6*ms, false)
		}},
		{"resumed then cancelled", func(tok *system.Token) {
			tok.Resume(5 * ms)
			tok.Cancel(6 * ms)
		}},
	} {
		tok, v := g.Enter(4 * ms)
		if v.Blocked {
			t.Fatalf("%s: the slot was not given back before", end.name)
		}
		tok.Queue()
		tok.Queue() // twice is once
		end.end(&tok)
		a, v1 := g.Enter(7 * ms)
		_, v2 := g.Enter(7 * ms)
		if v1.Blocked || !v2.Blocked {
			t.Fatalf("%s: then two calls: blocked %v, %v; want one slot exactly", end.name, v1.Blocked, v2.Blocked)
		}
		a.Exit(8*ms, false)
	}
}

// The wait is not response time: maxAvgRtMs and the adaptive check measure
// a call from the end of its wait, so a route whose throttle queue delays
// calls by seconds does not make an upstream answering in 10 ms look slow
// and shed the whole gateway. A queued call cancelled gives its maxQps pass
// back, as any cancelled call.
func TestQueuedCallTimeAndPass(t *testing.T) {
	g := system.New(config.System{MaxAvgRtMs: 100}, nil, nil)
	tok, _ := g.Enter(0)
	tok.Queue()
	tok.Resume(5000 * ms)
	tok.Exit(5010*ms, false) // 5 s queued, 10 ms in flight
	busy, _ := g.Enter(5020 * ms)
	if _, v := g.Enter(5030 * ms); v.Blocked {
		t.Errorf("after a call of 10 ms in flight (and 5 s queued): blocked by maxAvgRtMs 100")
	}
	busy.Exit(5040*ms, false)

	q := system.New(config.System{MaxQps: 1}, nil, nil)
	tok, _ = q.Enter(0)
	tok.Queue()
	tok.Cancel(10 * ms)
	if tok, v := q.Enter(20 * ms); v.Blocked {
		t.Errorf("maxQps 1, the only pass cancelled while queued: the next call blocked")
	} else {
		tok.Exit(30*ms, false)
	}
}
