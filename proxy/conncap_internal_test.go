package proxy

import (
	"net/netip"
	"testing"
	"time"
)

func TestAutoMaxConnections(t *testing.T) {
	for _, tt := range []struct {
		limit uint64
		want  int
	}{
		{0, 0},            // unknown: no cap
		{1 << 40, 0},      // unlimited in effect
		{20000, 9936},     // this machine's: (20000 - 128) / 2
		{1024, 448},       // a common default
		{1 << 20, 524224}, // systemd's hard limit
		{200, 50},         // too low for the reserve: a quarter
	} {
		if got := autoMaxConnectionsOf(tt.limit); got != tt.want {
			t.Errorf("open-file limit %d: automatic maxConnections %d, want %d", tt.limit, got, tt.want)
		}
	}
}

// A peer's penalty ends penaltyFor after it began, and what is over is
// swept once the tables grow past sweepAt: peers that stopped resetting
// leave no trace, however many there were.
func TestPenaltiesEndAndAreSwept(t *testing.T) {
	var cc connCounts
	now := time.Unix(1e9, 0) // on the grid of the window's buckets
	peer := netip.MustParseAddr("192.0.2.1")
	for i := range prematurePeerStreams - 1 {
		if cc.premature(peer, now.Add(time.Duration(i)*time.Millisecond), false) {
			t.Fatalf("penalized after %d premature ends, want %d", i+1, prematurePeerStreams)
		}
	}
	if !cc.premature(peer, now, false) {
		t.Fatalf("not penalized after %d premature ends within %v", prematurePeerStreams, prematureWindow)
	}
	cc.mu.Lock()
	until := cc.penalized[peer]
	cc.mu.Unlock()
	if !until.Equal(now.Add(penaltyFor)) {
		t.Fatalf("penalized until %v, want %v after", until.Sub(now), penaltyFor)
	}
	if cc.premature(netip.MustParseAddr("192.0.2.2"), now, true) {
		t.Fatal("a trusted peer was penalized")
	}
	// Past its window, a peer's count starts again: 400 a window, for
	// five windows, is never 500 in one.
	other := netip.MustParseAddr("192.0.2.3")
	for i := range 2000 {
		at := now.Add(time.Duration(i) * (prematureWindow / 400))
		if cc.premature(other, at, false) {
			t.Fatalf("a peer resetting 400 streams per %v penalized at its %dth", prematureWindow, i+1)
		}
	}
	// A penalty over admits again; what is over is swept.
	cc.mu.Lock()
	cc.penalized[peer] = now.Add(-time.Second)
	cc.mu.Unlock()
	if why := cc.admit(peer, connLimits{}); why != "" {
		t.Fatalf("a peer whose penalty is over refused: %s", why)
	}
	cc.leave(peer)
	later := now.Add(time.Hour)
	cc.mu.Lock()
	defer cc.mu.Unlock()
	for i := range sweepAt {
		cc.penalize(netip.AddrFrom4([4]byte{10, 0, byte(i >> 8), byte(i)}), now)
	}
	for i := range 2 * sweepAt {
		cc.penalize(netip.AddrFrom4([4]byte{10, 1, byte(i >> 8), byte(i)}), later)
	}
	for ip := range cc.penalized {
		if ip.As4()[1] == 0 {
			t.Fatalf("%v's penalty was kept an hour after it ended, through %d new ones", ip, 2*sweepAt)
		}
	}
}

