package cluster_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"sluice/cluster"
	"sluice/config"
)

// synthBase is where synthetic Redis time starts (µs): far from 0, which a
// slot holds when empty.
const synthBase = int64(1_700_000_000) * 1_000_000

// scriptWindow runs the acquire script directly, one call at a time, at
// instants the test chooses: the window's arithmetic, step by step.
type scriptWindow struct {
	t      *testing.T
	rdb    *redis.Client
	script *redis.Script
	keys   []string
	live   int64 // the reading of live gateways passed to avgLocal calls
	liveAt int64 // and its stamp (Redis ms)
}

func newScriptWindow(t *testing.T) *scriptWindow {
	t.Helper()
	rdb := redis.NewClient(must(redis.ParseURL(redisURL(t))))
	t.Cleanup(func() { rdb.Close() })
	return &scriptWindow{t: t, rdb: rdb, script: redis.NewScript(cluster.AcquireSrc), keys: []string{"{" + namespace(t) + ":w:steps}:"}}
}

// call asks n tokens of a window of count per intervalMs at the instant atUs
// (µs after synthBase), with demand for a lease; it returns the script's
// three numbers: 0 or µs until n could pass, tokens leased, µs they last.
func (w *scriptWindow) call(atUs int64, count float64, n, intervalMs, demand int64) [3]int64 {
	w.t.Helper()
	res, err := w.script.Run(context.Background(), w.rdb, w.keys, 0, synthBase+atUs, 0,
		strconv.FormatFloat(count, 'g', -1, 64), n, intervalMs, "0", demand, 0, 0, "0").Int64Slice()
	if err != nil || len(res) != cluster.ResultsPerCall {
		w.t.Fatalf("script at %dµs: %v, %v", atUs, res, err)
	}
	return [3]int64{res[0], res[1], res[2]}
}

// callLeft takes n tokens of a window of count per second at atUs, asking
// what a pass leaves (op 3): 0 or µs until n could pass, then for a pass
// the tokens the window has left and the µs until its oldest pass leaves.
func (w *scriptWindow) callLeft(atUs int64, count float64, n int64) [3]int64 {
	w.t.Helper()
	res, err := w.script.Run(context.Background(), w.rdb, w.keys, 0, synthBase+atUs, 0,
		strconv.FormatFloat(count, 'g', -1, 64), n, 1000, "0", 0, 0, 0, "3").Int64Slice()
	if err != nil || len(res) != cluster.ResultsPerCall {
		w.t.Fatalf("script at %dµs: %v, %v", atUs, res, err)
	}
	return [3]int64{res[0], res[4], res[5]}
}

func (w *scriptWindow) strlen() int64 {
	w.t.Helper()
	return must(w.rdb.StrLen(context.Background(), w.keys[0]).Result())
}

const ms = int64(1000) // µs

