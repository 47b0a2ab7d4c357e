package proxy

import (
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"

	"sluice/config"
)

func TestSourceValues(t *testing.T) {
	src, err := newSources([]string{"10.0.0.0/8", "192.168.1.1"})
	if err != nil {
		t.Fatal(err)
	}
	type tc struct {
		name    string
		source  config.Source
		remote  string
		url     string
		headers map[string]string
		want    []string // nil: none
	}
	h := func(kv ...string) map[string]string {
		m := map[string]string{}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return m
	}
	ip := config.Source{Kind: config.SourceIP}
	vs := func(v ...string) []string { return v }
	cases := []tc{
		{"header", config.Source{Kind: config.SourceHeader, Name: "X-Origin"}, "1.2.3.4:5", "/", h("X-Origin", "app-a"), vs("app-a")},
		{"header missing", config.Source{Kind: config.SourceHeader, Name: "X-Origin"}, "1.2.3.4:5", "/", nil, nil},
		{"query", config.Source{Kind: config.SourceQuery, Name: "id"}, "1.2.3.4:5", "/?a=1&id=42&id=43", nil, vs("42", "43")},
		{"query escaped", config.Source{Kind: config.SourceQuery, Name: "q"}, "1.2.3.4:5", "/?q=a%20b+c", nil, vs("a b c")},
		{"query empty", config.Source{Kind: config.SourceQuery, Name: "id"}, "1.2.3.4:5", "/?id=", nil, nil},
		{"query prefix name", config.Source{Kind: config.SourceQuery, Name: "id"}, "1.2.3.4:5", "/?idx=1", nil, nil},
		{"cookie", config.Source{Kind: config.SourceCookie, Name: "sid"}, "1.2.3.4:5", "/", h("Cookie", "a=1; sid=xyz; b=2"), vs("xyz")},
		{"cookie missing", config.Source{Kind: config.SourceCookie, Name: "sid"}, "1.2.3.4:5", "/", h("Cookie", "sidx=1"), nil},
		{"host", config.Source{Kind: config.SourceHost}, "1.2.3.4:5", "http://shop.example:8080/", nil, vs("shop.example")},
		{"path", config.Source{Kind: config.SourcePath, Name: "orderId"}, "1.2.3.4:5", "/order/102", nil, vs("102")},
		{"ip untrusted peer ignores XFF", ip, "1.2.3.4:5", "/", h("X-Forwarded-For", "9.9.9.9"), vs("1.2.3.4")},
		{"ip trusted peer uses XFF", ip, "10.1.2.3:5", "/", h("X-Forwarded-For", "9.9.9.9"), vs("9.9.9.9")},
		{"ip right-most untrusted", ip, "10.1.2.3:5", "/", h("X-Forwarded-For", "6.6.6.6, 9.9.9.9, 10.0.0.7, 192.168.1.1"), vs("9.9.9.9")},
		{"ip all trusted", ip, "10.1.2.3:5", "/", h("X-Forwarded-For", "10.0.0.9"), vs("10.0.0.9")},
		{"ip garbage XFF", ip, "10.1.2.3:5", "/", h("X-Forwarded-For", "not-an-ip"), vs("10.1.2.3")},
		{"ipv6 peer", ip, "[::1]:5", "/", nil, vs("::1")},
		{"ip XFF hop with port", ip, "10.1.2.3:5", "/", h("X-Forwarded-For", "9.9.9.9:51234"), vs("9.9.9.9")},
		{"ip XFF ipv6 hop with port", ip, "10.1.2.3:5", "/", h("X-Forwarded-For", "[2001:db8::1]:443"), vs("2001:db8::1")},
		{"ip XFF bracketed ipv6 hop", ip, "10.1.2.3:5", "/", h("X-Forwarded-For", "[2001:db8::1]"), vs("2001:db8::1")},
		{"ip XFF ipv4-mapped hop", ip, "10.1.2.3:5", "/", h("X-Forwarded-For", "::ffff:9.9.9.9"), vs("9.9.9.9")},
		{"ip XFF trusted hop with port", ip, "10.1.2.3:5", "/", h("X-Forwarded-For", "9.9.9.9, 10.0.0.7:80"), vs("9.9.9.9")},
		{"host case and trailing dot", config.Source{Kind: config.SourceHost}, "1.2.3.4:5", "http://SHOP.Example.:8080/", nil, vs("shop.example")},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := httptest.NewRequest("GET", c.url, nil)
			r.RemoteAddr = c.remote
			for k, v := range c.headers {
				r.Header.Set(k, v)
			}
			rc := chi.NewRouteContext()
			rc.URLParams.Add("orderId", "102")
			if got, ok := readValues(src, r, rc, c.source); !ok || !slices.Equal(got, c.want) {
				t.Errorf("values = %q, %v; want %q", got, ok, c.want)
			}
		})
	}
}

