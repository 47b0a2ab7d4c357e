package proxy

import (
	"net/http"
	"net/netip"
	"net/textproto"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/go-chi/chi/v5"

	"sluice/config"
	"sluice/internal/match"
)

// FuzzSources: whatever the headers, query, cookies, X-Forwarded-For,
// RemoteAddr and Host of a request, reading any source never panics, a
// found value is never empty and always comes from the request, and the
// `ip` of a peer that is not a trusted proxy is the peer itself whatever
// X-Forwarded-For says (a client cannot pick its own limit key).
//
// CI runs the seeds; run it for real with
//
//	go test -run '^$' -fuzz FuzzSources -fuzztime 5m ./proxy/
func FuzzSources(f *testing.F) {
	seeds := []struct {
		name, hval, query, cookie, xff, remote, host, param, trusted string
	}{
		{"X-Origin", "app-a", "id=42&id=43", "sid=abc; other=1", "", "1.2.3.4:5", "example.com:8080", "7", ""},
		{"id", "", "a=1&id=a%20b+c", `id="quoted"`, "203.0.113.9, 10.0.0.1", "10.1.2.3:4", "[::1]:80", "x", "10.0.0.0/8"},
		{"q", "v", "q=%zz&q=%", "q=", "garbage, 10.0.0.1", "10.0.0.2:1", "", "", "10.0.0.0/8"},
		{"Cookie", "a=b", "%71=1", ";;=;q", "::ffff:1.2.3.4", "[::ffff:10.0.0.1]:9", "h", "%2F", "::ffff:10.0.0.0/104"},
		{"a", "b", "&&&=&=", "a=b;a=c", ",,, ,\n1.1.1.1", "[fe80::1%eth0]:80", "[", "a", "0.0.0.0/0"},
		{"x", "y", "x", "x", "1.1.1.1", "no-port", "::1", "p", "::/0"},
		{"x", "y", "", "", "6.6.6.6", "", "", "", "not a cidr"},
		{"x", "y", "", "", "", "[::1", "]", "", "1.2.3.4"},
		// A name whose twin or prefix makes the peer's trust matter.
		{"x_forwarded_for", "9.9.9.9", "", "", "", "10.0.0.2:1", "h", "", "10.0.0.0/8"},
		{"X-Forwarded-Prefix", "/a", "", "", "", "[::ffff:10.0.0.1]:9", "h", "", "10.0.0.0/8"},
		{"x_y", "v", "", "", "", "no-port", "h", "p", "1.2.3.4"},
	}
	for _, s := range seeds {
		f.Add(s.name, s.hval, s.query, s.cookie, s.xff, s.remote, s.host, s.param, s.trusted)
	}
	f.Fuzz(func(t *testing.T, name, hval, query, cookie, xff, remote, host, param, trusted string) {
		var tr []string
		if trusted != "" {
			tr = strings.Split(trusted, ",")
		}
		s, err := newSources(tr)
		if err != nil {
			return // config validation refuses what newSources refuses
		}
		r := &http.Request{
			Method:     "GET",
			URL:        &url.URL{Path: "/", RawQuery: query},
			Header:     http.Header{},
			RemoteAddr: remote,
			Host:       host,
		}
		hname := textproto.CanonicalMIMEHeaderKey(name)
		if hname != "" {
			r.Header[hname] = []string{hval}
		}
		if cookie != "" {
			r.Header["Cookie"] = []string{cookie}
		}
		if xff != "" {
			r.Header["X-Forwarded-For"] = strings.Split(xff, "\n")
		}
		rc := chi.NewRouteContext()
		rc.URLParams.Add(name, param)

		for _, src := range []config.Source{
			{Kind: config.SourceHeader, Name: hname},
			{Kind: config.SourceQuery, Name: name},
			{Kind: config.SourceCookie, Name: name},
			{Kind: config.SourcePath, Name: name},
			{Kind: config.SourceHost},
			{Kind: config.SourceIP},
		} {
			var vs valueSet
			if !s.values(r, &view{path: "/", query: query}, rc, src, &vs) {
				if vs.n != maxValues {
					t.Fatalf("%v: too many values with %d read", src, vs.n)
				}
				continue
			}
			for i, v := range vs.list() {
				if v == "" {
					t.Fatalf("%v: an empty value", src)
				}
				if slices.Contains(vs.v[:i], v) {
					t.Fatalf("%v: %q twice", src, v)
				}
				if !fromRequest(s, r, rc, src, v) {
					t.Fatalf("%v = %q does not come from the request %+v", src, v, r)
				}
			}
			if src.Kind == config.SourceIP || src.Kind == config.SourceHost || src.Kind == config.SourcePath {
				if vs.n > 1 {
					t.Fatalf("%v: %d values of a single-valued source", src, vs.n)
				}
			}
		}
		// Reading a header, or a host without upper-case letters, is
		// allocation-free whatever the input. (Lower-casing a host,
		// unescaping a query or cookie value may allocate, and so does an
		// ip whose peer or X-Forwarded-For hop is not an address:
		// netip.ParseAddr builds an error.)
		for _, src := range []config.Source{{Kind: config.SourceHeader, Name: hname}, {Kind: config.SourceHost}} {
			if src.Kind == config.SourceHost && strings.ContainsAny(host, "ABCDEFGHIJKLMNOPQRSTUVWXYZ") {
				continue
			}
			if src.Name == "X-Forwarded-For" {
				continue // read as the ip source reads the peer: it may allocate, as ip does
			}
			if _, ok := match.Addr(match.HostOnly(remote)); !ok && len(tr) > 0 &&
				(strings.Contains(src.Name, "_") || strings.HasPrefix(src.Name, "X-Forwarded-")) {
				continue // its peer's trust is looked up, and a peer net/http never gives (no address) builds an error
			}
			var vs valueSet
			if n := testing.AllocsPerRun(1, func() { s.values(r, &view{path: "/", query: query}, rc, src, &vs) }); n > 0 {
				t.Fatalf("%v allocates %v times", src, n)
			}
		}
	})
}

