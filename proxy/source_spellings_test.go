package proxy_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"sluice/config"
	"sluice/proxy"
)

// sendHost is sendLines with the request's Host set (net/http takes Host
// out of the header lines); "" keeps httptest's example.com.
func sendHost(g http.Handler, host, target string, lines ...string) (status int, blocked string) {
	req := httptest.NewRequest("GET", target, nil)
	if host != "" {
		req.Host = host
	}
	for i := 0; i+1 < len(lines); i += 2 {
		req.Header.Add(lines[i], lines[i+1])
	}
	w := httptest.NewRecorder()
	g.ServeHTTP(w, req)
	return w.Code, w.Header().Get("X-Sluice-Blocked")
}

type hostStep struct {
	host   string
	lines  []string
	status int
	reason string
}

func runHostSteps(t *testing.T, rules string, steps []hostStep) {
	t.Helper()
	g, _, up := clockedGateway(t, rules)
	forwarded := int32(0)
	for i, st := range steps {
		status, blocked := sendHost(g, st.host, "/item/x", st.lines...)
		if status != st.status || blocked != st.reason {
			t.Fatalf("step %d (Host %q, %q): %d %q, want %d %q", i, st.host, st.lines, status, blocked, st.status, st.reason)
		}
		if status == 200 {
			forwarded++
		}
		if n := up.calls.Load(); n != forwarded {
			t.Fatalf("step %d: upstream has %d requests, want %d", i, n, forwarded)
		}
	}
}

// TestUnderscoreTwinIsTheHeader: "X_Key" is another header to
// net/http, and both forwarders pass it on, but a CGI, WSGI, PHP or Rack
// upstream reads X-Key and X_Key as one HTTP_X_KEY. It was no value of
// header:X-Key, so one underscore carried any key past the limit (and
// X-Origin: a with X_Origin: b was origin a to sluice, b to such a
// service). Now a twin's lines are occurrences of the header.
func TestUnderscoreTwinIsTheHeader(t *testing.T) {
	runHostSteps(t, `
paramRules:
  - resource: item
    param: header:X-Key
    count: 1
`, []hostStep{
		{lines: []string{"X-Key", "102"}, status: 200},
		{lines: []string{"X_Key", "102"}, status: 429, reason: "param"},
		{lines: []string{"x_key", "102"}, status: 429, reason: "param"},
		{lines: []string{"X_KEY", "101, 102"}, status: 429, reason: "param"},
		{lines: []string{"X-Key", "101", "X_Key", "102"}, status: 429, reason: "param"},
		{lines: []string{"X-Key", "101"}, status: 200},
		// Named by Connection, a twin is hop-by-hop like the header.
		{lines: []string{"Connection", "X_Key", "X_Key", "102"}, status: 200},
		// origin.from must give one value: two spellings, two values.
		{lines: []string{"X-Origin", "a", "X_Origin", "b"}, status: 400},
		{lines: []string{"X_Origin", "a", "X-Key", "103"}, status: 200},
		// Other names with '_' are not twins.
		{lines: []string{"X_Key2", "101", "X-Key", "104"}, status: 200},
	})
}

// TestForwardingHeadersKeyedAsForwarded: both forwarders write
// X-Forwarded-Host (the client's Host) and X-Forwarded-For (the peer,
// unless it is a trusted proxy) anew, dropping the client's own. A limit
// on header:X-Forwarded-Host or header:X-Forwarded-For read the client's
// dropped value: any invented one was a fresh key, while the upstream saw
// the same host or peer every time. Now those sources read what is sent.
func TestForwardingHeadersKeyedAsForwarded(t *testing.T) {
	t.Run("X-Forwarded-Host", func(t *testing.T) {
		runHostSteps(t, `
paramRules:
  - resource: item
    param: header:X-Forwarded-Host
    count: 1
`, []hostStep{
			{host: "victim.example", status: 200},
			{host: "victim.example", lines: []string{"X-Forwarded-Host", "decoy"}, status: 429, reason: "param"},
			{host: "victim.example", lines: []string{"Connection", "X-Forwarded-Host"}, status: 429, reason: "param"},
			{host: "other.example", lines: []string{"X-Forwarded-Host", "victim.example"}, status: 200},
		})
	})
	t.Run("X-Forwarded-For", func(t *testing.T) {
		// httptest's peer is 192.0.2.1, not a trusted proxy.
		runHostSteps(t, `
paramRules:
  - resource: item
    param: header:X-Forwarded-For
    count: 1
`, []hostStep{
			{lines: []string{"X-Forwarded-For", "1.1.1.1"}, status: 200},
			{lines: []string{"X-Forwarded-For", "2.2.2.2"}, status: 429, reason: "param"},
			{status: 429, reason: "param"},
		})
	})
}

