package system_test

import (
	"testing"

	"sluice/config"
	"sluice/limiter/system"
)

// A queued call is forwarded when its wait ends, so that is when its
// maxQps pass counts: no real second forwards more than maxQps calls, the
// waiting ones included (SPEC §3, Grades). Counted at its entry, the pass
// of a call that waited 1.5 s left the window before the call was sent.
func TestQueuedCallPassCountsWhenForwarded(t *testing.T) {
	const s = 1000 * ms
	g := system.New(config.System{MaxQps: 1}, nil, nil)

	a, v := g.Enter(0)
	if v.Blocked {
		t.Fatal("first call blocked")
	}
	a.Queue()
	if v := a.Resume(s + s/2); v.Blocked {
		t.Fatal("resumed at 1.5 s with an empty window: blocked")
	}
	if _, v := g.Enter(2 * s); !v.Blocked {
		t.Fatal("a call at 2 s passed: the queued call forwarded at 1.5 s was counted at 0 s, 2 in one second")
	}
	if _, v := g.Enter(s + s/2 + s); v.Blocked {
		t.Fatal("a call at 2.5 s (1 s after the forward) blocked")
	}

	// A window full when the wait ends refuses the queued call, and its
	// Cancel takes back no other call's pass.
	g = system.New(config.System{MaxQps: 1}, nil, nil)
	a, _ = g.Enter(0)
	a.Queue()
	b, v := g.Enter(s + s/5) // a's entry pass left at 1 s
	if v.Blocked {
		t.Fatal("b at 1.2 s blocked")
	}
	if v := a.Resume(s + s/2); !v.Blocked {
		t.Fatal("a resumed at 1.5 s, with b forwarded at 1.2 s: 2 in one second")
	}
	a.Cancel(s + s/2)
	if _, v := g.Enter(s + 3*s/5); !v.Blocked {
		t.Fatal("a call at 1.6 s passed: a's Cancel took back b's pass")
	}
	b.Exit(s+s/2, false)
}