// A pass asked what it leaves (for the RateLimit fields) says how many
// tokens the window has left after it and when its oldest pass leaves: a
// window of 3 per second, and one of 2048 in groups of 2 (its tail slot
// partial). A block says when it could pass, as without asking.
func TestWindowPassSaysWhatIsLeft(t *testing.T) {
	type step struct {
		at, n int64
		want  [3]int64 // µs until it could pass (0: passed), left, µs until the oldest pass leaves
	}
	cases := []struct {
		name  string
		count float64
		steps []step
	}{
		{"count 3", 3, []step{
			{0, 1, [3]int64{0, 2, 1000 * ms}},
			{100 * ms, 1, [3]int64{0, 1, 900 * ms}},
			{200 * ms, 1, [3]int64{0, 0, 800 * ms}},
			{300 * ms, 1, [3]int64{700 * ms, -1, 0}},
			{1000 * ms, 1, [3]int64{0, 0, 100 * ms}}, // (0, 1000] holds 100, 200 and 1000
			{1150 * ms, 1, [3]int64{0, 0, 50 * ms}},  // 100 left: 200, 1000 and this
			{1160 * ms, 1, [3]int64{40 * ms, -1, 0}}, // full until 200 leaves
			{1200 * ms, 1, [3]int64{0, 0, 800 * ms}}, // 200 left: 1000, 1150 and this
			{5000 * ms, 2, [3]int64{0, 1, 1000 * ms}},
		}},
		{"count 2048, groups of 2", 2048, []step{
			{0, 2047, [3]int64{0, 1, 1000 * ms}},
			{10 * ms, 1, [3]int64{0, 0, 990 * ms}},
			{1000 * ms, 2046, [3]int64{0, 0, 10 * ms}}, // the tail group of 10ms stays
			{1010 * ms, 2, [3]int64{0, 0, 990 * ms}},
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			w := newScriptWindow(t)
			for i, s := range c.steps {
				if got := w.callLeft(s.at, c.count, s.n); got != s.want {
					t.Errorf("step %d: %d tokens at %.3fms: got %v, want %v", i, s.n, float64(s.at)/1000, got, s.want)
				}
			}
		})
	}
}

// Calls batched in one script run on one window each say what their pass
// (op 3) or peek (op 4, a countOn call's check) leaves, though the window
// is searched once a batch: passes and a charge (a countOn call's answer)
// move the window's tail between calls.
func TestBatchedPassesSayWhatIsLeft(t *testing.T) {
	w := newScriptWindow(t)
	type call struct {
		n    int64
		op   string
		want [3]int64 // as callLeft's; a charge's is [0 -1 0]
	}
	batch := func(atUs int64, count float64, calls []call) {
		t.Helper()
		args := []any{0, synthBase + atUs, 0}
		keys := make([]string, len(calls))
		for i, c := range calls {
			keys[i] = w.keys[0]
			args = append(args, strconv.FormatFloat(count, 'g', -1, 64), c.n, 1000, "0", 0, 0, 0, c.op)
		}
		res, err := w.script.Run(context.Background(), w.rdb, keys, args...).Int64Slice()
		if err != nil || len(res) != cluster.ResultsPerCall*len(calls) {
			t.Fatalf("batch at %dµs: %v, %v", atUs, res, err)
		}
		for i, c := range calls {
			r := res[i*cluster.ResultsPerCall:]
			if got := [3]int64{r[0], r[4], r[5]}; got != c.want {
				t.Errorf("batch at %.3fms, call %d (op %s, %d tokens): got %v, want %v", float64(atUs)/1000, i, c.op, c.n, got, c.want)
			}
		}
	}
	batch(0, 3, []call{
		{1, "3", [3]int64{0, 2, 1000 * ms}},
		{1, "3", [3]int64{0, 1, 1000 * ms}},
		{1, "3", [3]int64{0, 0, 1000 * ms}},
		{1, "3", [3]int64{1000 * ms, -1, 0}},
	})
	batch(1000*ms, 4, []call{ // the limit grew: the ring is rebuilt, and those of 0 have left
		{1, "3", [3]int64{0, 3, 1000 * ms}},
		{1, "3", [3]int64{0, 2, 1000 * ms}},
	})
	batch(5000*ms, 4, []call{
		{1, "3", [3]int64{0, 3, 1000 * ms}},
		{2, "3", [3]int64{0, 1, 1000 * ms}},
		{4, "2", [3]int64{0, -1, 0}}, // fills the window: its last free place
		{1, "3", [3]int64{1000 * ms, -1, 0}},
	})
	batch(5500*ms, 4, []call{
		{1, "3", [3]int64{500 * ms, -1, 0}}, // full of the charge's 4 until 6000
	})
	batch(6000*ms, 4, []call{
		{1, "3", [3]int64{0, 3, 1000 * ms}},
		{1, "2", [3]int64{0, -1, 0}},
		{1, "3", [3]int64{0, 1, 1000 * ms}},
		{1, "4", [3]int64{0, 1, 1000 * ms}},  // a peek (countOn) takes nothing
		{2, "4", [3]int64{1000 * ms, -1, 0}}, // and says when 2 would fit
		{1, "4", [3]int64{0, 1, 1000 * ms}},  //
		{1, "3", [3]int64{0, 0, 1000 * ms}},  // the last one
		{1, "4", [3]int64{1000 * ms, -1, 0}}, //
	})
	batch(20000*ms, 4, []call{
		{1, "4", [3]int64{0, 4, 0}},  // an empty window: nothing leaves it
		{1, "1", [3]int64{0, -1, 0}}, // a peek not asked says nothing
	})

	// 2048 in groups of 2: a charge writes over the window's oldest group,
	// which the batch's search had found; the next pass must not count
	// from that slot (it said 2046 left, reset 1 s).
	w = newScriptWindow(t)
	w.keys[0] += "groups"
	batch(0, 2048, []call{{2046, "0", [3]int64{0, -1, 0}}})
	batch(500*ms, 2048, []call{
		{1, "3", [3]int64{0, 1, 500 * ms}},
		{2, "2", [3]int64{0, -1, 0}},
		{1, "3", [3]int64{0, 0, 500 * ms}},
	})
}

