package cluster_test

// Review tests: give-backs of clusterMode passes (warmUp rules counted as
// reject, delayed give-backs, give-backs after the window moved on, leased
// passes) against a real Redis of the test's own on synthetic time.

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sort"
	"strconv"
	"testing"
	"time"

	"sluice/cluster"
	"sluice/config"
	"sluice/internal/calendar"
)

// A clusterMode warmUp rule is counted in Redis as reject: a pass given
// back (once) frees exactly its own room, a give-back after the window
// moved on frees nothing in a later window, and no real interval holds
// more than count of the passes kept.
func TestWarmUpClusterGiveBackSteps(t *testing.T) {
	s, clock, _ := privateSynthService(t)
	rule := windowRule(3, 1000)
	rule.ControlBehavior = config.BehaviorWarmUp
	rule.WarmUpPeriodSec = 10
	take := func(at int64) (bool, int64) {
		t.Helper()
		clock.us.Store(at)
		ok, _, _, _, stamp, err := s.AcquireFlowStamp(rule, "k", 1, false)
		if err != nil {
			t.Fatalf("at %d: %v", at, err)
		}
		return ok, stamp
	}
	_, a := take(0)
	_, b := take(100)
	_, c := take(200)
	if ok, _ := take(300); ok {
		t.Fatal("a 4th pass in the window")
	}
	s.GiveBackFlow(rule, "k", 1, b)
	if ok, _ := take(400); !ok {
		t.Fatal("the pass given back left no room")
	}
	if ok, _ := take(500); ok {
		t.Fatal("one give-back freed two passes")
	}
	// a's window ends at 1_000_000: giving it back now frees nothing later.
	clock.us.Store(1_000_050)
	s.GiveBackFlow(rule, "k", 1, a)
	_ = c
	if ok, _ := take(1_000_100); !ok { // a left: room for one
		t.Fatal("no room after a left")
	}
	if ok, _ := take(1_000_150); ok {
		t.Fatal("a give-back after its window moved on made room")
	}
}

// Randomised: passes are given back at random later instants (once each,
// some after their window moved on), over windows with one token a slot,
// groups, and leases; the passes kept never exceed count in a real
// interval.
func TestDelayedGiveBacksKeepTheBound(t *testing.T) {
	t.Parallel() // synthetic time, a Redis of its own: see window_property_test.go
	s, clock, _ := privateSynthService(t)
	for ci, count := range []float64{3, 7, 1500, 3000} { // 1500, 3000: groups of 2 and 3 tokens a slot
		for _, behav := range []config.ControlBehavior{config.BehaviorReject, config.BehaviorWarmUp} {
			t.Run(fmt.Sprint(count, behav), func(t *testing.T) {
				rule := windowRule(count, 1000)
				rule.ControlBehavior = behav
				if behav == config.BehaviorWarmUp {
					rule.WarmUpPeriodSec = 10
				}
				key := fmt.Sprint("d", ci, behav)
				rng := rand.New(rand.NewPCG(uint64(ci), 7))
				const iv = 1_000_000
				type held struct {
					at, stamp, n int64
					back         bool
				}
				var passes []*held
				var open []*held
				at := int64(ci) * 100 * iv
				end := at + 3*iv
				perIv := int64(count) * 3
				for at < end {
					at += 1 + rng.Int64N(2*iv/perIv)
					clock.us.Store(at)
					n := int64(1)
					if count > 100 && rng.IntN(4) == 0 {
						n = 1 + rng.Int64N(5)
					}
					ok, _, _, _, stamp, err := s.AcquireFlowStamp(rule, key, n, false)
					if err != nil {
						t.Fatal(err)
					}
					if ok {
						h := &held{at: at, stamp: stamp, n: n}
						passes = append(passes, h)
						if rng.IntN(3) == 0 {
							open = append(open, h)
						}
					}
					// give back a random held pass, maybe long after it passed
					if len(open) > 0 && rng.IntN(4) == 0 {
						i := rng.IntN(len(open))
						h := open[i]
						open = append(open[:i], open[i+1:]...)
						if h.stamp > 0 {
							s.GiveBackFlow(rule, key, h.n, h.stamp)
							h.back = true
						}
					}
				}
				var kept []pass
				for _, h := range passes {
					if !h.back {
						kept = append(kept, pass{h.at, h.n})
					}
				}
				sort.Slice(kept, func(i, j int) bool { return kept[i].at < kept[j].at })
				if m := maxInAnyWindow(kept, iv); m > int64(count) {
					t.Errorf("%d tokens kept in one real interval, count %g", m, count)
				}
			})
		}
	}
}