// TestHostWithCommaIsRefused: net/http takes a Host holding commas,
// and the upstream would get it as X-Forwarded-Host, a list field that
// proxies and frameworks read element by element: "victim," is victim to
// them, while the host source keyed the whole string, a fresh key per
// spelling. Such a Host (any byte no host name or address holds) is 400
// before any rule counts it.
func TestHostWithCommaIsRefused(t *testing.T) {
	runHostSteps(t, `
paramRules:
  - resource: item
    param: host
    count: 1
`, []hostStep{
		{host: "victim", status: 200},
		{host: "victim,", status: 400},
		{host: "decoy, Victim", status: 400},
		{host: "victim;x", status: 400},
		{host: "Victim:8080", status: 429, reason: "param"},
		{host: "[::1]:8080", status: 200},
		{host: "other", status: 200},
	})
}

// TestCookieSpellingsAreOneKey: the servers behind sluice read a
// cookie in more ways than net/http: Node's cookie, PHP and Rack decode
// its value (vict%69m is victim), PHP and Rack 2 its name (s%69d is sid),
// Rack 2 and Python's http.cookies split at ',' too, Node's cookie 0.x
// drops the first and last byte of a value that opens a quote. Each was a
// fresh key to a cookie:sid limit for a value the upstream read as the
// limited one. Now every such reading is keyed.
func TestCookieSpellingsAreOneKey(t *testing.T) {
	limited := func(cookie string) hostStep {
		return hostStep{lines: []string{"Cookie", cookie}, status: 429, reason: "param"}
	}
	passes := func(cookie string) hostStep {
		return hostStep{lines: []string{"Cookie", cookie}, status: 200}
	}
	runHostSteps(t, `
paramRules:
  - resource: item
    param: cookie:sid
    count: 1
`, []hostStep{
		passes("sid=victim"),
		limited("sid=vict%69m"),
		limited("sid=%76%69%63%74%69%6D"),
		limited("s%69d=victim"),
		limited("x=1, sid=victim"),
		limited(`sid="victimZ`),
		limited(`sid="vict%69m"`),
		// '+', %2B and %20 are one key: Node reads a+b and a%2Bb alike,
		// PHP a+b and a%20b.
		passes("sid=a+b"),
		limited("sid=a%2Bb"),
		limited("sid=a%20b"),
		// A '%' that is no escape: Node reads %zz%41 as written, PHP as %zzA.
		passes("sid=%zz%41"),
		limited("sid=%zzA"),
		limited("sid=%25zz%2541"),
		passes("sid=other"),
	})
}