// A window of count 3 per second, step by step: a call passes iff the passes
// in (now-1s, now] plus its tokens are at most 3, and a refusal says exactly
// when the call could pass.
func TestWindowStepsExact(t *testing.T) {
	type step struct {
		at        int64 // µs
		n         int64
		wantRetry int64 // 0: pass; else µs until the call could pass
	}
	cases := []struct {
		name  string
		count float64
		steps []step
	}{
		{"count 3", 3, []step{
			{0, 1, 0}, {100 * ms, 1, 0}, {200 * ms, 1, 0},
			{300 * ms, 1, 700 * ms},       // the pass at 0 leaves at 1000ms
			{1000*ms - 1, 1, 1},           // one µs early
			{1000 * ms, 1, 0},             // (0, 1000] holds 100 and 200: room for one
			{1000 * ms, 1, 100 * ms},      // until the pass at 100 leaves
			{1100 * ms, 2, 100 * ms},      // two need 100 and 200 gone: at 1200
			{1200 * ms, 2, 0},             // (200, 1200] holds 1000 only
			{1200 * ms, 1, 800 * ms},      // full until 1000 leaves
			{1500 * ms, 4, 1000 * ms},     // more than the count never fits: the interval as a hint
			{5000 * ms, 3, 0},             // long idle: all gone
			{5999 * ms, 1, 1 * ms},        //
			{6000 * ms, 3, 0},             // exactly one interval later
			{6500 * ms, 1, 500 * ms},      //
			{6000*ms + 1, 1, 1000*ms - 1}, // (clock read out of order: a later stamp than now stays)
		}},
		{"count 2.5 takes whole tokens", 2.5, []step{
			{0, 1, 0}, {1, 1, 0}, {2, 1, 1000*ms - 2},
		}},
		// 2048 tokens: 1024 slots of 2; the newest (tail) slot may be partial.
		{"count 2048, groups of 2", 2048, []step{
			{0, 2047, 0},               // 1023 full slots and a tail of 1
			{10 * ms, 1, 0},            // completes the tail, restamped 10ms
			{20 * ms, 1, 980 * ms},     // full: the oldest group leaves at 1000ms
			{1000 * ms, 2047, 10 * ms}, // every group of 0 left, but the tail's 2 remain
			{1000 * ms, 2046, 0},       // exactly the room left
			{1000 * ms, 1, 10 * ms},    // full until the group of 10ms leaves
			{1010 * ms, 1, 0},          // it did: room for its 2
			{1010 * ms, 1, 0},          //
			{1010 * ms, 1, 990 * ms},   // then groups of 1000ms
		}},
		{"count 3000, groups of 3, conservative", 3000, []step{
			{0, 1, 0},                // a tail group of 1 at 0
			{600 * ms, 2999, 0},      // fills it (restamped 600) and 999 more groups
			{1000 * ms, 1, 600 * ms}, // the pass at 0 has left, but its group counts until 1600
			{1600 * ms, 3000, 0},     // all gone
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			w := newScriptWindow(t)
			for i, s := range c.steps {
				got := w.call(s.at, c.count, s.n, 1000, 0)
				if got[0] != s.wantRetry {
					t.Errorf("step %d: %d tokens at %.3fms: got %d (0 = pass, else µs to wait), want %d", i, s.n, float64(s.at)/1000, got[0], s.wantRetry)
				}
			}
		})
	}
}

