package hotparam_test

import (
	"context"
	"errors"
	"sluice/config"
	"strings"
	"testing"
	"time"
)

// TestReportDigestFlagForNonUTF8LongValue: a value kept as a digest is
// listed with Digest true. Whether it was one was once guessed from the
// listed name's length (> 64), but internal/lru cuts the name's prefix
// back to a character boundary: for 100 bytes of 0x80 the prefix is empty
// and the name 36 bytes, so /api/params said digest:false for a digest.
func TestReportDigestFlagForNonUTF8LongValue(t *testing.T) {
	c := compile(t, seedRule()).For("get-order")
	long := strings.Repeat("\x80", 100)
	flood(c, 0, long, 4)
	top := c.Report(0, nil, 10)[0].Values
	if len(top) != 1 {
		t.Fatalf("top: %+v", top)
	}
	if !top[0].Digest {
		t.Errorf("a 100-byte value tracked by its digest is listed as %q (%d bytes) with Digest false", top[0].Value, len(top[0].Value))
	}
}

// TestReportFailureLockoutShownAndLifted: a countOn failure lockout
// shows in a peek and the top list (dryRun too), and Forget lifts it
// (SPEC §12).
func TestReportFailureLockoutShownAndLifted(t *testing.T) {
	for _, dry := range []bool{false, true} {
		r := lockoutRule(2, 600)
		r.DryRun = dry
		c := compile(t, r).For("get-order")
		runAfter(t, c, []afterStep{
			{at: 0, value: "m", pass: true, status: 401},
			{at: 0, value: "m", pass: true, status: 401},
		})
		before := c.Report(sec(1), []string{"m"}, 0)[0].Values[0]
		if before.Remaining != 0 || before.NextToken <= 0 || !before.Tracked {
			t.Errorf("dry %v: locked out value peeked: %+v", dry, before)
		}
		tok, vd := c.Enter(sec(1), order("m"), 1)
		if vd.Blocked != !dry {
			t.Errorf("dry %v: blocked %v", dry, vd.Blocked)
		}
		tok.Exit(sec(1), 200)
		top := c.Report(sec(1), nil, 100)[0].Values
		if len(top) != 1 || top[0].Blocks != 1 {
			t.Errorf("dry %v: top %+v", dry, top)
		}
		if n, _ := c.Forget(t.Context(), "m"); n != 1 {
			t.Errorf("forget %d", n)
		}
		after := c.Report(sec(1), []string{"m"}, 0)[0].Values[0]
		if after.Remaining != 2 || after.Tracked || after.NextToken != 0 {
			t.Errorf("dry %v: after lift: %+v", dry, after)
		}
		_, vd = c.Enter(sec(1), order("m"), 1)
		if vd.Blocked || vd.DryRun != 0 {
			t.Errorf("dry %v: after lift blocked %+v", dry, vd)
		}
	}
}

// TestReportDebtLifted: a countOn cost debt is lifted by Forget.
func TestReportDebtLifted(t *testing.T) {
	c := compile(t, costRule(100, 10)).For("get-order")
	runAfter(t, c, []afterStep{
		{at: 0, value: "a", pass: true, status: 200, cost: []string{"60"}},
		{at: 0, value: "a", pass: true, status: 200, cost: []string{"90"}},
		{at: 0, value: "a", pass: false},
	})
	c.Forget(t.Context(), "a")
	st := c.Report(0, []string{"a"}, 0)[0].Values[0]
	if st.Remaining != 100 || st.NextToken != 0 {
		t.Errorf("after lift %+v", st)
	}
	runAfter(t, c, []afterStep{{at: 0, value: "a", pass: true, status: 200}})
}

