package cluster_test

// The window's promises as properties, through the whole Service (its block
// cache and leases included) against the real Redis, on synthetic time: the
// Service decides at instants the test sets (SetClock), so every check is
// exact, and the run takes as long as its round trips. So they run in
// parallel (t.Parallel), after the package's real-time tests and never
// beside them: other tests change how long they take, not what they see.

import (
	"cmp"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"sluice/cluster"
	"sluice/config"
)

// synthClock is the instant the Services under test decide at, in µs after
// synthBase.
type synthClock struct{ us atomic.Int64 }

func (c *synthClock) now() time.Duration {
	return time.Duration(synthBase+c.us.Load()) * time.Microsecond
}

// privateSynthService is a Service on a Redis of the test's own (whose
// script calls it can count with the client it returns) deciding at the
// returned clock's instants.
func privateSynthService(t *testing.T) (*cluster.Service, *synthClock, *redis.Client) {
	t.Helper()
	srv := startPrivateRedis(t)
	clock := new(synthClock)
	s := newService(t, cluster.Options{URL: srv.url(), Namespace: namespace(t), Timeout: 5 * time.Second, Heartbeat: time.Hour})
	s.SetClock(clock.now)
	rdb := redis.NewClient(must(redis.ParseURL(srv.url())))
	t.Cleanup(func() { rdb.Close() })
	return s, clock, rdb
}

// synthService is a Service on the shared Redis deciding at clock's instants.
func synthService(t *testing.T, ns string, clock *synthClock) *cluster.Service {
	t.Helper()
	s := newService(t, cluster.Options{URL: redisURL(t), Namespace: ns, Timeout: 5 * time.Second})
	s.SetClock(clock.now)
	return s
}

// pass is one passed call: when (µs) and how many tokens.
type pass struct{ at, n int64 }

// offerAt makes one call of n tokens at each instant (µs, ascending) and
// returns the passes and the number refused.
func offerAt(t *testing.T, s *cluster.Service, clock *synthClock, rule *config.FlowRule, key string, n int64, at []int64) (passes []pass, refused int) {
	t.Helper()
	for _, a := range at {
		clock.us.Store(a)
		ok, err := s.Acquire(rule, key, n)
		if err != nil {
			t.Fatalf("Acquire at %dµs: %v", a, err)
		}
		if ok {
			passes = append(passes, pass{a, n})
		} else {
			refused++
		}
	}
	return passes, refused
}

// grid is calls per interval evenly spaced over intervals intervals of ivUs,
// from start: call k at start + floor(k*ivUs/perInterval), so call k and call
// k+perInterval are exactly one interval apart.
func grid(start, ivUs, perInterval, intervals int64) []int64 {
	at := make([]int64, 0, perInterval*intervals)
	for k := range perInterval * intervals {
		at = append(at, start+k*ivUs/perInterval)
	}
	return at
}

// maxInAnyWindow is the most tokens passed in any real interval (t-iv, t].
func maxInAnyWindow(ps []pass, ivUs int64) int64 {
	var best, in int64
	j := 0
	for i := range ps {
		in += ps[i].n
		for ps[i].at-ps[j].at >= ivUs {
			in -= ps[j].n
			j++
		}
		best = max(best, in)
	}
	return best
}

// perInterval is the tokens passed in each interval [start+k*iv, start+(k+1)*iv).
func perInterval(ps []pass, start, ivUs, intervals int64) []int64 {
	out := make([]int64, intervals)
	for _, p := range ps {
		if k := (p.at - start) / ivUs; k >= 0 && k < intervals {
			out[k] += p.n
		}
	}
	return out
}

func windowRule(count float64, intervalMs int64) *config.FlowRule {
	r := qpsRule(count, config.ThresholdGlobal)
	r.StatIntervalMs = intervalMs
	r.LimitApp = "synthetic" // per-origin windows: each case has its own
	return r
}

type windowCase struct {
	count      float64
	intervalMs int64
	n          int64
}