// A lease is granted only far from the count (the caller alone would fill
// at most half the window, and the window stays at most half full), lasts
// statIntervalMs/1024, and is stamped with its end, so passes within it
// count from then too. Count 4096 per 1024ms: a lease lasts 1ms and slots
// are groups of 4.
func TestWindowLeaseSteps(t *testing.T) {
	w := newScriptWindow(t)
	const count, iv = 4096, 1024
	type step struct {
		at, n, demand int64
		want          [3]int64 // 0 or µs to wait, tokens leased, µs they last
	}
	steps := []step{
		{0, 1, 5000, [3]int64{0, 0, 0}},            // 5000/s would more than half fill 4096 per 1.024s
		{10 * ms, 1, 2000, [3]int64{0, 2, 1000}},   // 2000/s: 2 tokens for 1ms; the first group ends with them, at 11ms
		{10*ms + 500, 1, 0, [3]int64{0, 0, 0}},     // a pass within the lease counts from its end, 11ms
		{12 * ms, 1, 2001, [3]int64{0, 0, 0}},      // 2001/s x 2 > 4096 per 1.024s: near the count, no lease
		{20 * ms, 1, 1999, [3]int64{0, 1, 1000}},   // 1 token; the second group ends at 21ms
		{30 * ms, 2040, 2000, [3]int64{0, 0, 0}},   // 2048 in the window: half full, no lease
		{40 * ms, 2048, 0, [3]int64{0, 0, 0}},      // full
		{40 * ms, 1, 0, [3]int64{995 * ms, 0, 0}},  // until the first group leaves at 11ms + 1024ms
		{1035 * ms, 1, 0, [3]int64{0, 0, 0}},       // it did: 4 tokens free
		{1035 * ms, 3, 0, [3]int64{0, 0, 0}},       //
		{1035 * ms, 1, 0, [3]int64{10 * ms, 0, 0}}, // the second group, ended by a lease, leaves at 21ms + 1024ms
	}
	for i, s := range steps {
		if got := w.call(s.at, count, s.n, iv, s.demand); got != s.want {
			t.Errorf("step %d: %d tokens at %.3fms asking a lease for %d/s: got %v, want %v", i, s.n, float64(s.at)/1000, s.demand, got, s.want)
		}
	}
}

// Memory per window is bounded at any count: an 80-byte header and at most
// 1024 slots of 8 bytes.
func TestWindowMemoryIsBounded(t *testing.T) {
	for _, c := range []struct {
		count float64
		want  int64
	}{
		{1, 8}, {10, 80}, {1000, 8000}, {1024, 8192},
		{1025, 8 * 513}, {100000, 8 * 1021}, {1e12, 8 * 1024},
	} {
		w := newScriptWindow(t)
		w.call(0, c.count, 1, 1000, 0)
		c.want += cluster.HeaderBytes
		if got := w.strlen(); got != c.want {
			t.Errorf("count %g: window is %d bytes, want %d", c.count, got, c.want)
		}
		t.Logf("count %g: %d bytes per window", c.count, w.strlen())
	}
	if cluster.RingSlots != 1024 || cluster.HeaderBytes != 80 {
		t.Errorf("RingSlots = %d, HeaderBytes = %d: the script's NMAX and HDR say 1024 and 80", cluster.RingSlots, cluster.HeaderBytes)
	}
}

