package hotparam_test

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"sluice/config"
	"sluice/hotparam"
)

// vipItem is an item that matches a class of values: the value keeps the
// index of the item it matched when it was first seen.
func vipItem(count float64) config.ParamItem {
	return config.ParamItem{Value: "vip-", Match: config.MatchPrefix, Count: count}
}

// drain enters value at now until a call is blocked (at most limit+1
// calls) and returns how many passed.
func drain(c *hotparam.Checker, now int64, value string, limit int) int {
	for i := range limit + 1 {
		if _, vd := c.Enter(now, order(value), 1); vd.Blocked {
			return i
		}
	}
	return limit + 1
}

// edit compiles rule as an edit of prev at now.
func edit(prev *hotparam.Set, now int64, rules ...config.ParamRule) *hotparam.Set {
	return hotparam.CompileWith(defaulted(rules...), prev, hotparam.Options{Now: now})
}

// An edited qps reject rule keeps the tokens each value spent: lowering a
// count during an incident gave every value a full bucket again, a fresh
// burst for every attacker at the moment of the edit. Swept over old and
// new counts (1 to 30), burstCount and durationSec, for the rule's count,
// an exact item and a class item: a value that spent k tokens of its
// bucket finds its new bucket (count + burstCount) less k, never below
// empty; a value whose bucket refilled finds the new bucket full; and a
// new bucket's time later every value has its new count again (so the
// carried state refills at the new rate, under the item it matched).
func TestEditedBucketRuleKeepsSpentTokens(t *testing.T) {
	t0 := sec(1000)
	long := strings.Repeat("L", 200) // kept by its digest
	for from := 1; from <= 30; from++ {
		for to := 1; to <= 30; to++ {
			old := seedRule()
			old.Count, old.BurstCount, old.DurationSec = float64(from), int64(from*7%4), int64(1+from%2)
			old.Items = []config.ParamItem{{Value: "102", Count: float64(from*3%30 + 1)}, vipItem(float64(from*13%30 + 1))}
			nr := old
			nr.Count, nr.BurstCount, nr.DurationSec = float64(to), int64(to*5%4), int64(1+to%3)
			nr.Items = []config.ParamItem{{Value: "102", Count: float64(to*11%30 + 1)}, vipItem(float64(to*17%30 + 1))}
			countOf := func(r config.ParamRule, value string) float64 {
				switch {
				case value == "102":
					return r.Items[0].Count
				case strings.HasPrefix(value, "vip-"):
					return r.Items[1].Count
				}
				return r.Count
			}
			full := func(r config.ParamRule, value string) int { return int(countOf(r, value)) + int(r.BurstCount) }
			name := fmt.Sprintf("count %d+%d/%ds (items %v, %v) -> %d+%d/%ds (items %v, %v)",
				from, old.BurstCount, old.DurationSec, old.Items[0].Count, old.Items[1].Count,
				to, nr.BurstCount, nr.DurationSec, nr.Items[0].Count, nr.Items[1].Count)

			s1 := compile(t, old)
			c1 := s1.For("get-order")
			spent := map[string]int{}
			for _, v := range []string{"a", "102", "vip-7", long} {
				spent[v] = drain(c1, t0, v, 100)
				if spent[v] != full(old, v) {
					t.Fatalf("%s: the old rule passed %d of %s, want its full bucket %d", name, spent[v], v, full(old, v))
				}
			}
			half := full(old, "b") / 2
			for range half {
				c1.Enter(t0, order("b"), 1)
			}
			spent["b"] = half
			drain(c1, t0-sec(100), "idle", 100) // long refilled
			spent["idle"] = 0

			c2 := edit(s1, t0, nr).For("get-order")
			for _, v := range []string{"a", "102", "vip-7", long, "b", "idle", "new"} {
				want := max(full(nr, v)-spent[v], 0)
				if got := drain(c2, t0, v, 100); got != want {
					t.Errorf("%s: value %.10s spent %d, then %d passed at once, want %d", name, v, spent[v], got, want)
				}
			}
			// Each bucket is now empty, and full again once its tokens'
			// time has passed at the new rate, under the item it matched.
			for _, v := range []string{"a", "102", "vip-7", long, "b", "idle"} {
				refill := float64(full(nr, v)) * float64(nr.DurationSec) * 1e9 / countOf(nr, v)
				if got := drain(c2, t0+int64(math.Ceil(refill))+sec(0.001), v, 100); got != full(nr, v) {
					t.Errorf("%s: value %.10s refilled: %d passed, want its new bucket %d", name, v, got, full(nr, v))
				}
			}
		}
	}
}