// Leased passes given back late (some after the lease ran out, some after
// their window moved on), then an overload: the passes kept never exceed
// count in a real interval, for a flow rule and a param value.
func TestLeasedGiveBacksKeepTheBound(t *testing.T) {
	t.Parallel() // synthetic time, a Redis of its own: see window_property_test.go
	s, clock, _ := privateSynthService(t)
	const count, iv = 4096, 1_000_000
	flow := windowRule(count, 1000)
	param := paramRule(count, 1, config.ThresholdGlobal)
	for k, isParam := range []bool{false, true} {
		t.Run(fmt.Sprint("param=", isParam), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(uint64(k), 9))
			type held struct {
				at, stamp int64
				back      bool
			}
			var passes, open []*held
			at := int64(k+1) * 1000 * iv
			start := at
			leased := 0
			for at < start+5*iv {
				gap := int64(1000) // 1000/s, far from the count: leases
				if at > start+3*iv {
					gap = 50 // 20000/s: an overload
				}
				at += 1 + rng.Int64N(2*gap)
				clock.us.Store(at)
				var ok bool
				var stamp int64
				var err error
				if isParam {
					ok, _, _, _, stamp, err = s.AcquireParamStamp(param, count, "v", 1, false)
				} else {
					ok, _, _, _, stamp, err = s.AcquireFlowStamp(flow, "k", 1, false)
				}
				if err != nil {
					t.Fatal(err)
				}
				if ok {
					h := &held{at: at, stamp: stamp}
					if stamp > synthBase+at {
						leased++
					}
					passes = append(passes, h)
					if rng.IntN(3) == 0 {
						open = append(open, h)
					}
				}
				if len(open) > 0 && rng.IntN(3) == 0 {
					i := rng.IntN(len(open))
					h := open[i]
					open = append(open[:i], open[i+1:]...)
					if isParam {
						s.GiveBackParam(param, count, "v", 1, h.stamp)
					} else {
						s.GiveBackFlow(flow, "k", 1, h.stamp)
					}
					h.back = true
				}
			}
			if leased == 0 {
				t.Errorf("no pass came from a lease")
			}
			var kept []pass
			for _, h := range passes {
				if !h.back {
					kept = append(kept, pass{h.at, 1})
				}
			}
			if m := maxInAnyWindow(kept, iv); m > count {
				t.Errorf("%d tokens kept in one real interval, count %d", m, count)
			}
		})
	}
}

// callAvgBack is scriptWindow.callAvg that also returns back tokens
// stamped backAt (0 0: none); it returns the script's first number (0: a
// pass, else µs to wait) and a pass's own stamp.
func (w *scriptWindow) callAvgBack(atUs int64, count float64, n, back, backAt int64) (int64, int64) {
	w.t.Helper()
	res, err := w.script.Run(context.Background(), w.rdb, w.keys, w.live, synthBase+atUs, w.liveAt,
		strconv.FormatFloat(count, 'g', -1, 64), n, 1000, "1", 0, back, backAt, "0").Int64Slice()
	if err != nil || len(res) != cluster.ResultsPerCall {
		w.t.Fatalf("script at %dµs: %v, %v", atUs, res, err)
	}
	return res[0], res[6]
}

// An avgLocal window that shrinks (a gateway left) keeps its newest passes
// up to the new limit and drops the older ones. A pass dropped that way is
// no longer in the window: giving it back must not remove a pass that was
// kept (one stamped the same, as passes of one batch are), or the window
// makes room the real passes do not leave: here 3 kept passes of a limit of
// 2, and a 4th let in.
func TestGiveBackAfterAShrinkFreesNothing(t *testing.T) {
	for _, tie := range []bool{true, false} {
		t.Run(fmt.Sprint("tie=", tie), func(t *testing.T) {
			w := newScriptWindow(t)
			w.setLive(2) // 2 a gateway: 4
			var stamps []int64
			for i := range 4 {
				at := int64(0)
				if !tie {
					at = int64(i) * ms
				}
				res, own := w.callAvgBack(at, 2, 1, 0, 0)
				if res != 0 || own <= 0 {
					t.Fatalf("pass %d: %d %d", i, res, own)
				}
				stamps = append(stamps, own)
			}
			w.setLive(1) // 2: the newest 2 are kept
			if res, _ := w.callAvgBack(10*ms, 2, 1, 0, 0); res == 0 {
				t.Fatal("a pass over the shrunk limit")
			}
			// the oldest pass (dropped by the shrink) is given back: 3 real
			// passes are still in the interval, over the limit of 2
			if res, _ := w.callAvgBack(20*ms, 2, 1, 1, stamps[0]); res == 0 {
				t.Fatal("giving back a pass the shrink dropped let a pass in: 3 kept passes and 1 new in an interval of 2")
			}
			if res, _ := w.callAvgBack(30*ms, 2, 1, 0, 0); res == 0 {
				t.Fatal("a pass over the shrunk limit after the give-back")
			}
			// once they leave, the whole limit is there
			if res, _ := w.callAvgBack(1010*ms, 2, 2, 0, 0); res != 0 {
				t.Fatalf("the window did not free: %d", res)
			}
		})
	}
}

