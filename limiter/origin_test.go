package limiter_test

import (
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"sluice/config"
	"sluice/limiter"
)

func app(r config.FlowRule, limitApp string) config.FlowRule {
	r.LimitApp = limitApp
	return r
}

// passedOf counts how many of 10 calls at one instant pass, per origin.
func passedOf(c *limiter.Checker, now int64, origins ...string) map[string]int {
	got := make(map[string]int)
	for _, o := range origins {
		for range 10 {
			tok, v := c.Enter(now, o, 1)
			if !v.Blocked {
				got[o]++
				tok.Exit(now, false)
			}
		}
	}
	return got
}

func TestLimitApp(t *testing.T) {
	tests := []struct {
		name  string
		rules []config.FlowRule
		want  map[string]int // passes of 10 calls each, origins in order a, b, c, d, ""
	}{
		{"default counts all callers together", []config.FlowRule{app(qps("r", 12), "default")},
			map[string]int{"a": 10, "b": 2}},
		{"specific limits only that origin", []config.FlowRule{app(qps("r", 2), "a")},
			map[string]int{"a": 2, "b": 10, "c": 10, "d": 10, "": 10}},
		{"a list gives each origin its own count", []config.FlowRule{app(qps("r", 2), "a, b")},
			map[string]int{"a": 2, "b": 2, "c": 10, "d": 10, "": 10}},
		{"other: each origin not named elsewhere, on its own", []config.FlowRule{app(qps("r", 5), "a"), app(qps("r", 1), "other")},
			map[string]int{"a": 5, "b": 1, "c": 1, "d": 1, "": 10}},
		{"no origin: only default rules", []config.FlowRule{app(qps("r", 1), "other"), app(qps("r", 1), "x"), app(qps("r", 25), "default")},
			map[string]int{"a": 1, "b": 1, "c": 1, "d": 1, "": 10}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := compile(t, tt.rules...).Checker("r", "default")
			got := passedOf(c, t0, "a", "b", "c", "d", "")
			for o, w := range tt.want {
				if got[o] != w {
					t.Errorf("origin %q passed %d, want %d (all: %v)", o, got[o], w, got)
				}
			}
		})
	}
}

// Random origins cannot grow memory past MaxOrigins, per resource node and per
// other rule; the per-origin stats show the most recent ones.
func TestOriginsBounded(t *testing.T) {
	f := limiter.Compile(defaulted(app(qps("r", 1), "other")), nil, limiter.Options{MaxOrigins: 100})
	c := f.Checker("r", "default")
	for i := range 10000 {
		o := fmt.Sprintf("o%d", i)
		tok, v := c.Enter(t0+int64(i), o, 1)
		if v.Blocked {
			t.Fatalf("new origin %s blocked", o)
		}
		tok.Exit(t0+int64(i), false)
	}
	st := f.Stats(t0 + 10000)
	if n := len(st[0].Origins); n != 100 || st[0].Origins[0].Name != "o9999" {
		t.Errorf("%d origins tracked (first %q), want 100 with o9999 first", n, st[0].Origins[0].Name)
	}
}

// TestOriginStatisticsShareOneBudget: the per-origin statistics of every
// resource share one budget, so made-up origins sent to each of many
// routes hold at most the budget in all, not MaxOrigins per route. A
// reload whose new share is within half to twice the old keeps each
// resource's origins; one below half starts them afresh at the new share.
func TestOriginStatisticsShareOneBudget(t *testing.T) {
	tracked := func(f *limiter.Flow) (per map[string]int, all int) {
		per = map[string]int{}
		for _, rs := range f.Stats(t0 + 1000) {
			per[rs.Resource] = len(rs.Origins)
			all += len(rs.Origins)
		}
		return per, all
	}
	flood := func(f *limiter.Flow, resources, origins int) {
		for r := range resources {
			c := f.Checker(fmt.Sprint("r", r), "default")
			for i := range origins {
				tok, _ := c.Enter(t0+int64(i), fmt.Sprint("o", i), 1)
				tok.Exit(t0+int64(i), false)
			}
		}
	}
	for _, tc := range []struct {
		resources, share int
	}{
		{1, 1000}, // MaxOrigins
		{10, 200}, // 2000 / 10
		{100, 20}, // 2000 / 100
		{1000, 8}, // minOriginShare
	} {
		opts := limiter.Options{MaxOrigins: 1000, OriginBudget: 2000, Resources: tc.resources}
		f := limiter.Compile(nil, nil, opts)
		flood(f, tc.resources, 2*tc.share+10)
		per, all := tracked(f)
		if len(per) != tc.resources || per["r0"] != tc.share || all != tc.resources*tc.share {
			t.Errorf("%d resources: r0 tracks %d origins, %d in all; want %d each", tc.resources, per["r0"], all, tc.share)
		}
	}

	opts := limiter.Options{MaxOrigins: 1000, OriginBudget: 2000, Resources: 10}
	f := limiter.Compile(nil, nil, opts)
	flood(f, 10, 500)
	opts.Resources = 12 // a share of 166: the 200 tracked stay
	g := limiter.Compile(nil, f, opts)
	for r := range 10 {
		g.Checker(fmt.Sprint("r", r), "default")
	}
	g.Seal()
	if per, _ := tracked(g); per["r0"] != 200 {
		t.Errorf("a reload to a share of 166 left r0 %d origins, want its 200 kept", per["r0"])
	}
	opts.Resources = 100 // a share of 20
	h := limiter.Compile(nil, g, opts)
	flood(h, 10, 500)
	h.Seal()
	if per, all := tracked(h); per["r0"] != 20 || all != 200 {
		t.Errorf("a reload to a share of 20: r0 tracks %d origins, %d in all; want 20 each", per["r0"], all)
	}
}