// TestCookieSpellingsPythonReads: Python's servers read a cookie in ways
// no other did: Django, Flask and Starlette unquote a quoted value's
// backslash and octal escapes ("\166ictim" is victim), Flask and
// SimpleCookie (Bottle) read a quoted value on past ';', SimpleCookie
// splits at white space, Python strips Unicode white space (NBSP) and
// Django and Flask read ill-formed UTF-8 as U+FFFD; PHP reads s.id, s id
// and s_id%00x as s_id. Each was a fresh key to a limit for a value the
// upstream read as the limited one. (That two Cookie lines are forwarded
// as the one line the limits read, TestHeaderSourcesOneView shows.)
func TestCookieSpellingsPythonReads(t *testing.T) {
	cookie := func(status int, lines ...string) hostStep {
		st := hostStep{status: status}
		if status == 429 {
			st.reason = "param"
		}
		for _, l := range lines {
			st.lines = append(st.lines, "Cookie", l)
		}
		return st
	}
	runHostSteps(t, `
paramRules:
  - resource: item
    param: cookie:sid
    count: 1
  - resource: item
    param: cookie:s_id
    count: 1
`, []hostStep{
		cookie(200, "sid=victim"),
		cookie(429, `sid="\166ictim"`),
		cookie(429, `sid="vic\tim"`),
		cookie(429, "x=1 sid=victim"),
		cookie(429, "x=1 sid = victim"),
		cookie(429, "sid=victim junk=1"),
		cookie(429, "sid=\xc2\xa0victim"),
		cookie(429, "sid\xa0=victim"),
		cookie(429, "sid=\x1cvictim\x0b"),
		cookie(200, `sid="a;b"`),
		cookie(429, `sid="a\073b"`),
		cookie(429, `sid="a`, `b"`), // one line "sid=\"a; b\""
		cookie(200, "sid=vic\xfftim"),
		cookie(429, "sid=vic\xfetim"), // U+FFFD to Django and Flask
		cookie(200, "s_id=victim"),
		cookie(429, "s.id=victim"),
		cookie(429, "s id=victim"),
		cookie(429, "s%2Eid=victim"),
		cookie(429, "%20s_id=victim"),
		cookie(429, "s_id%00x=victim"),
		cookie(200, "sid=other; s_id=other"),
	})
}

// TestOneCookieIsOneValueToHashOn: a source that must give one value
// (hashOn, origin.from) reads each cookie once, by its key, not in every
// reading a param rule counts (cookieValues): a cookie with escapes (base64
// padding as %3D), a value holding a ',' (net/http reads sid=a,b as "a,b",
// Rack 2 as "a"), a Latin-1 escape as JavaScript's escape() writes it (%E9
// is no UTF-8) are one value, not a 400. Two cookies of the name with
// distinct keys still are 400.
func TestOneCookieIsOneValueToHashOn(t *testing.T) {
	cfg, err := config.Parse("one.yaml", []byte(`
upstreams:
  up:
    targets: ["http://a.invalid", "http://b.invalid"]
    balance: hash
    hashOn: cookie:sid
routes:
  - path: /item/{id}
    upstream: up
    resource: item
`))
	if err != nil {
		t.Fatal(err)
	}
	up := &stubUpstream{}
	up.status.Store(200)
	g := proxy.New(proxy.Deps{Log: zerolog.Nop(), Clock: &fakeClock{}, Transport: up, Forwarder: "standard"})
	if err := g.Load(cfg); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		cookie string
		status int
	}{
		{"sid=abc%3D%3D", 200},
		{"sid=abc%3D%3D; sid=abc==", 200},
		{"sid=a,b", 200},
		{"sid=en,fr; theme=dark", 200},
		{"sid=Jos%E9", 200},
		{"sid=%zz%41", 200},
		{`sid="abc`, 200},
		// still ambiguous: two occurrences
		{"sid=a; sid=b", 400},
		{"sid=a; s%69d=b", 400},
		// RFC 6265 names are case-sensitive: a browser may hold sid and
		// SID of two apps; one is this source's (a param rule reads both).
		{"sid=a; SID=b", 200},
	} {
		if status, _ := sendHost(g, "", "/item/x", "Cookie", c.cookie); status != c.status {
			t.Errorf("Cookie %q: %d, want %d", c.cookie, status, c.status)
		}
	}
}

// longestName is a DNS name of 253 bytes, the most one holds.
var longestName = strings.Repeat(strings.Repeat("a", 63)+".", 3) + strings.Repeat("b", 61)

// TestRealHostsServed: the Host check (400 for a byte no host name holds)
// refuses no real Host value: IPv6 literals (a zone too), trailing dots,
// ports, punycode, '_'.
func TestRealHostsServed(t *testing.T) {
	g, _, _ := clockedGateway(t, "")
	for _, h := range []string{"[fe80::1%25eth0]:8080", "[fe80::1%eth0]", "[::1]", "example.com.", "Example.COM.:443",
		"xn--bcher-kva.example", "my_host.internal", "10.0.0.1:80", "localhost",
		longestName, longestName + ".:443", "[::ffff:10.0.0.1]"} {
		if status, _ := sendHost(g, h, "/item/x"); status != 200 {
			t.Errorf("Host %q: %d", h, status)
		}
	}
}