// The carry holds at every start phase, not only for a bucket drained at
// the instant of the edit: a value drained at t0 has refilled k and a half
// tokens at the old rate when the edit comes (phases between the grid's
// whole tokens, so the expected count is never a rounding away from the
// next), and is drained again a quarter token and more after it, at the
// new rate. Its tokens are those it had left under the old rule, less
// what the new bucket cannot hold, plus what the new rate refilled since:
// min(full1, max(full1 - spent, 0) + refilled). Swept over counts,
// bursts and durationSec both ways.
func TestEditedBucketRuleCarriesAtEveryPhase(t *testing.T) {
	t0 := sec(1000)
	for from := 1; from <= carryMaxCount; from++ {
		for to := 1; to <= carryMaxCount; to++ {
			for _, burst := range [][2]int64{{0, 0}, {3, 0}, {0, 2}} {
				for _, dur := range [][2]int64{{1, 1}, {1, 2}, {2, 1}} {
					old := seedRule()
					old.Items = nil
					old.Count, old.BurstCount, old.DurationSec = float64(from), burst[0], dur[0]
					nr := old
					nr.Count, nr.BurstCount, nr.DurationSec = float64(to), burst[1], dur[1]
					full0, full1 := float64(from)+float64(burst[0]), float64(to)+float64(burst[1])
					e0 := float64(dur[0]) * 1e9 / float64(from) // ns a token, old and new
					e1 := float64(dur[1]) * 1e9 / float64(to)
					for k := 0; float64(k) < full0+1; k++ {
						js := []float64{0, 0.25, 0.75, 1.25, 2.75}
						s1 := compile(t, old)
						c1 := s1.For("get-order")
						for i := range js {
							if got := drain(c1, t0, fmt.Sprint(i), 100); got != int(full0) {
								t.Fatalf("%d+%d/%ds: the old rule passed %d, want %v", from, burst[0], dur[0], got, full0)
							}
						}
						te := t0 + int64((float64(k)+0.5)*e0)
						c2 := edit(s1, te, nr).For("get-order")
						spent := max(full0-float64(k)-0.5, 0)
						for i, j := range js {
							left := min(full1, max(full1-spent, 0)+j)
							want := int(math.Floor(left))
							if got := drain(c2, te+int64(j*e1), fmt.Sprint(i), 100); got != want {
								t.Errorf("%d+%d/%ds -> %d+%d/%ds, edit %d.5 tokens after the drain, drained %.2f tokens after it: %d passed, want %d",
									from, burst[0], dur[0], to, burst[1], dur[1], k, j, got, want)
							}
						}
					}
				}
			}
		}
	}
}

// An edited throttle rule keeps each value's queue: the calls queued keep
// their slots, and the next call queues one new spacing after the last of
// them (it queued at once, on an empty queue). A value whose queue ran
// empty long ago passes at once. Swept over old and new counts and
// durationSec, for the rule's count and an item's.
func TestEditedThrottleRuleKeepsQueue(t *testing.T) {
	t0 := sec(1000)
	spacing := func(count float64, durationSec int64) int64 {
		return int64(math.Round(float64(durationSec) * 1e9 / count))
	}
	for from := 1; from <= 30; from++ {
		for to := 1; to <= 30; to++ {
			old := throttleRule(float64(from), 10000)
			old.DurationSec = int64(1 + from%2)
			old.Items = []config.ParamItem{{Value: "102", Count: float64(from*3%30 + 1)}}
			nr := old
			nr.Count, nr.DurationSec = float64(to), int64(1+to%3)
			nr.Items = []config.ParamItem{{Value: "102", Count: float64(to*11%30 + 1)}}
			name := fmt.Sprintf("throttle %d/%ds (item %v) -> %d/%ds (item %v)", from, old.DurationSec, old.Items[0].Count, to, nr.DurationSec, nr.Items[0].Count)

			s1 := compile(t, old)
			c1 := s1.For("get-order")
			for range 3 { // slots at t0, +1 and +2 spacings
				if _, vd := c1.Enter(t0, order("a"), 1); vd.Blocked {
					t.Fatalf("%s: the old queue refused a call", name)
				}
			}
			c1.Enter(t0, order("102"), 1)
			c1.Enter(t0, order("102"), 1)
			c1.Enter(t0-sec(100), order("idle"), 1)

			c2 := edit(s1, t0, nr).For("get-order")
			for _, tc := range []struct {
				value string
				wait  int64
			}{
				{"a", 2*spacing(old.Count, old.DurationSec) + spacing(nr.Count, nr.DurationSec)},
				{"102", spacing(old.Items[0].Count, old.DurationSec) + spacing(nr.Items[0].Count, nr.DurationSec)},
				{"idle", 0},
				{"new", 0},
			} {
				_, vd := c2.Enter(t0, order(tc.value), 1)
				if vd.Blocked || (int64(vd.Wait)-tc.wait) > 2 || (int64(vd.Wait)-tc.wait) < -2 {
					t.Errorf("%s: value %s waits %v (blocked %v), want %v", name, tc.value, vd.Wait, vd.Blocked, time.Duration(tc.wait))
				}
			}
		}
	}
}