// setLive makes the next avgLocal calls pass a fresh reading of n live
// gateways, newer than every reading before.
func (w *scriptWindow) setLive(n int) {
	w.live = int64(n)
	w.liveAt++
}

func (w *scriptWindow) callAvg(atUs int64, count float64, n int64) int64 {
	w.t.Helper()
	res, err := w.script.Run(context.Background(), w.rdb, w.keys, w.live, synthBase+atUs, w.liveAt,
		strconv.FormatFloat(count, 'g', -1, 64), n, 1000, "1", 0, 0, 0).Int64Slice()
	if err != nil || len(res) != cluster.ResultsPerCall {
		w.t.Fatalf("script at %dµs: %v, %v", atUs, res, err)
	}
	return res[0]
}

// An avgLocal window's limit follows the live gateways. When it grows, every
// pass is kept; when it shrinks, the newest passes (up to the new limit)
// are kept, so a call waits until those leave: every pass dropped is older,
// and no real interval gets more than the new limit. Slots regroup when the
// limit crosses 1024.
func TestWindowResizesWithLiveGateways(t *testing.T) {
	type step struct {
		live      int
		at, n     int64
		wantRetry int64
	}
	cases := []struct {
		name  string
		count float64
		steps []step
	}{
		{"count 10 a gateway", 10, []step{
			{1, 0, 5, 0}, {1, 5 * ms, 5, 0},
			{1, 6 * ms, 1, 994 * ms},
			{2, 100 * ms, 10, 0},       // 20 now: room for 10 more
			{2, 101 * ms, 1, 899 * ms}, // full until the passes at 0 leave
			{1, 200 * ms, 1, 900 * ms}, // 10 again: the newest 10 (of 100ms) are kept
			{1, 1005 * ms, 1, 95 * ms}, // (5ms, 1005ms] really holds those 10
			{1, 1100 * ms, 10, 0},
		}},
		{"count 1000 a gateway, regrouped", 1000, []step{
			{1, 0, 600, 0}, {1, 10 * ms, 400, 0},
			{1, 20 * ms, 1, 980 * ms},
			{2, 30 * ms, 1000, 0},     // 2000: slots of 2 tokens
			{2, 30 * ms, 1, 970 * ms}, //
			{3, 31 * ms, 1000, 0},     // 3000: slots of 3
			{3, 31 * ms, 1, 969 * ms}, //
			{1, 40 * ms, 1, 991 * ms}, // 1000: the newest 1000 (of 31ms) kept
			{1, 1030 * ms, 1, 1 * ms}, //
			{1, 1031 * ms, 1000, 0},   //
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			w := newScriptWindow(t)
			for i, s := range c.steps {
				w.setLive(s.live)
				if got := w.callAvg(s.at, c.count, s.n); got != s.wantRetry {
					t.Errorf("step %d: %d gateways, %d tokens at %.3fms: got %d (0 = pass, else µs to wait), want %d", i, s.live, s.n, float64(s.at)/1000, got, s.wantRetry)
				}
			}
		})
	}
}

