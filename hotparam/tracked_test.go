package hotparam_test

import (
	"runtime"
	"strconv"
	"strings"
	"testing"

	"sluice/config"
	"sluice/hotparam"
)

func TestTrackedNeverExceedsCap(t *testing.T) {
	for _, cap := range []int{1, 100, 5000} { // 5000 spreads over several shards
		t.Run(strconv.Itoa(cap), func(t *testing.T) {
			r := seedRule()
			r.MaxTrackedValues = cap
			s := compile(t, r)
			c := s.For("get-order")
			for i := range 3 * cap {
				tok, _ := c.Enter(int64(i), one(strconv.Itoa(i)), 1)
				tok.Exit(int64(i), 200)
				if i%97 == 0 || i == 3*cap-1 {
					if n := s.Tracked("get-order"); n > cap {
						t.Fatalf("after %d distinct values %d are tracked, cap %d", i+1, n, cap)
					}
				}
			}
			if n := s.Tracked("get-order"); n != cap {
				t.Errorf("after 3x cap distinct values %d are tracked, want the cap %d", n, cap)
			}
		})
	}
}

// An evicted value returns with a full bucket, like a new value; a value kept
// recent is not evicted and keeps its state.
func TestEvictionForgetsOnlyLeastRecentlyUsed(t *testing.T) {
	r := seedRule()
	r.Items, r.MaxTrackedValues = nil, 10
	c := compile(t, r).For("get-order")
	drain := func(v string) {
		for range 2 {
			c.Enter(0, order(v), 1)
		}
	}
	drain("hot")
	drain("cold")
	for i := range 20 {
		c.Enter(0, order("hot"), 1) // blocked, but touches "hot"
		c.Enter(0, order(strconv.Itoa(i)), 1)
	}
	if _, v := c.Enter(0, order("hot"), 1); !v.Blocked {
		t.Error("a recently used value lost its state")
	}
	if _, v := c.Enter(0, order("cold"), 1); v.Blocked {
		t.Error("an evicted value did not come back with a full bucket")
	}
}

func TestActiveValuesAreNotEvicted(t *testing.T) {
	busy := inFlightRule()
	busy.Items, busy.Count, busy.MaxTrackedValues = nil, 1, 10
	queued := throttleRule(1000, 2000) // 1ms apart
	queued.MaxTrackedValues = 10

	tests := []struct {
		name string
		rule config.ParamRule
	}{
		{"concurrency: a value with a call in flight", busy},
		{"throttle: a value with a call queued", queued},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := compile(t, tc.rule).For("get-order")
			// Make "v" active: one call in flight, or one waiting a second.
			tok, _ := c.Enter(0, order("v"), 1000)
			if tc.rule.Grade == config.GradeQPS {
				tok, _ = c.Enter(0, order("v"), 1000)
			}
			// Thirty other values, each idle 2ms after its call.
			now := sec(0.1)
			for i := range 30 {
				tk, v := c.Enter(now, order(strconv.Itoa(i)), 1)
				if v.Blocked {
					t.Fatalf("value %d blocked while idle values could be evicted", i)
				}
				tk.Exit(now, 200)
				now += sec(0.002)
			}
			// Still tracked: "v" is at its limit (a fresh value would pass at once).
			if _, v := c.Enter(now, order("v"), 1); !v.Blocked && v.Wait == 0 {
				t.Error("an active value was evicted and came back fresh")
			}
			tok.Exit(0, 200)
		})
	}
}

// A new value is refused only when no tracked value can be evicted, wherever
// the idle ones sit in the LRU: behind long-lived calls (streams, long polls)
// entered early, or in another shard. Each case holds values in flight, ends
// the calls of some (idle), then offers fresh values and keeps them in
// flight: as many pass as there were idle values, and the next is refused.
func TestFreshValuePassesWhileIdleValuesExist(t *testing.T) {
	tests := []struct {
		name   string
		cap    int
		isIdle func(i int) bool // value i's call ended
	}{
		{"20 long calls at the LRU end, 80 idle", 100, func(i int) bool { return i >= 20 }},
		{"one idle value behind 99 busy", 100, func(i int) bool { return i == 99 }},
		{"every tenth value idle", 100, func(i int) bool { return i%10 == 9 }},
		// 4096 values spread over 4 shards: the idle one is in the middle of
		// its shard's LRU, and most fresh values land in other shards.
		{"one idle value in another shard", 4096, func(i int) bool { return i == 2000 }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := inFlightRule()
			r.Items, r.Count, r.MaxTrackedValues = nil, 1, tc.cap
			s := compile(t, r)
			c := s.For("get-order")
			var held []hotparam.Token
			idle := 0
			for i := range tc.cap {
				tok, v := c.Enter(0, one("old"+strconv.Itoa(i)), 1)
				if v.Blocked {
					t.Fatalf("value %d of %d blocked below the cap", i, tc.cap)
				}
				if tc.isIdle(i) {
					tok.Exit(0, 200)
					idle++
				} else {
					held = append(held, tok)
				}
			}
			for i := range idle + 1 {
				tok, v := c.Enter(1, one("new"+strconv.Itoa(i)), 1)
				if i < idle && v.Blocked {
					t.Fatalf("fresh value %d (nothing in flight, limit 1) blocked while %d tracked values were idle", i, idle-i)
				}
				if i == idle && !v.Blocked {
					t.Fatalf("fresh value %d passed while all %d tracked values were in flight", i, tc.cap)
				}
				held = append(held, tok)
			}
			if n := s.Tracked("get-order"); n != tc.cap {
				t.Errorf("tracked %d, want the cap %d", n, tc.cap)
			}
			for i := range held {
				held[i].Exit(2, 200)
			}
		})
	}
}