// TestHostWithCommaMissesItsHostRoutes: "Host: victim.example," is
// taken by net/http, misses the routes with hosts: [victim.example] (and
// their rules), is served by a route for any host, and reaches the
// upstream as X-Forwarded-Host: victim.example, a list that Express
// (req.hostname) and Rails (request.host) read as victim.example. A Host
// that is no uri-host[:port] is 400 before routing.
func TestHostWithCommaMissesItsHostRoutes(t *testing.T) {

	cfg, err := config.Parse("hosts.yaml", []byte(`
upstreams:
  up: {targets: ["http://upstream.invalid"]}
routes:
  - path: /item/{id}
    hosts: [victim.example]
    upstream: up
    resource: victim
  - path: /item/{id}
    upstream: up
    resource: any
flowRules:
  - resource: victim
    count: 1
`))
	if err != nil {
		t.Fatal(err)
	}
	up := &stubUpstream{}
	up.status.Store(200)
	g := proxy.New(proxy.Deps{Log: zerolog.Nop(), Clock: &fakeClock{}, Transport: up, Forwarder: "standard"})
	if err := g.Load(cfg); err != nil {
		t.Fatal(err)
	}
	for i, st := range []hostStep{
		{host: "victim.example", status: 200},
		{host: "victim.example", status: 429, reason: "flow"},
		{host: "victim.example,", status: 400},
		{host: "x, victim.example", status: 400},
		// A port is one ':' and digits: "victim.example:0:0" missed the
		// host routes (cut at the last ':'), and an upstream reading
		// X-Forwarded-Host cuts at the first.
		{host: "victim.example:0:0", status: 400},
		{host: "victim.example:8x", status: 400},
		{host: "victim.example:8080", status: 429, reason: "flow"},
		{host: "VICTIM.example.:", status: 429, reason: "flow"},
		{host: "::1", status: 400},
		{host: "[::1]x", status: 400},
		{host: "[::1", status: 400},
		{host: "[::1]:8080", status: 200},
		{host: "[fe80::1%25eth0]", status: 200},
		// Brackets hold an IPv6 address only: the routes' hosts kept
		// them and missed victim.example, which the host source and an
		// upstream's net.SplitHostPort read.
		{host: "[victim.example]", status: 400},
		{host: "[VICTIM.example.]:443", status: 400},
		{host: "[1.2.3.4]", status: 400},
		// Longer than any DNS name: no route's hosts can name it.
		{host: strings.Repeat("a", 250) + ".victim.example", status: 400},
		// An empty label: no route's hosts can name it either.
		{host: ".victim.example", status: 400},
		{host: "a..victim.example", status: 400},
		{host: "victim.example..", status: 400},
	} {
		if status, blocked := sendHost(g, st.host, "/item/x", st.lines...); status != st.status || blocked != st.reason {
			t.Errorf("step %d (Host %q): %d %q, want %d %q", i, st.host, status, blocked, st.status, st.reason)
		}
	}
}