// Gateways read the live gateways a heartbeat apart, so their readings
// disagree for a moment: an avgLocal window counts with the newest reading
// it was given and ignores older ones, so its limit does not flap between
// gateways (each flap would rebuild the ring and drop passes). A call with
// no reading yet (0) uses the window's; a window with none counts one.
func TestWindowKeepsTheNewestLiveReading(t *testing.T) {
	w := newScriptWindow(t)
	type step struct {
		live, stamp int64 // the caller's reading
		at, n       int64
		wantRetry   int64
	}
	steps := []step{
		{0, 0, 0, 10, 0},              // no reading anywhere: one gateway, 10
		{0, 0, 1 * ms, 1, 999 * ms},   //
		{2, 100, 2 * ms, 10, 0},       // a reading of 2: 20
		{1, 90, 3 * ms, 1, 997 * ms},  // an older reading of 1 is ignored: still 20, full
		{0, 0, 4 * ms, 1, 996 * ms},   // no reading: the window's, 2
		{3, 100, 5 * ms, 1, 995 * ms}, // a reading as old as the window's is not newer
	}
	for i, s := range steps {
		w.live, w.liveAt = s.live, s.stamp
		if got := w.callAvg(s.at, 10, s.n); got != s.wantRetry {
			t.Errorf("step %d: reading %d at %d, %d tokens at %.3fms: got %d, want %d", i, s.live, s.stamp, s.n, float64(s.at)/1000, got, s.wantRetry)
		}
	}
	// A newer reading of 1 shrinks the window to the newest 10 passes.
	w.live, w.liveAt = 1, 101
	if got := w.callAvg(10*ms, 10, 1); got != 992*ms {
		t.Errorf("newer reading of 1: got %d, want %d (full until the passes at 2ms leave)", got, 992*ms)
	}
}

// A refusal says when the window can take the call, through the Service:
// from Redis's answer, and then from the blocks this gateway remembers
// (which answer without a round trip), counting down; for a flow rule and
// for a param rule's value, taken or peeked at. Retry-After comes from it.
func TestRefusalSaysWhenTheWindowFrees(t *testing.T) {
	srv := startPrivateRedis(t)
	clock := new(synthClock)
	s := newService(t, cluster.Options{URL: srv.url(), Namespace: "retry", Timeout: 5 * time.Second, Heartbeat: time.Hour})
	s.SetClock(clock.now)
	flow := qpsRule(2, config.ThresholdGlobal)
	for i, st := range []struct {
		at        int64 // µs
		ok        bool
		wantRetry time.Duration
	}{
		{0, true, 0}, {300 * ms, true, 0},
		{400 * ms, false, 600 * time.Millisecond}, // Redis: the pass at 0 leaves at 1 s
		{700 * ms, false, 300 * time.Millisecond}, // remembered, counting down
		{1000 * ms, true, 0},
	} {
		clock.us.Store(st.at)
		ok, retry, err := s.AcquireRetry(flow, "", 1)
		if err != nil || ok != st.ok || retry != st.wantRetry {
			t.Errorf("flow step %d at %dms: ok=%v retry=%v err=%v, want ok=%v retry=%v", i, st.at/ms, ok, retry, err, st.ok, st.wantRetry)
		}
	}
	param := paramRule(1, 2, config.ThresholdGlobal) // 1 per 2 s per value
	clock.us.Store(5000 * ms)
	if ok, _, err := s.AcquireParam(param, 1, "k", 1); !ok || err != nil {
		t.Fatalf("the value's first call: ok=%v err=%v", ok, err)
	}
	clock.us.Store(5500 * ms)
	if ok, retry, err := s.AcquireParam(param, 1, "k", 1); ok || err != nil || retry != 1500*time.Millisecond {
		t.Errorf("the value's second call: ok=%v retry=%v err=%v, want refused for 1.5 s", ok, retry, err)
	}
	after := paramRule(1, 2, config.ThresholdGlobal)
	after.CountOn, after.FailureStatuses = config.CountOnFailure, []string{"401"}
	if err := s.ChargeParam(after, 1, "u", 1); err != nil {
		t.Fatal(err)
	}
	clock.us.Store(6000 * ms)
	if ok, retry, err := s.PeekParam(after, 1, "u", 1); ok || err != nil || retry != 1500*time.Millisecond {
		t.Errorf("a peek at a locked-out value: ok=%v retry=%v err=%v, want refused for 1.5 s", ok, retry, err)
	}
}