func (c windowCase) String() string {
	return fmt.Sprintf("count=%g/interval=%dms/n=%d", c.count, c.intervalMs, c.n)
}

// windowCases sweeps counts (one above the 1024 slots, where a slot is a
// group of tokens), intervals and tokens per call; the largest counts at
// the default interval only, to bound the round trips.
func windowCases() []windowCase {
	var cs []windowCase
	for _, iv := range []int64{100, 1000, 60000} {
		for _, count := range []float64{1, 5, 10, 100, 1000, 2500} {
			if count > 100 && iv != 1000 {
				continue
			}
			for _, n := range []int64{1, 3} {
				if n <= int64(count) {
					cs = append(cs, windowCase{count, iv, n})
				}
			}
		}
	}
	return cs
}

// groupSlack is how many passes that have left a window may still count:
// above RingSlots a slot is a group of g tokens that counts until its newest
// token leaves, so up to g-1 of its tokens may have left already.
func groupSlack(count float64) int64 {
	k := int64(count)
	if k <= cluster.RingSlots {
		return 0
	}
	return (k+cluster.RingSlots-1)/cluster.RingSlots - 1
}

// A client whose calls are at least statIntervalMs/count apart (for n
// tokens a call: count/n calls an interval) is never refused. Above 1024
// slots, a client at count-(g-1) an interval is never refused (see
// groupSlack); TestWindowGroupsAtExactlyTheCount measures exactly count.
func TestWindowPacedClientIsNeverRefused(t *testing.T) {
	t.Parallel()
	clock := new(synthClock)
	s := synthService(t, namespace(t), clock)
	for i, c := range windowCases() {
		t.Run(c.String(), func(t *testing.T) {
			iv := c.intervalMs * 1000
			calls := (int64(c.count) - groupSlack(c.count)) / c.n
			start := int64(i) * 37_000 % iv // start phases vary by 37ms
			at := grid(start+int64(i)*3600e6, iv, calls, 3)
			passes, refused := offerAt(t, s, clock, windowRule(c.count, c.intervalMs), "paced"+c.String(), c.n, at)
			if refused != 0 {
				t.Errorf("%d calls of %d tokens, %v apart: %d refused, want 0", len(at), c.n, time.Duration(iv/calls)*time.Microsecond, refused)
			}
			if m := maxInAnyWindow(passes, iv); m > int64(c.count) {
				t.Errorf("%d tokens in one real interval, count %g", m, c.count)
			}
		})
	}
}

// Under a steady overload each interval passes exactly count (whole calls
// of n tokens; within 0.1% below above 1024, where slots are groups), and no
// real interval holds more than count.
func TestWindowOverloadPassesExactlyCount(t *testing.T) {
	t.Parallel()
	clock := new(synthClock)
	s := synthService(t, namespace(t), clock)
	const intervals = 4
	for i, c := range windowCases() {
		for _, factor := range []float64{1.5, 3} {
			t.Run(fmt.Sprintf("%v/x%g", c, factor), func(t *testing.T) {
				iv := c.intervalMs * 1000
				fits := int64(c.count) / c.n // whole calls an interval holds
				// whole calls an interval, so that a freed slot meets a call
				// (1.5 x count 1 is 2 calls an interval)
				calls := int64(factor*float64(fits) + 0.999)
				start := int64(i)*3600e6 + int64(i)*37_000%iv
				at := grid(start, iv, calls, intervals)
				passes, _ := offerAt(t, s, clock, windowRule(c.count, c.intervalMs), fmt.Sprintf("over%v%g", c, factor), c.n, at)
				got := perInterval(passes, start, iv, intervals)
				want := fits * c.n
				low := want
				if c.count > cluster.RingSlots {
					low = int64(float64(want) * 0.999)
				}
				for k, g := range got {
					if g < low || g > want {
						t.Errorf("interval %d passed %d tokens, want %d (at least %d); per interval %v", k, g, want, low, got)
						break
					}
				}
				if m := maxInAnyWindow(passes, iv); m > int64(c.count) {
					t.Errorf("%d tokens in one real interval, count %g", m, c.count)
				}
			})
		}
	}
}