// Only an edit that leaves what a value is and what its state word holds
// carries the state: the same resource, param, match, items by value and
// match (in order) and behaviour. Any other edit starts afresh. Each case
// also raises count 2 to 3: carried, value 1 (which spent 2) has 1 left;
// afresh, 3.
func TestEditedRuleOfAnotherIdentityStartsAfresh(t *testing.T) {
	t0 := sec(10)
	cases := []struct {
		name    string
		before  func(r *config.ParamRule)
		after   func(r *config.ParamRule)
		carried bool
	}{
		{"count raised", nil, nil, true},
		{"durationSec and maxTrackedValues changed", nil, func(r *config.ParamRule) {
			r.DurationSec, r.MaxTrackedValues = 2, 50
		}, true},
		{"an item's count changed", nil, func(r *config.ParamRule) { r.Items[1].Count = 1 }, true},
		{"dryRun turned off", func(r *config.ParamRule) { r.DryRun = true }, nil, true},
		{"another param source", nil, func(r *config.ParamRule) { r.Param = config.Key{userHdr} }, false},
		{"another match", nil, func(r *config.ParamRule) {
			r.Match = config.ParamMatch{Strategy: config.MatchPrefix, Pattern: "1"}
		}, false},
		{"an item's value changed", nil, func(r *config.ParamRule) { r.Items[1].Value = "104" }, false},
		{"an item's match changed", nil, func(r *config.ParamRule) { r.Items[1].Match = config.MatchPrefix }, false},
		{"items reordered", nil, func(r *config.ParamRule) { r.Items[0], r.Items[1] = r.Items[1], r.Items[0] }, false},
		{"throttle turned reject", func(r *config.ParamRule) {
			r.ControlBehavior, r.MaxQueueingTimeMs = config.BehaviorThrottle, 5000
		}, func(r *config.ParamRule) { r.ControlBehavior = config.BehaviorReject }, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			old := seedRule()
			if tc.before != nil {
				tc.before(&old)
			}
			nr := old
			nr.Items = append([]config.ParamItem(nil), old.Items...)
			nr.Count, nr.DryRun = 3, false
			if tc.after != nil {
				tc.after(&nr)
			}
			// The value under both sources, so that a rule on either sees it.
			req := vals{orderID: "1", userHdr: "1"}
			s1 := hotparam.Compile(defaulted(old), nil)
			for range 2 {
				if _, vd := s1.For("get-order").Enter(t0, req, 1); vd.Blocked {
					t.Fatal("the old rule blocked a call of its count")
				}
			}
			c2 := edit(s1, t0, nr).For("get-order")
			want := 3
			if tc.carried {
				want = 1
			}
			got := 0
			for range 4 {
				if _, vd := c2.Enter(t0, req, 1); !vd.Blocked && vd.Wait == 0 {
					got++
				}
			}
			if got != want {
				t.Errorf("value 1 spent 2, count raised to 3: %d passed at once, want %d", got, want)
			}
		})
	}
}