// A table of peers all still within their window is not walked at every
// insert: a sweep that finds nothing over waits until the table has
// doubled (an attack from many addresses would otherwise cost a walk of
// them all per premature end).
func TestSweepsAreAmortized(t *testing.T) {
	var cc connCounts
	now := time.Unix(1e9, 0) // on the grid of the window's buckets
	peer := func(i int) netip.Addr { return netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)}) }
	for i := range sweepAt {
		cc.premature(peer(i), now, false)
	}
	cc.premature(peer(sweepAt), now, false) // the first sweep: nothing over
	if cc.sweepResets != 2*sweepAt {
		t.Fatalf("after a sweep of %d peers within their window, the next at %d, want %d", sweepAt, cc.sweepResets, 2*sweepAt)
	}
	for i := sweepAt + 1; i < 2*sweepAt-1; i++ {
		cc.premature(peer(i), now.Add(2*prematureWindow), false) // all of the first are over now, yet no sweep yet
	}
	if n := len(cc.resets); n != 2*sweepAt-1 {
		t.Fatalf("%d peers kept before the table doubled, want %d (no sweep)", n, 2*sweepAt-1)
	}
	cc.premature(peer(2*sweepAt-1), now.Add(2*prematureWindow), false) // the table doubled: the next insert sweeps
	cc.premature(peer(2*sweepAt), now.Add(2*prematureWindow), false)
	if n := len(cc.resets); n != sweepAt {
		t.Fatalf("%d peers kept after the sweep at twice the size, want the %d still within their window", n, sweepAt)
	}
}

// An IPv6 host is given a /64 whole: a penalty holds for every address of
// it, so that stepping to another address does not shed it; an IPv4
// penalty holds for its address alone.
func TestPenaltyCoversAnIPv6Slash64(t *testing.T) {
	var cc connCounts
	now := time.Now()
	cc.mu.Lock()
	cc.penalize(netip.MustParseAddr("2001:db8:1:2::1"), now)
	cc.penalize(netip.MustParseAddr("192.0.2.1"), now)
	cc.mu.Unlock()
	for _, tc := range []struct {
		ip   string
		want string
	}{
		{"2001:db8:1:2::1", RefusedPenalized},
		{"2001:db8:1:2:ffff:ffff:ffff:fffe", RefusedPenalized},
		{"2001:db8:1:3::1", ""},
		{"192.0.2.1", RefusedPenalized},
		{"192.0.2.2", ""},
	} {
		ip := netip.MustParseAddr(tc.ip)
		if got := cc.admit(ip, connLimits{}); got != tc.want {
			t.Errorf("%s: admit says %q, want %q", tc.ip, got, tc.want)
		} else if got == "" {
			cc.leave(ip)
		}
	}
}

// A peer is judged over the sliding window that ends at each premature
// end, not a window of its own that it can straddle: whatever the phase of
// its burst on the window's grid (0 to 9.9 s past a bucket's start, 100 ms
// steps), 600 ends within a second penalize it at no sooner than the
// 500th and no later than the 560th (the older bucket is weighed by the
// part of it still in the window), and a peer at 450 ends per 10 s, evenly
// spread, is never penalized over a minute.
func TestPeerResetsSlideAtEveryPhase(t *testing.T) {
	base := time.Unix(1e9, 0)
	for ph := time.Duration(0); ph < prematureWindow; ph += 100 * time.Millisecond {
		var cc connCounts
		peer := netip.MustParseAddr("192.0.2.1")
		start := base.Add(ph)
		at := 0
		for i := range 600 {
			if cc.premature(peer, start.Add(time.Duration(i)*time.Second/600), false) {
				at = i + 1
				break
			}
		}
		if at < prematurePeerStreams || at > 560 {
			t.Errorf("phase %v: a burst of 600 in a second penalized at end %d, want 500..560", ph, at)
		}
		// One end, then 990 in the second that ends a window after it
		// and the one after: a window counted from a peer's first end
		// would start afresh in the middle of them.
		var straddle connCounts
		straddle.premature(peer, start, false)
		penalized := false
		for i := range 990 {
			if straddle.premature(peer, start.Add(prematureWindow-time.Second/2+time.Duration(i)*time.Second/990), false) {
				penalized = true
				break
			}
		}
		if !penalized {
			t.Errorf("phase %v: 990 ends in a second that straddles the peer's own window were not penalized", ph)
		}
		var steady connCounts
		for i := range 6 * 450 {
			if steady.premature(peer, start.Add(time.Duration(i)*prematureWindow/450), false) {
				t.Fatalf("phase %v: 450 ends per %v penalized at the %dth", ph, prematureWindow, i+1)
			}
		}
	}
}