func TestSourceValueAllocatesNothing(t *testing.T) {
	src, _ := newSources([]string{"10.0.0.0/8"})
	r := httptest.NewRequest("GET", "/?a=1&id=42", nil)
	r.RemoteAddr = "10.1.2.3:5"
	r.Header.Set("X-Forwarded-For", "9.9.9.9")
	r.Header.Set("X-Origin", "app")
	r.Header.Set("Cookie", "a=1; sid = \"x\"") // trimmed and unquoted in place
	v, _ := readTarget(r, targetRules{mergeSlashes: true, keepParams: true})
	for _, s := range []config.Source{
		{Kind: config.SourceHeader, Name: "X-Origin"}, {Kind: config.SourceQuery, Name: "id"},
		{Kind: config.SourceCookie, Name: "sid"}, {Kind: config.SourceIP}, {Kind: config.SourceHost},
	} {
		var vs valueSet
		if n := testing.AllocsPerRun(100, func() { src.values(r, &v, nil, s, &vs) }); n != 0 {
			t.Errorf("%s: %v allocs per read, want 0", s.Kind, n)
		}
	}
}

// TestCanonicalAddr: one client is one key however its address is written
// (SPEC §3 Sources): IPv4-mapped IPv6 is its IPv4 address, IPv6 is RFC 5952,
// zones are dropped.
func TestCanonicalAddr(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"1.2.3.4", "1.2.3.4"},
		{"::ffff:1.2.3.4", "1.2.3.4"},
		{"::FFFF:1.2.3.4", "1.2.3.4"},
		{"::ffff:102:304", "1.2.3.4"},
		{"0:0:0:0:0:ffff:1.2.3.4", "1.2.3.4"},
		{"2001:DB8::1", "2001:db8::1"},
		{"2001:0db8:0000:0000:0000:0000:0000:0001", "2001:db8::1"},
		{"2001:db8:0:0:1:0:0:1", "2001:db8::1:0:0:1"},
		{"2001:db8::0:1", "2001:db8::1"},
		{"::1", "::1"},
		{"0:0:0:0:0:0:0:1", "::1"},
		{"fe80::1%eth0", "fe80::1"},
		{"::", "::"},
	} {
		_, got, ok := canonicalAddr(c.in)
		if !ok || got != c.want {
			t.Errorf("canonicalAddr(%q) = %q, %v; want %q", c.in, got, ok, c.want)
		}
	}
	for _, bad := range []string{"", "not-an-ip", "1.2.3.4:80", "[::1]", "01.2.3.4", "1.2.3"} {
		if _, got, ok := canonicalAddr(bad); ok {
			t.Errorf("canonicalAddr(%q) = %q, true; want not an address", bad, got)
		}
	}
}