// Two gateways share a global count: each client paced at 99% of half the
// count is never refused, though at the largest count the gateways hold
// leases (stamped a few ms late at most, well under the 1% to
// spare); and under overload the two together pass exactly count per
// interval.
func TestWindowTwoGatewaysShareExactly(t *testing.T) {
	t.Parallel()
	srv := startPrivateRedis(t)
	rdb := redis.NewClient(must(redis.ParseURL(srv.url())))
	defer rdb.Close()
	clock := new(synthClock)
	ns := namespace(t)
	var svcs [2]*cluster.Service
	for i := range svcs {
		svcs[i] = newService(t, cluster.Options{URL: srv.url(), Namespace: ns, Timeout: 5 * time.Second, Heartbeat: time.Hour})
		svcs[i].SetClock(clock.now)
	}
	for _, count := range []int64{10, 100, 2500} {
		rule := windowRule(float64(count), 1000)
		const iv = int64(1e6)
		for _, tc := range []struct {
			name  string
			calls int64 // per gateway per interval
		}{{"paced at 99%", count * 99 / 200}, {"overload x3", 3 * count / 2}} {
			key := fmt.Sprint(tc.name, count)
			// a's calls on the grid, b's halfway between
			atA := grid(0, iv, tc.calls, 4)
			var passes []pass
			refused := 0
			before := evalCalls(t, rdb)
			for _, at := range atA {
				for i, s := range svcs {
					p, r := offerAt(t, s, clock, rule, key, 1, []int64{at + int64(i)*iv/tc.calls/2})
					passes = append(passes, p...)
					refused += r
				}
			}
			trips := evalCalls(t, rdb) - before
			got := perInterval(passes, 0, iv, 4)
			t.Logf("count %d, %s: passed per interval %v, %d refused, %d round trips for %d calls", count, tc.name, got, refused, trips, 2*len(atA))
			want, low := count, count
			if tc.name != "overload x3" {
				want, low = 2*tc.calls, 2*tc.calls
				if refused != 0 {
					t.Errorf("count %d, each gateway at 99%% of half the count: %d refused, want 0", count, refused)
				}
			} else if count > cluster.RingSlots {
				low = count * 999 / 1000
			}
			for k, g := range got {
				if g < low || g > want {
					t.Errorf("count %d, %s: interval %d passed %d, want %d (at least %d)", count, tc.name, k, g, want, low)
				}
			}
			if m := maxInAnyWindow(passes, iv); m > count {
				t.Errorf("count %d, %s: %d in one real interval", count, tc.name, m)
			}
		}
	}
}

// Above 1024 a client paced at exactly the count can be refused, when a
// group's oldest token has left but its newest has not: the window counts up
// to g-1 passes too many there. It never passes more than count, and such a
// client is refused rarely; the test pins both, and logs how rarely.
func TestWindowGroupsAtExactlyTheCount(t *testing.T) {
	t.Parallel()
	clock := new(synthClock)
	s := synthService(t, namespace(t), clock)
	for _, count := range []int64{1025, 2500, 5000} {
		const iv = int64(1e6)
		at := grid(0, iv, count, 3)
		passes, refused := offerAt(t, s, clock, windowRule(float64(count), 1000), fmt.Sprint("exact", count), 1, at)
		t.Logf("count %d (groups of %d): a client at exactly the count: %d of %d refused (%.3f%%); per interval %v",
			count, groupSlack(float64(count))+1, refused, len(at), 100*float64(refused)/float64(len(at)), perInterval(passes, 0, iv, 3))
		if float64(refused) > float64(len(at))/float64(cluster.RingSlots) {
			t.Errorf("count %d: %d of %d refused, want at most 1/%d", count, refused, len(at), cluster.RingSlots)
		}
		if m := maxInAnyWindow(passes, iv); m > count {
			t.Errorf("count %d: %d in one real interval", count, m)
		}
	}
}