// fromRequest is the oracle: could v have been read from r for src?
func fromRequest(s *sources, r *http.Request, params *chi.Context, src config.Source, v string) bool {
	switch src.Kind {
	case config.SourceHeader:
		// The forwarding headers are read as they are forwarded
		// (forwardingHeader), a header's '_' twins as the header.
		switch src.Name {
		case "X-Forwarded-Host":
			return strings.Contains(r.Host, v)
		case "X-Forwarded-Proto":
			return v == "http" || v == "https"
		case "X-Forwarded-For":
			return v == canonical(match.HostOnly(r.RemoteAddr)) ||
				s.peerTrusted(r) && strings.Contains(strings.Join(r.Header[src.Name], ","), v)
		}
		for k, lines := range r.Header {
			if (k == src.Name || sameCGIName(k, src.Name)) && strings.Contains(strings.Join(lines, ","), v) {
				return true
			}
		}
		return false
	case config.SourceQuery:
		for _, kv := range strings.Split(r.URL.RawQuery, "&") {
			_, val, _ := strings.Cut(kv, "=")
			if u, err := url.QueryUnescape(val); val == v || err == nil && u == v {
				return true
			}
		}
		return false
	case config.SourceCookie:
		// keyed as written, or percent-decoded as PHP and Node read it,
		// or unquoted as a Python server reads it (octal and backslash
		// escapes, ill-formed UTF-8 as U+FFFD), and then decoded
		joined := strings.Join(r.Header["Cookie"], ";")
		forms := []string{joined}
		for _, mode := range []pyMode{pyDjango, pyWerkzeug, pyLatin1} {
			forms = append(forms, pythonCookie(`"`+joined+`"`, mode), pythonCookie(`"`+pyUTF8(joined)+`"`, mode))
		}
		for _, f := range forms {
			decoded, _ := cookieKey(f)
			if strings.Contains(f, v) || strings.Contains(strings.ReplaceAll(f, "+", " "), v) || strings.Contains(decoded, v) {
				return true
			}
		}
		return false
	case config.SourcePath:
		return unescapedPath(params.URLParam(src.Name)) == v // the router matched the escaped view
	case config.SourceHost:
		// Only ASCII letters are lowered (strings.ToLower would turn a
		// byte that is not UTF-8 into U+FFFD).
		return strings.Contains(strings.ToLower(r.Host), v) || strings.Contains(r.Host, v)
	case config.SourceIP:
		peer := canonical(match.HostOnly(r.RemoteAddr))
		if !s.peerTrusted(r) {
			return v == peer // the spoofing property
		}
		if v == peer {
			return true
		}
		if _, err := netip.ParseAddr(v); err != nil {
			return false
		}
		for _, line := range r.Header["X-Forwarded-For"] {
			for _, part := range strings.Split(line, ",") {
				if canonical(match.HostOnly(strings.TrimSpace(part))) == v {
					return true
				}
			}
		}
		return false
	}
	return false
}

// canonical is the oracle's canonical address: netip's own form, unmapped
// and without a zone; anything else as it is.
func canonical(s string) string {
	if a, err := netip.ParseAddr(s); err == nil {
		return a.Unmap().WithZone("").String()
	}
	return s
}