// When every tracked value is active, a new value cannot be tracked and the
// rule fails closed rather than grow past its cap; it passes as soon as one
// tracked value becomes idle, however that happens.
func TestAllActiveFailsClosed(t *testing.T) {
	tests := []struct {
		name string
		rule config.ParamRule
		// busy makes value v active at 0; free makes a idle, returning when.
		busy func(c *hotparam.Checker, v string) hotparam.Token
		free func(a hotparam.Token) int64
	}{
		{"concurrency: a call ends", inFlightRule(), enterAt0, func(a hotparam.Token) int64 { a.Exit(sec(0.01), 200); return sec(0.01) }},
		{"concurrency: a call is cancelled", inFlightRule(), enterAt0, func(a hotparam.Token) int64 { a.Cancel(sec(0.01)); return sec(0.01) }},
		{"throttle: a queued call goes", throttleRule(10, 1000), queueAt0, func(hotparam.Token) int64 { return sec(0.1) }},
		{"throttle: a queued call leaves the queue", throttleRule(10, 1000), queueAt0, func(a hotparam.Token) int64 { a.Cancel(sec(0.01)); return sec(0.01) }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := tc.rule
			r.MaxTrackedValues = 2
			s := compile(t, r)
			c := s.For("get-order")
			a := tc.busy(c, "a")
			b := tc.busy(c, "b")
			// Twice: the second refusal must not hide a later release.
			for _, at := range []int64{0, sec(0.005)} {
				if _, v := c.Enter(at, order("c"), 1); !v.Blocked {
					t.Fatal("a third value passed while two values, the cap, are active")
				}
			}
			if n := s.Tracked("get-order"); n != 2 {
				t.Errorf("tracked %d, want 2", n)
			}
			at := tc.free(a)
			if _, v := c.Enter(at, order("c"), 1); v.Blocked {
				t.Error("a new value was blocked after a tracked value became idle")
			}
			b.Exit(at, 200)
		})
	}
}

func enterAt0(c *hotparam.Checker, v string) hotparam.Token {
	tok, _ := c.Enter(0, order(v), 1)
	return tok
}

// queueAt0 takes v's pass at 0 and queues a second call behind it (throttle
// rule of 10 QPS: until 100ms).
func queueAt0(c *hotparam.Checker, v string) hotparam.Token {
	c.Enter(0, order(v), 1)
	tok, _ := c.Enter(0, order(v), 1)
	return tok
}

// A tracked value costs about the same memory whatever its length: a header,
// cookie or query value may be 64 KiB, and a flood of such values must not
// hold maxTrackedValues copies of them. 500 values of 60 KiB held 31 MiB
// when each was kept whole; kept as digests they hold well under 1 MiB.
func TestLongValuesAreTrackedInBoundedBytes(t *testing.T) {
	r := seedRule()
	r.Items = nil // the default cap, 100000, is far above 500
	s := compile(t, r)
	c := s.For("get-order")
	pad := strings.Repeat("x", 60<<10)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for i := range 500 {
		tok, _ := c.Enter(0, one(strconv.Itoa(i)+pad), 1)
		tok.Exit(0, 200)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	if n := s.Tracked("get-order"); n != 500 {
		t.Fatalf("tracked %d, want 500", n)
	}
	held := int64(after.HeapAlloc) - int64(before.HeapAlloc)
	t.Logf("500 tracked values of 60 KiB hold %d KiB", held>>10)
	if held > 1<<20 {
		t.Errorf("500 tracked values of 60 KiB hold %d KiB, want under 1 MiB", held>>10)
	}
	runtime.KeepAlive(c)
	runtime.KeepAlive(pad) // live at both readings: only what the table holds counts
}

func TestTrackedWithoutRules(t *testing.T) {
	s := hotparam.Compile(nil, nil)
	if s.For("x") != nil || s.Tracked("x") != 0 {
		t.Error("an empty Set has a checker")
	}
	// A nil Checker passes everything.
	tok, v := s.For("x").Enter(0, one("1"), 1)
	if v.Blocked {
		t.Error("nil Checker blocked")
	}
	tok.Exit(0, 200)
}