// nextLongDay is the next 25-hour day in loc after now (daylight saving
// time ends).
func nextLongDay(t *testing.T, loc *time.Location) (start, reset time.Time) {
	t.Helper()
	for d := time.Now().Add(48 * time.Hour); d.Before(time.Now().Add(400 * 24 * time.Hour)); d = reset {
		start, reset = calendar.Bounds(d, loc, calendar.Day)
		if reset.Sub(start) == 25*time.Hour {
			return start, reset
		}
	}
	t.Fatalf("no 25-hour day in %s within a year", loc)
	return
}

// A daily countOn quota in Berlin on the day the clocks go back: the
// period is 25 hours, a charge past the count overdraws it, the check is
// then refused with the reset counted down exactly (from Redis, then from
// the block this gateway remembers), and at local midnight the next day
// starts whole (24 hours). A 30-minute zone's month resets on the 1st.
func TestQuotaBerlinFallBackAndCountdown(t *testing.T) {
	srv := startPrivateRedis(t)
	loc, _ := time.LoadLocation("Europe/Berlin")
	start, midnight := nextLongDay(t, loc)
	clock := new(wallClock)
	clock.set(start.Add(3 * time.Hour)) // inside the repeated hour's day
	s := newService(t, cluster.Options{URL: srv.url(), Namespace: "rq", Timeout: 5 * time.Second, Heartbeat: time.Hour})
	s.SetWallClock(clock.now)
	r := quotaRule(config.WindowDay, "Europe/Berlin")
	r.CountOn = "responseHeader:X-Cost"
	ok, left, reset, period, err := s.CheckQuota(r, 3, "v", 1)
	if !ok || err != nil || left != 3 || period != 25*time.Hour || reset != 22*time.Hour {
		t.Fatalf("check: %v %d %v %v %v", ok, left, reset, period, err)
	}
	if err := s.ChargeQuota(r, 3, "v", 1<<40); err != nil {
		t.Fatal(err)
	}
	for _, before := range []time.Duration{10 * time.Second, 3 * time.Second, time.Nanosecond} {
		clock.set(midnight.Add(-before))
		ok, left, reset, _, err := s.CheckQuota(r, 3, "v", 1)
		if ok || err != nil || left != 0 || reset != before {
			t.Errorf("%v before midnight: %v %d %v %v, want refused, reset in %v", before, ok, left, reset, err, before)
		}
	}
	clock.set(midnight)
	ok, left, reset, period, err = s.CheckQuota(r, 3, "v", 1)
	if !ok || err != nil || left != 3 || period != 24*time.Hour || reset != 24*time.Hour {
		t.Errorf("at midnight: %v %d %v %v %v, want a whole 24-hour day", ok, left, reset, period, err)
	}

	kol, _ := time.LoadLocation("Asia/Kolkata")
	y, m, _ := time.Now().In(kol).Date()
	first := time.Date(y, m+2, 1, 0, 0, 0, 0, kol)
	clock.set(first.Add(-time.Second))
	mr := quotaRule(config.WindowMonth, "Asia/Kolkata")
	for i := range 4 {
		ok, left, reset, _, err := s.AcquireQuota(mr, 3, "v", 1)
		if err != nil || ok != (i < 3) || reset != time.Second {
			t.Errorf("month call %d: %v %d %v %v", i, ok, left, reset, err)
		}
	}
	clock.set(first)
	if ok, left, _, period, err := s.AcquireQuota(mr, 3, "v", 1); !ok || err != nil || left != 2 ||
		period != first.AddDate(0, 1, 0).Sub(first) {
		t.Errorf("on the 1st: %v %d %v %v", ok, left, period, err)
	}
}

