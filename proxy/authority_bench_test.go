package proxy

import (
	"fmt"
	"net/http/httptest"
	"testing"

	"sluice/config"
)

// authorityBench is a resource's authority rules as a gateway of some
// size holds them: a white list of 10 origins and of 20 v4 and v6
// networks, and a black list of 2 networks, with the caller reading its
// address behind a trusted proxy.
func authorityBench(tb testing.TB) (*authorityGuard, *sources) {
	tb.Helper()
	var apps string
	var ips []string
	for i := range 10 {
		apps += fmt.Sprintf("app-%d,", i)
		ips = append(ips, fmt.Sprintf("10.%d.0.0/16", i), fmt.Sprintf("2001:db8:%x::/48", i))
	}
	guards, err := compileAuthority([]config.AuthorityRule{
		{Resource: "r", Strategy: config.AuthorityWhite, LimitApp: apps, IPs: ips},
		{Resource: "r", Strategy: config.AuthorityBlack, IPs: []string{"10.9.9.0/24", "2001:db8:9:9::/64"}},
	})
	if err != nil {
		tb.Fatal(err)
	}
	src, err := newSources([]string{"127.0.0.0/8"})
	if err != nil {
		tb.Fatal(err)
	}
	return guards["r"], src
}

// authorityCases are callers the rules of authorityBench meet: passed by
// origin, passed by address (the last network of the list), refused.
var authorityCases = []struct {
	name, origin, xff string
	pass              bool
}{
	{"origin", "app-7", "192.0.2.1", true},
	{"v4 address", "", "10.9.1.1", true},
	{"v6 address", "", "2001:db8:9::1", true},
	{"refused", "app-x", "192.0.2.1", false},
}

// BenchmarkAuthority is one authority check as a route makes it: the
// client's address read from X-Forwarded-For behind a trusted proxy, then
// both rules. It allocates nothing.
func BenchmarkAuthority(b *testing.B) {
	g, src := authorityBench(b)
	for _, tc := range authorityCases {
		b.Run(tc.name, func(b *testing.B) {
			r := httptest.NewRequest("GET", "/", nil)
			r.RemoteAddr = "127.0.0.1:5000"
			r.Header.Set("X-Forwarded-For", tc.xff)
			var c call
			c.origin = tc.origin
			b.ReportAllocs()
			for b.Loop() {
				c.addr, _ = src.client(r)
				if _, v := g.enter(0, &c); v.Blocked == tc.pass {
					b.Fatalf("blocked %v, want %v", v.Blocked, !tc.pass)
				}
			}
		})
	}
}

func TestAuthorityAllocatesNothing(t *testing.T) {
	g, src := authorityBench(t)
	for _, tc := range authorityCases {
		r := httptest.NewRequest("GET", "/", nil)
		r.RemoteAddr = "[::ffff:127.0.0.1]:5000" // IPv4-mapped, so the canonical form differs
		r.Header.Set("X-Forwarded-For", tc.xff)
		var c call
		c.origin = tc.origin
		allocs := testing.AllocsPerRun(1000, func() {
			c.addr, _ = src.client(r)
			if _, v := g.enter(0, &c); v.Blocked == tc.pass {
				t.Fatalf("%s: blocked %v, want %v", tc.name, v.Blocked, !tc.pass)
			}
		})
		if allocs != 0 {
			t.Errorf("%s: an authority check allocates %v times, want 0", tc.name, allocs)
		}
	}
}
