package proxy

import (
	"bufio"
	"crypto/tls"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"sluice/internal/match"
)

// readRaw reads a request target as the server does (net/http's own
// parser), so readTarget sees what it sees in production: RequestURI as
// sent, URL as net/http parsed it. ok is false when net/http refuses it.
func readRaw(method, target string) (*http.Request, bool) {
	r, err := http.ReadRequest(bufio.NewReader(strings.NewReader(method + " " + target + " HTTP/1.1\r\nHost: h\r\n\r\n")))
	return r, err == nil
}

// TestReadTarget pins the one view of a target: the normalized path the
// routes match and the upstream receives, and the targets refused (400).
func TestReadTarget(t *testing.T) {
	for _, c := range []struct {
		target string
		merge  bool
		path   string // want; "" with bad
		query  string
		bad    int
	}{
		{"/item/42?x=1", true, "/item/42", "x=1", badNone},
		{"/", true, "/", "", badNone},
		{"/%68ello", true, "/hello", "", badNone},
		{"/%68%65%6C%6c%6F", true, "/hello", "", badNone},
		{"/%7e%7E%2d%5F%2e%41z", true, "/~~-_.Az", "", badNone},
		{"/%2F%3A%20", true, "/%2F%3A%20", "", badNone},     // nothing to change
		{"/a%2Fb/a%2fb", true, "/a%2Fb/a%2Fb", "", badNone}, // not separators; hex upper-cased
		{"/%c3%a9%C3%a9", true, "/%C3%A9%C3%A9", "", badNone},
		{"/a%20b%00%25%3F%23", true, "/a%20b%00%25%3F%23", "", badNone},
		{"/caf\xc3\xa9", true, "/caf%C3%A9", "", badNone}, // raw bytes a path may not hold: escaped
		{"/a\\b\"<>^`{|}", true, "/a%5Cb%22%3C%3E%5E%60%7B%7C%7D", "", badNone},
		{"/a;b=c,d+e!$&'()*:@[]", true, "/a;b=c,d+e!$&'()*:@[]", "", badNone},
		{"//a///b//", true, "/a/b/", "", badNone},
		{"//a///b//", false, "//a///b//", "", badNone},
		{"/%2F/%2F", true, "/%2F/%2F", "", badNone}, // an escaped slash is no slash to merge
		{"/Hello/", true, "/Hello/", "", badNone},   // case and trailing slash kept
		{"/a?", true, "/a", "", badNone},
		{"/a?q=1&id=a%20b+c", true, "/a", "q=1&id=a%20b+c", badNone},
		{"http://other.example/%68i?x=1", true, "/hi", "x=1", badNone},
		{"http://other.example", true, "/", "", badNone},
		{"http://other.example?x=1", true, "/", "x=1", badNone},

		{"/item?id=102#zN", true, "", "", badFragment},
		{"/item#x", true, "", "", badFragment},
		{"/item?%23=1#", true, "", "", badFragment},
		{"*", true, "", "", badForm},
		{"http:opaque", true, "", "", badForm},
		{"/a/../b", true, "", "", badDot},
		{"/a/%2e%2E/b", true, "", "", badDot},
		{"/a/.%2fb", true, "", "", badDot},
		{"/a/.", true, "", "", badDot},
		{"/a?x=1;y=2", true, "", "", badQuery},
		{"/a?x=%zz&y=1", true, "", "", badQuery},
		{"/a?x=%4", true, "", "", badQuery},
		{"/a?" + strings.Repeat("a=1&", maxQueryParams) + "b", true, "", "", badQuery},
		{"/a?" + strings.Repeat("a=1&", maxQueryParams-1) + "b", true, "/a", strings.Repeat("a=1&", maxQueryParams-1) + "b", badNone},
		// The path, as the rules read it, is bounded (414); the query is not.
		{"/" + strings.Repeat("a", maxPathBytes-1) + "?" + strings.Repeat("q", 20000), true, "/" + strings.Repeat("a", maxPathBytes-1), strings.Repeat("q", 20000), badNone},
		{"/" + strings.Repeat("a", maxPathBytes), true, "", "", badLongPath},
		{"/" + strings.Repeat("%61", maxPathBytes), true, "", "", badLongPath},
		{"/" + strings.Repeat("%61", maxPathBytes/2), true, "/" + strings.Repeat("a", maxPathBytes/2), "", badNone},
		{"/" + strings.Repeat("é", maxPathBytes/5), true, "", "", badLongPath}, // escaped: 6 bytes each
	} {
		r, ok := readRaw("GET", c.target)
		if !ok {
			t.Errorf("%.60q: net/http refuses it", c.target)
			continue
		}
		v, bad := readTarget(r, targetRules{mergeSlashes: c.merge, keepParams: true})
		if bad != c.bad || bad == badNone && (v.path != c.path || v.query != c.query) {
			t.Errorf("%.60q merge=%v: %q %.40q bad %d; want %q %.40q bad %d", c.target, c.merge, v.path, v.query, bad, c.path, c.query, c.bad)
		}
		if bad != badNone {
			continue
		}
		// A fixed point: the view read again is itself (what the
		// upstream receives, it reads as the gateway did).
		again, ok := readRaw("GET", v.path)
		if w, b := readTarget(again, targetRules{mergeSlashes: c.merge, keepParams: true}); !ok || b != badNone || w.path != v.path {
			t.Errorf("%q: its view %q reads as %q (%d)", c.target, v.path, w.path, b)
		}
		// It is a path url.URL writes as it is, and means what the
		// client's meant.
		u := &url.URL{Path: unescapedPath(v.path), RawPath: v.path}
		if u.EscapedPath() != v.path {
			t.Errorf("%q: EscapedPath of the view %q is %q", c.target, v.path, u.EscapedPath())
		}
	}
	// CONNECT is refused in its authority-form and with a path (h2's
	// extended CONNECT).
	for _, target := range []string{"example.com:443", "/items/1"} {
		if r, ok := readRaw("CONNECT", target); !ok {
			t.Errorf("CONNECT %s: net/http refuses it", target)
		} else if _, bad := readTarget(r, targetRules{mergeSlashes: true, keepParams: true}); bad != badConnect {
			t.Errorf("CONNECT %s: bad %d, want badConnect", target, bad)
		}
	}
}