// A clusterMode rule whose count is under one call an interval (count 0.5
// a second: one call every 2 s, as the local rule has it, rules.md) must
// pass calls: Redis floored the count to 0 and refused every call forever.
func TestCountUnderOneInTheCluster(t *testing.T) {
	s, clock, _ := privateSynthService(t)
	flow := windowRule(0.5, 1000)
	param := paramRule(0.5, 1, config.ThresholdGlobal)
	third := windowRule(1.0/3, 1000) // one call every 3 s
	type step struct {
		at   int64
		want bool
	}
	run := func(name string, steps []step, acquire func() (bool, error)) {
		for i, st := range steps {
			clock.us.Store(st.at)
			ok, err := acquire()
			if err != nil || ok != st.want {
				t.Errorf("%s step %d at %dµs: %v %v, want %v", name, i, st.at, ok, err, st.want)
			}
		}
	}
	halves := []step{{0, true}, {1, false}, {1_000_000, false}, {1_999_999, false}, {2_000_000, true}, {3_000_000, false}, {4_000_001, true}}
	run("flow 0.5", halves, func() (bool, error) { return s.Acquire(flow, "k", 1) })
	run("param 0.5", halves, func() (bool, error) {
		ok, _, err := s.AcquireParam(param, 0.5, "v", 1)
		return ok, err
	})
	run("flow 1/3", []step{{0, true}, {2_999_999, false}, {3_000_000, true}}, func() (bool, error) { return s.Acquire(third, "k3", 1) })
}

// ReadParam (an operator's view) of a window under one call an interval
// spans the same intervals as the window: a pass of a 0.5-a-second value
// is in it for 2 s.
func TestReadParamUnderOne(t *testing.T) {
	srv := startPrivateRedis(t)
	s := newService(t, cluster.Options{URL: srv.url(), Namespace: namespace(t), Timeout: 5 * time.Second, Heartbeat: time.Hour})
	r := paramRule(0.5, 1, config.ThresholdGlobal)
	if ok, _, err := s.AcquireParam(r, 0.5, "v", 1); !ok || err != nil {
		t.Fatalf("first call: %v %v", ok, err)
	}
	used, wait, err := s.ReadParam(context.Background(), r, 0.5, "v")
	if err != nil || used != 1 || wait <= 1500*time.Millisecond || wait > 2*time.Second {
		t.Errorf("ReadParam: %v tokens, %v to wait, %v; want 1, about 2s", used, wait, err)
	}
}

// A pass given back while another call on its window is in flight to
// Redis: that call, decided before the give-back reached Redis (it goes
// with the next call), says the window is full. The gateway must not
// remember that block, or it refuses the value locally until the window
// frees (a whole durationSec) and the given-back token never reaches Redis
// meanwhile: the ?id=a&id=b give-back undone by a race.
func TestBlockDecidedBeforeAGiveBackIsNotKept(t *testing.T) {
	s, clock, rdb := privateSynthService(t)
	r := paramRule(2, 60, config.ThresholdGlobal)
	var stamps []int64
	for i := range 2 {
		clock.us.Store(int64(i))
		ok, _, _, _, stamp, err := s.AcquireParamStamp(r, 2, "a", 1, false)
		if !ok || err != nil || stamp <= 0 {
			t.Fatalf("pass %d: %v %v %d", i, ok, err, stamp)
		}
		stamps = append(stamps, stamp)
	}
	clock.us.Store(10)
	if err := rdb.Do(context.Background(), "CLIENT", "PAUSE", 400, "ALL").Err(); err != nil {
		t.Fatal(err)
	}
	done := make(chan bool)
	go func() {
		ok, _, _ := s.AcquireParam(r, 2, "a", 1) // in flight: Redis is paused
		done <- ok
	}()
	time.Sleep(100 * time.Millisecond)
	s.GiveBackParam(r, 2, "a", 1, stamps[1]) // the request of that pass was refused later
	if <-done {
		t.Fatal("the call in flight passed a full window")
	}
	clock.us.Store(20)
	if ok, _, err := s.AcquireParam(r, 2, "a", 1); !ok || err != nil {
		t.Fatalf("after the give-back: %v %v, want a pass (one of the two passes was given back)", ok, err)
	}
}

// A rolling rule asked as a calendar quota says ErrUnsupported, as its doc
// says, rather than panicking on the zone it does not have.
func TestQuotaOfARollingRuleIsUnsupported(t *testing.T) {
	s := newService(t, cluster.Options{URL: "redis://127.0.0.1:1/0", Namespace: namespace(t), Timeout: time.Second, Heartbeat: time.Hour})
	r := paramRule(3, 1, config.ThresholdGlobal)
	if _, _, _, _, err := s.AcquireQuota(r, 3, "v", 1); err != cluster.ErrUnsupported {
		t.Errorf("AcquireQuota: %v, want ErrUnsupported", err)
	}
	if _, _, _, _, err := s.CheckQuota(r, 3, "v", 1); err != cluster.ErrUnsupported {
		t.Errorf("CheckQuota: %v, want ErrUnsupported", err)
	}
	if err := s.ChargeQuota(r, 3, "v", 1); err != cluster.ErrUnsupported {
		t.Errorf("ChargeQuota: %v, want ErrUnsupported", err)
	}
}