// TestClientIPCanonical: the ip source gives one key per client whether
// the address came from the TCP peer or from X-Forwarded-For, with or
// without port, brackets, zone or IPv4 mapping; trustedProxies are
// compared on the same canonical form, a mapped CIDR included.
func TestClientIPCanonical(t *testing.T) {
	src, err := newSources([]string{"10.0.0.0/8", "::ffff:192.168.0.0/112", "2001:db8:ffff::/48"})
	if err != nil {
		t.Fatal(err)
	}
	ip := config.Source{Kind: config.SourceIP}
	for _, c := range []struct {
		name, remote, xff, want string
	}{
		{"v4 peer", "1.2.3.4:5", "", "1.2.3.4"},
		{"mapped peer", "[::ffff:1.2.3.4]:5", "", "1.2.3.4"},
		{"v6 peer not RFC 5952", "[2001:DB8:0:0::1]:5", "", "2001:db8::1"},
		{"v6 peer with zone", "[fe80::1%eth0]:5", "", "fe80::1"},
		{"mapped peer is trusted by its v4 CIDR", "[::ffff:10.1.2.3]:5", "9.9.9.9", "9.9.9.9"},
		{"v4 peer is trusted by a mapped CIDR", "192.168.1.1:5", "9.9.9.9", "9.9.9.9"},
		{"v6 peer trusted", "[2001:db8:ffff::7]:5", "2001:db8::1", "2001:db8::1"},
		{"untrusted peer's XFF ignored, peer canonical", "[::ffff:1.2.3.4]:5", "9.9.9.9", "1.2.3.4"},
		{"XFF mapped hop", "10.1.2.3:5", "::ffff:9.9.9.9", "9.9.9.9"},
		{"XFF mapped hop with port", "10.1.2.3:5", "[::ffff:9.9.9.9]:443", "9.9.9.9"},
		{"XFF v6 upper case with port", "10.1.2.3:5", "[2001:DB8::0:1]:443", "2001:db8::1"},
		{"XFF v6 with zone", "10.1.2.3:5", "fe80::a%en0", "fe80::a"},
		{"XFF mapped trusted hop skipped", "10.1.2.3:5", "9.9.9.9, ::ffff:10.0.0.7", "9.9.9.9"},
		{"XFF all trusted: last hop canonical", "10.1.2.3:5", "::ffff:10.0.0.9", "10.0.0.9"},
		{"XFF garbage: last trusted hop canonical", "[::ffff:10.1.2.3]:5", "junk", "10.1.2.3"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := httptest.NewRequest("GET", "/", nil)
			r.RemoteAddr = c.remote
			if c.xff != "" {
				r.Header.Set("X-Forwarded-For", c.xff)
			}
			if got, ok := readValues(src, r, nil, ip); !ok || len(got) != 1 || got[0] != c.want {
				t.Errorf("ip = %q, %v; want %q", got, ok, c.want)
			}
		})
	}
}

// TestCookieSourceReadsNameAsServersDo: a cookie: source (param rules and
// origin.from) sees the cookie the upstream reads (SPEC §11 One view).
// net/http's Request.Cookie, Python's http.cookies and Node's cookie trim
// the spaces around a cookie's name, so "sid =abc" is sid=abc to them; an
// untrimmed compare gave no value and let one space past a cookie:sid
// limit. Values are trimmed and unquoted too, so no spelling of a value is
// a fresh key.
func TestCookieSourceReadsNameAsServersDo(t *testing.T) {
	src, _ := newSources(nil)
	sid := config.Source{Kind: config.SourceCookie, Name: "sid"}
	for _, c := range []struct {
		line string
		want []string
		// goReads: net/http's Request.Cookie("sid") gives the same value.
		goReads bool
	}{
		{"sid=abc", []string{"abc"}, true},
		{"sid =abc", []string{"abc"}, true},
		{"sid\t=abc", []string{"abc"}, true},
		{" sid \t =abc", []string{"abc"}, true},
		{"other=1; sid =abc", []string{"abc"}, true},
		{"other=1;sid\t=abc ;x=2", []string{"abc"}, true},
		{`sid ="abc"`, []string{"abc"}, true},
		{"sid= abc", []string{"abc"}, false}, // Python and Node read abc; net/http " abc"
		{"sid =", nil, false},
		{"s id=abc", nil, false},
		{"sidx =abc", nil, false},
	} {
		r := httptest.NewRequest("GET", "/", nil)
		r.Header.Set("Cookie", c.line)
		if got, ok := readValues(src, r, nil, sid); !ok || !slices.Equal(got, c.want) {
			t.Errorf("Cookie %q: values %q, want %q", c.line, got, c.want)
		}
		if c.goReads {
			if ck, err := r.Cookie("sid"); err != nil || ck.Value != c.want[0] {
				t.Errorf("Cookie %q: net/http reads %v, %v; the case assumes sid=%s", c.line, ck, err, c.want[0])
			}
		}
	}
}

