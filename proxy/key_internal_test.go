package proxy

import (
	"net/http/httptest"
	"slices"
	"testing"

	"sluice/config"
	"sluice/hotparam"
)

// compositeExchange is an exchange for a request with X-Tenant and ?u=
// values, from a peer trusted for X-Forwarded-For.
func compositeExchange(t testing.TB, tenants, query string) *exchange {
	src, err := newSources([]string{"127.0.0.0/8"})
	if err != nil {
		t.Fatal(err)
	}
	r := httptest.NewRequest("GET", "/item?"+query, nil)
	r.RemoteAddr = "127.0.0.1:5000"
	r.Header.Set("X-Forwarded-For", "9.9.9.9")
	r.Header.Set("X-Tenant", tenants)
	v, _ := readTarget(r, targetRules{mergeSlashes: true, keepParams: true})
	return &exchange{req: r, view: v, src: src}
}

// TestCompositeValues: a composite key's values are every combination of
// its sources' values, joined in the key's order.
func TestCompositeValues(t *testing.T) {
	e := compositeExchange(t, "acme, b+c", "u=1&u=2")
	for _, tc := range []struct {
		key  string
		want []string
	}{
		{"ip+header:X-Tenant", []string{"9.9.9.9+acme", `9.9.9.9+b\+c`}},
		{"header:X-Tenant+query:u", []string{"acme+1", "acme+2", `b\+c+1`, `b\+c+2`}},
		{"query:u+ip+header:X-Tenant", []string{"1+9.9.9.9+acme", `1+9.9.9.9+b\+c`, "2+9.9.9.9+acme", `2+9.9.9.9+b\+c`}},
		{"ip+header:X-None", nil},
	} {
		k, err := config.ParseKey(tc.key)
		if err != nil {
			t.Fatal(err)
		}
		got, ok := e.Values(k)
		if !ok || !slices.Equal(got, tc.want) {
			t.Errorf("%s: %q, %v; want %q", tc.key, got, ok, tc.want)
		}
	}
	// Joining 16 combinations reuses the exchange's buffer: no allocation.
	e = compositeExchange(t, "a, b, c, d", "u=1&u=2&u=3&u=4")
	k, _ := config.ParseKey("ip+header:X-Tenant+query:u")
	if got, _ := e.Values(k); len(got) != 16 {
		t.Fatalf("%d combinations, want 16", len(got))
	}
	if n := testing.AllocsPerRun(100, func() { e.Values(k) }); n != 0 {
		t.Errorf("joining 16 combinations: %v allocs, want 0", n)
	}
}

// BenchmarkCompositeKey is a param rule's check (reading the sources,
// joining a composite key's values, Enter and Exit) for one tracked
// combination (ip+header), two, and 16 (4 tenants x 4 users).
func BenchmarkCompositeKey(b *testing.B) {
	for _, tc := range []struct{ name, key, tenants, query string }{
		{"ip+header/1", "ip+header:X-Tenant", "acme", ""},
		{"header+query/2", "header:X-Tenant+query:u", "a, b", "u=1"},
		// Past three values the call's token holds its buckets in a slice
		// of its own (hotparam.Token), as for 16 values of one source.
		{"header+query/16", "header:X-Tenant+query:u", "a, b, c, d", "u=1&u=2&u=3&u=4"},
	} {
		b.Run(tc.name, func(b *testing.B) {
			k, err := config.ParseKey(tc.key)
			if err != nil {
				b.Fatal(err)
			}
			cfg := config.Config{ParamRules: []config.ParamRule{{Resource: "r", Param: k, Count: 1e9}}}
			config.Defaults(&cfg)
			c := hotparam.Compile(cfg.ParamRules, nil).For("r")
			e := compositeExchange(b, tc.tenants, tc.query)
			now := int64(0)
			check := func() {
				now += 100
				tok, v := c.Enter(now, e, 1)
				if v.Blocked {
					b.Fatal("blocked")
				}
				tok.Exit(now, 200)
			}
			check()
			b.ReportAllocs()
			for b.Loop() {
				check()
			}
		})
	}
}