// A debt (countOn responseHeader: a figure overdrew the bucket) stays owed
// across an edit, up to the new rule's bound on a debt (one full bucket
// past empty): lowering 10 a second to 5 after a figure of 25 left 11
// tokens spent of 10 keeps the 1 owed on top of the new 5, so the next call
// is let in at +0.4 s (+0.2 s without the debt, at once before carrying);
// lowering it to 2 after the most debt a bucket of 10 holds (20 spent)
// leaves 4 of 2 spent: in at +1.5 s.
func TestEditedCostRuleKeepsDebt(t *testing.T) {
	t0 := sec(10)
	for _, tc := range []struct {
		calls   int
		to      float64
		blocked float64 // seconds after the edit
		passes  float64
	}{
		{1, 5, 0.39, 0.4},
		{10, 2, 1.49, 1.5},
	} {
		s1 := compile(t, costRule(10, 1))
		var held []hotparam.Token
		for range tc.calls {
			tok, vd := s1.For("get-order").Enter(t0, order("a"), 1)
			if vd.Blocked {
				t.Fatal("the old rule blocked a call of its count")
			}
			held = append(held, tok)
		}
		for i := range held {
			held[i].Answer(answer{"X-Tokens-Used": {"25"}})
			held[i].Exit(t0, 200)
		}
		nr := costRule(tc.to, 1)
		nr.Resource, nr.Param = "get-order", config.Key{orderID}
		c2 := edit(s1, t0, nr).For("get-order")
		if _, vd := c2.Enter(t0+sec(tc.blocked), order("a"), 1); !vd.Blocked {
			t.Errorf("%d calls of figure 25 against 10 a second, lowered to %v: a call passed at +%vs", tc.calls, tc.to, tc.blocked)
		}
		if _, vd := c2.Enter(t0+sec(tc.passes), order("a"), 1); vd.Blocked {
			t.Errorf("%d calls of figure 25 against 10 a second, lowered to %v: blocked at +%vs, want in (retry %v)", tc.calls, tc.to, tc.passes, vd.RetryAfter)
		}
	}
}

// GET /api/params keeps showing who is limited across an edit: a value's
// passes and blocks of the last minute are carried with its bucket, which
// reads as one that spent the same tokens under the new rule.
func TestEditedRuleKeepsWhoIsLimited(t *testing.T) {
	t0 := sec(100)
	s1 := compile(t, seedRule())
	flood(s1.For("get-order"), t0, "a", 12) // 2 pass, 10 blocked
	r := seedRule()
	r.Count = 3
	rs := edit(s1, t0, r).For("get-order").Report(t0, nil, 10)
	native := compile(t, r).For("get-order")
	flood(native, t0, "a", 2)
	want := native.Report(t0, []string{"a"}, 0)[0].Values[0]
	want.Blocks = 10
	if want.Remaining != 1 || len(rs) != 1 || len(rs[0].Values) != 1 || rs[0].Values[0] != want {
		t.Fatalf("report after the edit: %+v, want %+v", rs, want)
	}
}

// A clusterMode rule's local bucket, what this gateway decides on while
// Redis fails, is carried like a local rule's, at this gateway's share:
// 6 a second over 2 gateways, spent 3 alone, lowered to 4 (a share of 2)
// leaves nothing. The passes it made alone, which Redis never counted,
// still bind it once Redis answers again within their window. A calendar
// quota's fallback keeps the period's count the same way: 3 of a share of
// 3 spent, raised to a share of 4, leaves 1 until the reset.
func TestEditedClusterRuleKeepsItsFallback(t *testing.T) {
	t0 := sec(10)
	down := errors.New("redis down")
	svc := &fakeCluster{err: down, gateways: 2}
	opts := hotparam.Options{Cluster: svc, Now: t0}
	s1 := hotparam.CompileWith(defaulted(clusterRule(6, config.ThresholdGlobal, nil)), nil, opts)
	for _, v := range []string{"7", "8"} {
		if got := clusterPasses(s1.For("get-order"), t0, v, 5); got != 3 {
			t.Fatalf("Redis down: %d of 5 passed, want a share of 3", got)
		}
	}
	c2 := hotparam.CompileWith(defaulted(clusterRule(4, config.ThresholdGlobal, nil)), s1, opts).For("get-order")
	svc.err, svc.ok = nil, true
	if got := clusterPasses(c2, t0+sec(0.1), "8", 1); got != 0 {
		t.Errorf("Redis back while the passes made alone are in the window: %d of 1 passed, want 0", got)
	}
	svc.err, svc.ok = down, false
	if got := clusterPasses(c2, t0+sec(0.1), "7", 3); got != 0 {
		t.Errorf("lowered to a share of 2 after 3 passes: %d of 3 passed, want 0", got)
	}

	svc = &fakeCluster{err: down, gateways: 2, period: 24 * time.Hour, reset: time.Hour}
	opts.Cluster = svc
	s1 = hotparam.CompileWith(defaulted(quotaRule(6)), nil, opts)
	if got := clusterPasses(s1.For("get-order"), t0, "7", 5); got != 3 {
		t.Fatalf("calendar quota, Redis down: %d of 5 passed, want a share of 3", got)
	}
	c2 = hotparam.CompileWith(defaulted(quotaRule(8)), s1, opts).For("get-order")
	if got := clusterPasses(c2, t0+sec(1), "7", 5); got != 1 {
		t.Errorf("calendar quota raised to a share of 4 after 3 passes: %d of 5 passed, want 1", got)
	}
}