// readValues reads src's values from r into a fresh set: the values, and
// false past maxValues.
func readValues(s *sources, r *http.Request, params *chi.Context, src config.Source) ([]string, bool) {
	var vs valueSet
	v, _ := readTarget(r, targetRules{mergeSlashes: true, keepParams: true})
	ok := s.values(r, &v, params, src, &vs)
	return vs.list(), ok
}

// TestSourceSeveralValues: a query parameter, header or cookie that occurs
// more than once gives each distinct non-empty value (SPEC §3 Sources:
// Several values), a header line being a comma-separated list unless the
// field is a singleton; past 16 distinct values the source cannot be read.
func TestSourceSeveralValues(t *testing.T) {
	src, _ := newSources(nil)
	query := config.Source{Kind: config.SourceQuery, Name: "id"}
	key := config.Source{Kind: config.SourceHeader, Name: "X-Key"}
	cookie := config.Source{Kind: config.SourceCookie, Name: "id"}
	n := func(prefix, sep string, count int) string {
		var parts []string
		for i := range count {
			parts = append(parts, prefix+strconv.Itoa(i))
		}
		return strings.Join(parts, sep)
	}
	for _, c := range []struct {
		name    string
		source  config.Source
		url     string
		header  map[string][]string
		want    []string
		tooMany bool
	}{
		{"query empty then value", query, "/?id=&id=102", nil, []string{"102"}, false},
		{"query two values", query, "/?id=101&id=102", nil, []string{"101", "102"}, false},
		{"query repeats are one", query, "/?id=102&x=1&id=102&id=101&id=102", nil, []string{"102", "101"}, false},
		{"query escaped repeat is one", query, "/?id=10%32&i%64=102", nil, []string{"102"}, false},
		{"query 16 values", query, "/?" + n("id=", "&", 16), nil, strings.Split(n("", " ", 16), " "), false},
		{"query 17 values", query, "/?" + n("id=", "&", 17), nil, nil, true},
		{"query 17 occurrences of 16 values", query, "/?" + n("id=", "&", 16) + "&id=0", nil, strings.Split(n("", " ", 16), " "), false},
		{"header two lines", key, "/", map[string][]string{"X-Key": {"a", "b"}}, []string{"a", "b"}, false},
		{"header list line", key, "/", map[string][]string{"X-Key": {"a, b"}}, []string{"a", "b"}, false},
		{"header list and lines are one set", key, "/", map[string][]string{"X-Key": {"a,b", " b ,a", "c"}}, []string{"a", "b", "c"}, false},
		{"header empty elements", key, "/", map[string][]string{"X-Key": {",, a ,,", ""}}, []string{"a"}, false},
		{"header quoted comma", key, "/", map[string][]string{"X-Key": {`"a,\"b,", c`}}, []string{`"a,\"b,"`, "c"}, false},
		{"header 17 values in a line", key, "/", map[string][]string{"X-Key": {n("k", ",", 17)}}, nil, true},
		{"header 17 lines", key, "/", map[string][]string{"X-Key": strings.Split(n("k", ",", 17), ",")}, nil, true},
		{"user agent is one value", config.Source{Kind: config.SourceHeader, Name: "User-Agent"}, "/",
			map[string][]string{"User-Agent": {"Mozilla/5.0 (KHTML, like Gecko)"}}, []string{"Mozilla/5.0 (KHTML, like Gecko)"}, false},
		{"authorization is one value", config.Source{Kind: config.SourceHeader, Name: "Authorization"}, "/",
			map[string][]string{"Authorization": {`Digest username="a", realm="r"`}}, []string{`Digest username="a", realm="r"`}, false},
		{"singleton header's lines are its values", config.Source{Kind: config.SourceHeader, Name: "Authorization"}, "/",
			map[string][]string{"Authorization": {"Bearer a", "Bearer b"}}, []string{"Bearer a", "Bearer b"}, false},
		{"cookies of one name", cookie, "/", map[string][]string{"Cookie": {`id=""; a=1; id=1; id=2`, "id=3; id=1"}}, []string{"1", "2", "3"}, false},
		{"17 cookies", cookie, "/", map[string][]string{"Cookie": {n("id=", "; ", 17)}}, nil, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := httptest.NewRequest("GET", c.url, nil)
			for k, lines := range c.header {
				r.Header[k] = lines
			}
			got, ok := readValues(src, r, nil, c.source)
			if ok == c.tooMany || !c.tooMany && !slices.Equal(got, c.want) {
				t.Errorf("values = %q, %v; want %q, %v", got, ok, c.want, !c.tooMany)
			}
		})
	}
}