// TestH2HeaderValueSpacesAreOneKey: an HTTP/1 server trims the spaces
// around a field value, but over h2 a value keeps them, and a header that
// is no list (Authorization, User-Agent) was keyed as sent: " victim " was
// a fresh key for the value victim that the upstream, over HTTP/1, reads.
func TestH2HeaderValueSpacesAreOneKey(t *testing.T) {
	g, _, _ := clockedGateway(t, `
paramRules:
  - resource: item
    param: header:Authorization
    count: 1
`)
	srv := httptest.NewUnstartedServer(g)
	srv.Config.Protocols = new(http.Protocols)
	srv.Config.Protocols.SetUnencryptedHTTP2(true)
	srv.Start()
	defer srv.Close()
	tr := &http.Transport{Protocols: new(http.Protocols)}
	tr.Protocols.SetUnencryptedHTTP2(true)
	defer tr.CloseIdleConnections()
	c := &http.Client{Transport: tr}
	for i, st := range []struct {
		value  string
		status int
	}{
		{"victim", 200},
		{" victim ", 429},
		{"\tvictim", 429},
		{"other ", 200},
	} {
		req, _ := http.NewRequest("GET", srv.URL+"/item/x", nil)
		req.Header["Authorization"] = []string{st.value}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.ProtoMajor != 2 {
			t.Fatalf("answered over %s, want h2", resp.Proto)
		}
		if resp.StatusCode != st.status {
			t.Errorf("step %d (Authorization %q): %d, want %d", i, st.value, resp.StatusCode, st.status)
		}
	}
}

// TestQueryNamesAsPHPReadsThem: PHP fills $_GET as it fills $_COOKIE: a
// name's '.', ' ' and '[' become '_', its leading spaces go and a NUL
// ends it, so ?user.id=victim is user_id=victim to a PHP upstream. And
// PHP, Rack and Express's qs read user_id[], user_id[0] and user_id[x]
// (also escaped, user_id%5B%5D) as user_id, an array or a map of the
// values, which Rails' find_by(token: params[:user_id]) matches to the
// record user_id=victim names. A query:user_id limit read only user_id
// (and its escapes), and each such spelling was a fresh key for the value
// the upstream read. An unclosed '[' is a '_' to PHP (user_id[ is
// user_id_), no spelling of user_id; a cookie name's brackets read alike.
// ?USER_ID=victim and SID=victim were fresh keys to an ASP.NET upstream.
func TestQueryNamesAsPHPReadsThem(t *testing.T) {
	g, _, _ := clockedGateway(t, `
paramRules:
  - resource: item
    param: query:user_id
    count: 1
  - resource: item
    param: cookie:sid
    count: 1
`)
	for i, st := range []struct {
		query, cookie string
		status        int
	}{
		{"user_id=victim", "", 200},
		{"user.id=victim", "", 429},
		{"user+id=victim", "", 429},
		{"user%20id=victim", "", 429},
		{"%20user_id=victim", "", 429},
		{"+user_id=victim", "", 429},
		{"user_id%00x=victim", "", 429},
		{"user%5Bid=victim", "", 429},
		{"user%5fid=victim", "", 429},
		{"userXid=victim", "", 200},
		{"user_id=other", "", 200},
		{"user_id[]=victim", "", 429},
		{"user_id[0]=victim", "", 429},
		{"user_id[x][y]=victim", "", 429},
		{"user_id%5B%5D=victim", "", 429},
		{"user_id%5b0%5d=victim", "", 429},
		{"user_id[]x=victim", "", 429},
		{"user_id[=victim", "", 200},
		{"user_id%5B=victim", "", 200},
		{"user_idX[]=victim", "", 200},
		{"user[id]=victim", "", 200},
		{"user_id[%00]=victim", "", 200},
		{"", "sid=victim", 200},
		{"", "sid[]=victim", 429},
		// ASP.NET Core reads query and cookie names ignoring case
		// (Request.Query["user_id"] is ?User_Id= too, Request.Cookies["sid"]
		// is SID=), in PHP's spellings too; another name is not user_id.
		{"User_Id=victim", "", 429},
		{"USER_ID=victim", "", 429},
		{"User.Id=victim", "", 429},
		{"USER%5FID=victim", "", 429},
		{"USER_ID[]=victim", "", 429},
		{"USER_IDS=victim", "", 200},
		{"", "SID=victim", 429},
		{"", "Sid=victim", 429},
		{"", "sids=victim", 200},
	} {
		var lines []string
		if st.cookie != "" {
			lines = []string{"Cookie", st.cookie}
		}
		if status, _ := sendHost(g, "", "/item/x?"+st.query, lines...); status != st.status {
			t.Errorf("step %d (?%s, cookie %q): %d, want %d", i, st.query, st.cookie, status, st.status)
		}
	}
}