// The old rule keeps serving while its edit compiles, and its values are
// read as it changes them (run with -race).
func TestEditWhileOldRuleServes(t *testing.T) {
	bucket := seedRule()
	queue := throttleRule(1000, 100)
	queue.Param = config.Key{userHdr}
	s1 := compile(t, bucket, queue)
	c1 := s1.For("get-order")
	var wg sync.WaitGroup
	for g := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 3000 {
				v := fmt.Sprint(g, "-", i%50)
				tok, _ := c1.Enter(sec(1)+int64(i)*1000, vals{orderID: v, userHdr: v}, 1)
				tok.Cancel(sec(1) + int64(i)*1000)
			}
		}()
	}
	for i := range 30 {
		b, q := bucket, queue
		b.Count, q.Count = float64(3+i), float64(500+i)
		c := edit(s1, sec(1)+int64(i)*100000, b, q).For("get-order")
		c.Enter(sec(2), vals{orderID: "0-1", userHdr: "0-1"}, 1)
	}
	wg.Wait()
}

// An edited rule carries on from its own old rule, not from another rule
// on the same key: one key often has a rule a second and a rule a minute,
// and paired by order a rule a second added in front took over the minute
// rule's spent budget, while the edited minute rule started with a fresh
// one (a reload audit: 20 passes where the spent budget left none; 40
// where deleting the rule a second left 10).
func TestEditedRulePairsWithItsOwn(t *testing.T) {
	rule := func(count float64, dur int64) config.ParamRule {
		r := seedRule()
		r.Items, r.Count, r.DurationSec = nil, count, dur
		return r
	}
	t0 := sec(1000)
	// A rule a minute spent, then a rule a second added in front of it,
	// the minute rule lowered: nothing left.
	s1 := compile(t, rule(30, 60))
	if got := drain(s1.For("get-order"), t0, "u", 100); got != 30 {
		t.Fatalf("the minute rule passed %d, want 30", got)
	}
	s2 := edit(s1, t0, rule(10, 1), rule(20, 60))
	got := 0
	for i := range 3 { // at t0, t0+1s and t0+2s: one token a 3 s comes back
		got += drain(s2.For("get-order"), t0+sec(float64(i)), "u", 100)
	}
	if got > 1 {
		t.Errorf("a rule a second added in front, the minute rule 30 -> 20: %d passed in 2 s, want at most 1 (its 30 stay spent)", got)
	}
	// A rule a second and a rule a minute, the minute rule spent over 3 s;
	// then the rule a second deleted and the minute rule raised to 40:
	// about 10 left.
	s1 = compile(t, rule(10, 1), rule(30, 60))
	for i := range 3 {
		drain(s1.For("get-order"), t0+sec(float64(i)), "u", 100)
	}
	s2 = edit(s1, t0+sec(3), rule(40, 60))
	// 30 spent from t0 to t0+2s: a token and a half came back by t0+3s.
	if got := drain(s2.For("get-order"), t0+sec(3), "u", 100); got < 10 || got > 12 {
		t.Errorf("the rule a second deleted, the minute rule 30 -> 40: %d passed, want about 10", got)
	}
	// Both edited, listed the other way round: each its own.
	s1 = compile(t, rule(10, 1), rule(30, 60))
	for i := range 3 {
		drain(s1.For("get-order"), t0+sec(float64(i)), "u", 100)
	}
	s2 = edit(s1, t0+sec(3), rule(40, 60), rule(11, 1))
	if got := drain(s2.For("get-order"), t0+sec(3), "u", 100); got < 10 || got > 12 {
		t.Errorf("both edited and swapped: %d passed, want about 10 (the minute rule's 30 of 40 spent)", got)
	}
}