// TestCookieReadingsAllocateNothing: reading a cookie every way the
// servers behind read it (Rack's ',' split, SimpleCookie's white space,
// Python's readings of UTF-8, PHP's name mangling, a quoted value) copies
// nothing unless a value must be decoded, unquoted or made UTF-8.
func TestCookieReadingsAllocateNothing(t *testing.T) {
	src, _ := newSources(nil)
	for _, line := range []string{
		"a=1; sid=s1", `sid="quoted value"`, "x=1 sid=a b", "x=1, sid=v", "s.id=1; s_id=2", "sid=caf\xc3\xa9",
		"sid=\xc2\xa0v\xc2\xa0", `sid="a;b"`, "lang=en,fr; theme=dark; sid=abc",
	} {
		r := httptest.NewRequest("GET", "/", nil)
		r.Header.Set("Cookie", line)
		for _, name := range []string{"sid", "s_id"} {
			for _, one := range []bool{false, true} {
				vs := valueSet{one: one}
				s := config.Source{Kind: config.SourceCookie, Name: name}
				if n := testing.AllocsPerRun(100, func() { src.values(r, &view{}, nil, s, &vs) }); n != 0 {
					t.Errorf("Cookie %q, %s (one value: %v): %v allocs per read, want 0", line, name, one, n)
				}
			}
		}
	}
}

// TestHostileCookieLinesReadInLinearTime: SimpleCookie's reading looked
// back from each '=' to the white space before it, so a Cookie line of a
// million '=' and one space cost 5*10^11 steps (hours). Each name is now
// read back to the '=' before it at most. The bound is loose on purpose:
// linear is milliseconds, quadratic would be hours.
func TestHostileCookieLinesReadInLinearTime(t *testing.T) {
	src, _ := newSources(nil)
	for _, line := range []string{
		strings.Repeat("=", 1<<20) + " sid=v",
		"x " + strings.Repeat("sid=", 1<<18) + "v",
		"x " + strings.Repeat("s=", 1<<19),
		`sid="` + strings.Repeat(`\`, 1<<20),
		strings.Repeat(`sid="a; `, 1<<17),
		strings.Repeat("sid=a, ", 1<<17),
	} {
		r := httptest.NewRequest("GET", "/", nil)
		r.Header.Set("Cookie", line)
		start := time.Now()
		for _, one := range []bool{false, true} {
			vs := valueSet{one: one}
			src.values(r, &view{}, nil, config.Source{Kind: config.SourceCookie, Name: "sid"}, &vs)
		}
		if d := time.Since(start); d > 20*time.Second {
			t.Errorf("a Cookie line of %d bytes (%q...) took %v to read", len(line), line[:16], d)
		}
	}
}