// TestReportClusterFallbackFiguresKeepShare: with Redis down, a clusterMode
// global rule's figures are its fallback's (docs/admin.md), which limits
// this gateway to its share of count. They were read with the whole
// count: count 6 on 3 gateways, after one pass, Report said 3 left while
// the fallback passed 1 more.
func TestReportClusterFallbackFiguresKeepShare(t *testing.T) {
	rc := &readingCluster{fakeCluster: fakeCluster{ok: true, gateways: 3, err: errRedisDown}, err: errRedisDown}
	yes := true
	r := clusterRule(6, "", &yes)
	r.Items = nil
	c := compileCluster(t, rc, r)
	now := sec(10)
	if _, vd := c.Enter(now, order("v"), 1); vd.Blocked {
		t.Fatal("first call blocked")
	}
	got := c.Report(now, []string{"v"}, 0)[0].Values[0]
	// What the fallback would decide: one more call passes, a second does not.
	passes := 0
	for range 3 {
		if _, vd := c.Enter(now, order("v"), 1); !vd.Blocked {
			passes++
		}
	}
	if got.Shared {
		t.Fatalf("Redis is down, yet figures are shared: %+v", got)
	}
	if got.Remaining != float64(passes) {
		t.Errorf("Report says %v remaining with Redis down; the fallback then passed %d more", got.Remaining, passes)
	}
}

var errRedisDown = errors.New("redis down")

// recordingReader records the values ReadParam is asked about.
type recordingReader struct {
	fakeCluster
	asked []string
}

func (f *recordingReader) ReadParam(_ context.Context, _ *config.ParamRule, _ float64, v string) (float64, time.Duration, error) {
	f.asked = append(f.asked, v)
	return 0, 0, nil
}

// TestReportClusterTopSkipsDigestNames: the top list never asks Redis
// about a digest's listed name (no client sent it): it once did, for a
// value whose name was short (see TestReportDigestFlagForNonUTF8LongValue),
// and showed that empty window's figures as the cluster's (Shared, the
// whole count left) for a value that was blocked.
func TestReportClusterTopSkipsDigestNames(t *testing.T) {
	rr := &recordingReader{fakeCluster: fakeCluster{ok: false}}
	r := clusterRule(5, "", nil)
	c := compileCluster(t, rr, r)
	long := strings.Repeat("\x80", 100)
	for range 3 {
		c.Enter(0, order(long), 1) // the cluster refuses: blocks counted
	}
	top := c.Report(0, nil, 10)[0].Values
	if len(top) != 1 {
		t.Fatalf("top %+v", top)
	}
	if len(rr.asked) != 0 || top[0].Shared {
		t.Errorf("Redis was asked about %q, a digest's listed name, and its figures shown as the cluster's: %+v", rr.asked, top[0])
	}
}

// An ip rule keys a client by its canonical address, and so do the
// operator's peek and lift: ::ffff:127.0.0.1, 127.0.0.1:5555 and
// [::ffff:127.0.0.1]:80 name the 127.0.0.1 it tracks. They lifted nothing
// (0 rules) and peeked a fresh value, while the client stayed locked out.
func TestLiftAnAddressAsWritten(t *testing.T) {
	r := seedRule()
	r.Items, r.Param, r.Count, r.DurationSec = nil, config.Key{{Kind: config.SourceIP}}, 1, 600
	for _, spelled := range []string{"::ffff:127.0.0.1", "127.0.0.1:5555", "[::ffff:127.0.0.1]:80", "127.0.0.1"} {
		c := compile(t, r).For("get-order")
		c.Enter(sec(1), one("127.0.0.1"), 1)
		if _, vd := c.Enter(sec(1), one("127.0.0.1"), 1); !vd.Blocked {
			t.Fatal("the second call of a count of 1 per 600 s passed")
		}
		if st := c.Report(sec(1), []string{spelled}, 0)[0].Values[0]; !st.Tracked || st.Remaining != 0 {
			t.Errorf("peek %s: %+v, want 127.0.0.1, tracked with nothing left", spelled, st)
		}
		if n, _ := c.Forget(t.Context(), spelled); n != 1 {
			t.Errorf("lift %s: %d rules, want 1", spelled, n)
		}
		if _, vd := c.Enter(sec(1), one("127.0.0.1"), 1); vd.Blocked {
			t.Errorf("after lifting %s: still blocked", spelled)
		}
	}
}