// Per-origin statistics name callers as origin.from reads them. A reload
// that reads origins from elsewhere (header:X-Api-Key, then ip) counts per
// origin afresh: the old names are callers of another kind, and read from
// a credential they would go on being listed, as API keys, under a source
// that is not one. The resource's own statistics carry on, and so do its
// origins across a reload that keeps origin.from.
func TestOriginStatisticsAfreshWhenOriginFromChanges(t *testing.T) {
	seen := func(f *limiter.Flow) (origins []string, pass float64) {
		for _, rs := range f.Stats(t0 + 1000) {
			if rs.Resource == "r" {
				for _, o := range rs.Origins {
					origins = append(origins, o.Name)
				}
				return origins, rs.Node.PassQps
			}
		}
		return nil, 0
	}
	reload := func(prev *limiter.Flow, from string) *limiter.Flow {
		f := limiter.Compile(nil, prev, limiter.Options{OriginFrom: from})
		f.Checker("r", "default")
		f.Seal()
		return f
	}
	f := reload(nil, "header:X-Api-Key")
	c := f.Checker("r", "default")
	for i := range 3 {
		tok, _ := c.Enter(t0+int64(i), "sk-live-secret", 1)
		tok.Exit(t0+int64(i), false)
	}
	f = reload(f, "header:X-Api-Key")
	if origins, pass := seen(f); len(origins) != 1 || origins[0] != "sk-live-secret" || pass != 3 {
		t.Fatalf("a reload keeping origin.from: origins %v, passQps %v; want the one origin kept and 3", origins, pass)
	}
	f = reload(f, "ip")
	if origins, pass := seen(f); len(origins) != 0 || pass != 3 {
		t.Fatalf("a reload reading origins from ip: origins %v, passQps %v; want none listed and the resource's 3 kept", origins, pass)
	}
}

// An origin with a call in flight is never evicted: its concurrency limit holds.
func TestOriginInFlightNotEvicted(t *testing.T) {
	r := config.FlowRule{Resource: "r", LimitApp: "other", Grade: config.GradeConcurrency, Count: 1}
	f := limiter.Compile(defaulted(r), nil, limiter.Options{MaxOrigins: 2})
	c := f.Checker("r", "default")
	held, v := c.Enter(t0, "a", 1)
	if v.Blocked {
		t.Fatal("first call blocked")
	}
	for i := range 10 {
		tok, _ := c.Enter(t0, fmt.Sprint(i), 1)
		tok.Exit(t0, false)
	}
	if _, v := c.Enter(t0, "a", 1); !v.Blocked {
		t.Errorf("origin a's in-flight call was forgotten: a second one passed")
	}
	held.Exit(t0, false)
	if _, v := c.Enter(t0, "a", 1); v.Blocked {
		t.Errorf("blocked after the call ended")
	}
}

// An origin comes from a request header, which may be 64 KiB. Each long
// origin is still limited on its own (an `other` rule counts per origin),
// the admin's statistics still name it readably, and what the limiter keeps
// of it is bounded: MaxOrigins bounds memory, not only the number of origins.
func TestLongOrigins(t *testing.T) {
	c := compile(t, app(qps("r", 1), "other")).Checker("r", "default")
	long := func(i int) string { return strings.Repeat("o", 60<<10) + strconv.Itoa(i) }

	// Two origins that differ only at their end have a bucket each.
	got := passedOf(c, t0, long(1), long(2), long(1))
	if got[long(1)] != 1 || got[long(2)] != 1 {
		t.Errorf("long origins passed %d and %d of 10 each, want 1 and 1 (the first again: none)", got[long(1)], got[long(2)])
	}

	f := compile(t, app(qps("r", 1), "other"))
	c = f.Checker("r", "default")
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for i := range 500 {
		o := long(i) // a fresh 60 KiB string each time, as from a request
		if tok, v := c.Enter(t0, o, 1); !v.Blocked {
			tok.Exit(t0, false)
		}
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	// The old code kept every 60 KiB string: ~30 MiB for 500 origins.
	if grew := int64(after.HeapAlloc) - int64(before.HeapAlloc); grew > 4<<20 {
		t.Errorf("500 tracked 60 KiB origins hold %d KiB, want < 4 MiB", grew>>10)
	}
	for _, rs := range f.Stats(t0) {
		for _, o := range rs.Origins {
			if len(o.Name) > 100 || !strings.HasPrefix(o.Name, "oooo") || !strings.Contains(o.Name, "…#") {
				t.Fatalf("origin shown as %.120q, want its first bytes and a digest", o.Name)
			}
		}
	}
	runtime.KeepAlive(c)
}