// Leases far from the count save round trips, and when the load then rises
// to an overload no real interval holds more than count, leased tokens
// included (they are stamped with the last instant they may be used).
// Leases need at least 2048 tokens an interval (a lease is at most count/2048).
func TestWindowLeasesKeepTheBound(t *testing.T) {
	t.Parallel()
	s, clock, rdb := privateSynthService(t)
	for _, c := range []struct{ count, intervalMs int64 }{{20000, 10000}} {
		rule := windowRule(float64(c.count), c.intervalMs)
		iv := c.intervalMs * 1000
		key := fmt.Sprint("lease", c.count)
		// 40% of the count for 1.5 intervals, then 3x for one
		calm := grid(0, iv, c.count*2/5, 2)[:c.count*2/5*3/2]
		before := evalCalls(t, rdb)
		p1, r1 := offerAt(t, s, clock, rule, key, 1, calm)
		trips := evalCalls(t, rdb) - before
		rush := grid(iv*3/2, iv, 3*c.count, 1)
		p2, _ := offerAt(t, s, clock, rule, key, 1, rush)
		passes := append(p1, p2...)
		t.Logf("count %d per %dms: %d calls at 40%% took %d round trips (%d refused); then 3x for an interval: %d passed; most in a real interval %d",
			c.count, c.intervalMs, len(calm), trips, r1, len(p2), maxInAnyWindow(passes, iv))
		if r1 != 0 {
			t.Errorf("count %d: %d refused at 40%% of the count", c.count, r1)
		}
		if trips > int64(len(calm))/3 {
			t.Errorf("count %d: %d of %d calls at 40%% of the count went to Redis; leases should serve most", c.count, trips, len(calm))
		}
		if m := maxInAnyWindow(passes, iv); m > c.count {
			t.Errorf("count %d: %d passes in one real interval", c.count, m)
		}
	}
}

// Clients at 99% of their share whose calls come late by up to 40ms (a busy
// machine) still keep within a 10 s window's 1% (100ms) to spare, so none may
// be refused, though some leased tokens then go unused: the gateways return
// them.
func TestWindowLateCallsUnderLeasesAreNotRefused(t *testing.T) {
	t.Parallel()
	for _, count := range []int64{1000, 5000} {
		t.Run(fmt.Sprint("count=", count), func(t *testing.T) { lateCallsUnderLeases(t, count) })
	}
}

func lateCallsUnderLeases(t *testing.T, count int64) {
	clock := new(synthClock)
	ns := namespace(t)
	a, b := synthService(t, ns, clock), synthService(t, ns, clock)
	const iv = int64(10e6)
	rule := windowRule(float64(count), 10000)
	type call struct {
		at int64
		s  *cluster.Service
	}
	var calls []call
	rng := uint64(1)
	jitter := func() int64 { // xorshift: the same late calls every run
		rng ^= rng << 13
		rng ^= rng >> 7
		rng ^= rng << 17
		if rng%4 == 0 {
			return int64(rng>>8) % 40_000
		}
		return 0
	}
	for i, s := range []*cluster.Service{a, b} {
		per := count * 99 / 200 // a gateway's 99% of half, per 10 s
		last := int64(0)
		for _, at := range grid(int64(i)*7_000, iv, per, 2) {
			at = max(at+jitter(), last) // late, never reordered
			last = at
			calls = append(calls, call{at, s})
		}
	}
	slices.SortStableFunc(calls, func(x, y call) int { return cmp.Compare(x.at, y.at) })
	var passes []pass
	refused := 0
	for _, c := range calls {
		p, r := offerAt(t, c.s, clock, rule, "late", 1, []int64{c.at})
		passes = append(passes, p...)
		refused += r
	}
	t.Logf("%d calls: %d refused; per interval %v", len(calls), refused, perInterval(passes, 0, iv, 2))
	if refused != 0 {
		t.Errorf("%d of %d calls refused, want 0", refused, len(calls))
	}
	if m := maxInAnyWindow(passes, iv); m > count {
		t.Errorf("%d in one real interval", m)
	}
}