// A charge of at least the count fills the window (rules.md: an overdraw
// keeps the value out until its passes leave), whatever the window held:
// above 1024 tokens, with a partial group at its tail, it left one token
// of room, and the next call was let in.
func TestOverdrawFillsAGroupedWindow(t *testing.T) {
	s, clock, _ := privateSynthService(t)
	for i, count := range []float64{2048, 3000, 5000, 1024, 7} {
		r := paramRule(count, 60, config.ThresholdGlobal)
		r.CountOn = "responseHeader:X-Cost"
		for _, before := range []int64{0, 1, 2, 3} {
			v := fmt.Sprint("v", i, "-", before)
			clock.us.Store(int64(i) * 1000)
			if before > 0 {
				if err := s.ChargeParam(r, count, v, before); err != nil {
					t.Fatal(err)
				}
			}
			clock.us.Store(int64(i)*1000 + 1)
			if err := s.ChargeParam(r, count, v, 1<<40); err != nil {
				t.Fatal(err)
			}
			clock.us.Store(int64(i)*1000 + 2)
			if ok, _, err := s.PeekParam(r, count, v, 1); ok || err != nil {
				t.Errorf("count %g, %d charged before: a call let in right after an overdraw (%v)", count, before, err)
			}
		}
	}
}

// Randomised, on the script: an avgLocal window whose live gateways
// change (its limit grows and shrinks) while passes are given back at
// random later instants, once each. A call passes only when the passes
// kept (not given back) in the interval before it leave room for it under
// the limit of the moment.
func TestAvgLocalResizeWithGiveBacks(t *testing.T) {
	for seed := range uint64(4) {
		w := newScriptWindow(t)
		w.keys = []string{fmt.Sprintf("{%s:w:resize%d}:", namespace(t), seed)}
		rng := rand.New(rand.NewPCG(seed, 3))
		const per, iv = 3, 1000 * ms
		type held struct {
			at, stamp int64
			back      bool
		}
		var passes, open []*held
		live := 2
		w.setLive(live)
		at := int64(0)
		for range 1500 {
			at += rng.Int64N(40 * ms)
			if rng.IntN(25) == 0 {
				live = 1 + rng.IntN(3)
				w.setLive(live)
			}
			var back, backAt int64
			if len(open) > 0 && rng.IntN(3) == 0 {
				i := rng.IntN(len(open))
				h := open[i]
				open = append(open[:i], open[i+1:]...)
				h.back = true
				back, backAt = 1, h.stamp
			}
			res, own := w.callAvgBack(at, per, 1, back, backAt)
			if res != 0 {
				continue
			}
			kept := 0
			for _, h := range passes {
				if !h.back && h.at > at-iv {
					kept++
				}
			}
			if kept+1 > per*live {
				t.Fatalf("seed %d at %dµs: a pass with %d kept in the interval, limit %d", seed, at, kept, per*live)
			}
			h := &held{at: at, stamp: own}
			passes = append(passes, h)
			if rng.IntN(2) == 0 {
				open = append(open, h)
			}
		}
	}
}

// An avgLocal limit that shrinks and grows back within an interval (a
// gateway's heartbeat lapses for a moment, or leaves and another joins)
// must still count the passes the shrink dropped: they were real. Before,
// 6 passes at a limit of 6, a shrink to 3 and a grow back to 6 let 3 more
// in: 9 in one interval.
func TestShrinkThenGrowCountsDroppedPasses(t *testing.T) {
	w := newScriptWindow(t)
	w.setLive(2) // 3 a gateway: 6
	for i := range 6 {
		if res, _ := w.callAvgBack(int64(i)*ms, 3, 1, 0, 0); res != 0 {
			t.Fatalf("pass %d refused", i)
		}
	}
	w.setLive(1) // 3: the newest 3 kept
	if res, _ := w.callAvgBack(10*ms, 3, 1, 0, 0); res == 0 {
		t.Fatal("a pass over the shrunk limit")
	}
	w.setLive(2) // 6 again
	if res, _ := w.callAvgBack(20*ms, 3, 1, 0, 0); res == 0 {
		t.Fatal("a 7th pass in one interval of 6 after a shrink and a grow")
	}
	// the dropped passes (0, 1, 2 ms) count as one run stamped with the
	// newest of them: room once they have all left
	if res, _ := w.callAvgBack(1002*ms+1, 3, 3, 0, 0); res != 0 {
		t.Fatal("no room once the dropped passes left")
	}
}