// TestReadTargetStrictSNI: under tls.strictSni a request over TLS whose
// Host is not its connection's SNI is refused (421), the two compared as
// the routes compare hosts; without TLS, or without the setting, nothing
// changes. It costs no allocation in the common case.
func TestReadTargetStrictSNI(t *testing.T) {
	for _, c := range []struct {
		sni, host string
		tls       bool
		bad       int
	}{
		{"shop.example.com", "shop.example.com", true, badNone},
		{"shop.example.com", "shop.example.com:8443", true, badNone},
		{"shop.example.com", "SHOP.Example.com.", true, badNone},
		{"Shop.Example.COM", "shop.example.com", true, badNone},
		{"shop.example.com", "api.example.com", true, badMisdirected}, // domain fronting
		{"a.example.com", "b.example.com", true, badMisdirected},      // both under one wildcard certificate
		{"shop.example.com", "shop.example.com.evil", true, badMisdirected},
		{"shop.example.com", "example.com", true, badMisdirected},
		{"shop.example.com", "[::1]:8443", true, badMisdirected},
		{"shop.example.com", "", true, badHost}, // no Host: refused as a bad Host first
		{"", "api.example.com", false, badNone}, // the plain listener: no SNI to hold it to
	} {
		for _, strict := range []bool{false, true} {
			r, _ := readRaw("GET", "/a")
			r.Host = c.host
			if c.tls {
				r.TLS = &tls.ConnectionState{ServerName: c.sni}
			}
			want := c.bad
			if !strict && want == badMisdirected {
				want = badNone
			}
			_, bad := readTarget(r, targetRules{strictSNI: strict, keepParams: true})
			if bad != want {
				t.Errorf("strict %v, SNI %q, Host %q: bad %d, want %d", strict, c.sni, c.host, bad, want)
			}
			if want == badMisdirected && badTargetStatus(bad) != http.StatusMisdirectedRequest {
				t.Errorf("misdirected: status %d, want 421", badTargetStatus(bad))
			}
		}
	}
	r, _ := readRaw("GET", "/a")
	r.Host, r.TLS = "shop.example.com:8443", &tls.ConnectionState{ServerName: "shop.example.com"}
	if n := testing.AllocsPerRun(100, func() { readTarget(r, targetRules{strictSNI: true, keepParams: true}) }); n != 0 {
		t.Errorf("strict SNI: %v allocations", n)
	}
}

// TestPlainTargetAgrees: the short cut for common targets reads each as
// the long way does, on every target of the differential test.
func TestPlainTargetAgrees(t *testing.T) {
	targets := append([]string{"/", "/a/b/", "/a.b/c.d?x=1&y=%20", "/a?", "/a?b#", "/.a", "/a/.b", "/a//b"}, diffSeeds...)
	rng := rand.New(rand.NewPCG(3, 24))
	for range 2000 {
		targets = append(targets, hostileTarget(rng, hostilePieces))
	}
	plain := 0
	for _, target := range targets {
		r, ok := readRaw("GET", target)
		if !ok {
			continue
		}
		v, ok := plainTarget(r.RequestURI)
		if !ok {
			continue
		}
		plain++
		for _, merge := range []bool{true, false} {
			if w, bad := readTargetLong(r, merge); bad != badNone || w != v {
				t.Errorf("%q merge=%v: short cut %+v, long way %+v (bad %d)", target, merge, v, w, bad)
			}
		}
	}
	if plain < 100 {
		t.Errorf("only %d targets took the short cut", plain)
	}
}

// TestReadTargetAllocatesNothing: a target that needs no change costs no
// allocation (the hot path reads every request's).
func TestReadTargetAllocatesNothing(t *testing.T) {
	for _, target := range []string{"/item/42?x=1", "/a%2Fb/c%20d?q=a+b", "/"} {
		r, _ := readRaw("GET", target)
		if n := testing.AllocsPerRun(100, func() { readTarget(r, targetRules{mergeSlashes: true, keepParams: true}) }); n != 0 {
			t.Errorf("%s: %v allocations", target, n)
		}
	}
}

// TestAppendUpstreamTarget: the request-target both forwarders send, with
// stripPrefix and a target's own path and query (joined as SetURL joins).
func TestAppendUpstreamTarget(t *testing.T) {
	for _, c := range []struct {
		target, path, query, strip, want string
	}{
		{"http://u", "/a/b", "x=1", "", "/a/b?x=1"},
		{"http://u", "/api/a%2Fb", "", "/api", "/a%2Fb"},
		{"http://u", "/api", "", "/api", "/"},
		{"http://u/base/", "/x", "q=1", "", "/base/x?q=1"},
		{"http://u/base", "/x", "", "", "/base/x"},
		{"http://u/b%20s/", "/x%2Fy", "", "", "/b%20s/x%2Fy"},
		{"http://u/base?t=1", "/x", "q=1", "", "/base/x?t=1&q=1"},
		{"http://u?t=1", "/x", "", "", "/x?t=1"},
	} {
		u, _ := url.Parse(c.target)
		b, n := appendUpstreamTarget(nil, u, &view{path: c.path, query: c.query}, c.strip)
		if string(b) != c.want || n != len(strings.SplitN(c.want, "?", 2)[0]) {
			t.Errorf("%s + %s?%s strip %q: %q (path %d), want %q", c.target, c.path, c.query, c.strip, b, n, c.want)
		}
	}
}

// BenchmarkReadTarget is what the one view adds to every request:
// reading a plain target, and one that must be normalized.
func BenchmarkReadTarget(b *testing.B) {
	for _, target := range []string{"/item/42?x=1", "//%68ello/caf%C3%A9/a%2Fb?q=1"} {
		r, _ := readRaw("GET", target)
		b.Run(target, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				readTarget(r, targetRules{mergeSlashes: true, keepParams: true})
			}
		})
	}
}

// TestNormalizePattern: a route pattern's literal parts are normalized as
// paths are, so that the spellings the view reads as one reach its route.
func TestNormalizePattern(t *testing.T) {
	for _, c := range []struct {
		pattern string
		merge   bool
		want    string
	}{
		{"/order/{orderId}", true, "/order/{orderId}"},
		{"/caf\xc3\xa9/{id:[a-z%]+}/*", true, "/caf%C3%A9/{id:[a-z%]+}/*"},
		{"/%68ello//{a}//b{c:\\d{2}}x%2f", true, "/hello/{a}/b{c:\\d{2}}x%2F"},
		{"/a//b", false, "/a//b"},
	} {
		if got := match.NormalizePattern(c.pattern, c.merge); got != c.want {
			t.Errorf("match.NormalizePattern(%q, %v) = %q, want %q", c.pattern, c.merge, got, c.want)
		}
	}
}
