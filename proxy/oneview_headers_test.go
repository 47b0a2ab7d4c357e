package proxy

import (
	"bufio"
	"encoding/base64"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/go-chi/chi/v5"
	"github.com/rs/zerolog"
	"golang.org/x/net/http/httpguts"

	"sluice/config"
	"sluice/internal/match"
)

// The one-view differential test of the header, cookie and host sources
// (SPEC §11, §3 Sources): hostile header blocks go through the real
// Gateway, with each forwarder, to a raw upstream that records the bytes it
// got. For every request the gateway passes, each value an upstream reads
// of a source must be one the gateway counted: a Go service through
// net/http's Header, Cookies and the X-Forwarded-Host it is given; a plain
// reading of the bytes; a CGI/WSGI/PHP service, which merges '_' and '-'
// in header names; Node's cookie, PHP's $_COOKIE and Rack 2, which decode
// cookies and (Rack) split them at ','. origin.from and hashOn must give
// the gateway one value or the request is 400. And both forwarders send
// the same header values (but for the fasthttp special headers of
// TestForwardersSendFasthttpSpecialHeadersAlike).
//
// A trusted proxy's own address, which it appends to X-Forwarded-For, is
// left out on purpose: the harness's peer is not trusted.

const hdrDiffRules = `
upstreams:
  up: {targets: [%[1]q], balance: hash, hashOn: "cookie:sid"}
  vh: {targets: ["%[1]s/vh"]}
origin: {from: "header:X-App"}
routes:
  - path: /*
    hosts: [victim.example, "*.victim.example"]
    upstream: vh
    resource: vh
    forwarder: %[2]s
  - path: /*
    upstream: up
    resource: all
    forwarder: %[2]s
`

// hdrDiffSources are the sources compared on both sides.
var hdrDiffSources = []config.Source{
	{Kind: config.SourceHeader, Name: "X-Tenant"},
	{Kind: config.SourceHeader, Name: "X-App"},
	{Kind: config.SourceHeader, Name: "X-Forwarded-Host"},
	{Kind: config.SourceHeader, Name: "X-Forwarded-For"},
	{Kind: config.SourceHeader, Name: "Cookie"}, // the field cookie:sid reads, read whole
	{Kind: config.SourceCookie, Name: "sid"},
	{Kind: config.SourceCookie, Name: "s_id"},
	{Kind: config.SourceQuery, Name: "s_id"},
	{Kind: config.SourceHost},
	{Kind: config.SourceHeader, Name: "Authorization"},
}

// rawHeaderLines splits a request head into (name, value) pairs as the
// bytes say: the name up to the colon, the value trimmed of spaces and
// tabs. An obs-fold continuation is joined to its line with a space.
func rawHeaderLines(head string) (names, vals []string) {
	lines := strings.Split(strings.TrimRight(head, "\r\n"), "\r\n")
	for _, l := range lines[1:] {
		if l != "" && (l[0] == ' ' || l[0] == '\t') && len(vals) > 0 {
			vals[len(vals)-1] += " " + trimOWS(l)
			continue
		}
		k, v, _ := strings.Cut(l, ":")
		names, vals = append(names, k), append(vals, trimOWS(v))
	}
	return names, vals
}

func rawHeaderValue(head, name string) string {
	ns, vs := rawHeaderLines(head)
	for i, n := range ns {
		if strings.EqualFold(n, name) {
			return vs[i]
		}
	}
	return ""
}

// hdrDecision is what the gateway keyed on: each source's distinct values
// ("<too many>" past maxValues).
type hdrDecision struct {
	values [][]string
	over   []bool
	one    [][]string // as a source that must give one value reads it (valueSet.one)
}

// hdrDecide reads r as the gateway does, with snapshot s; false: the view
// refuses it (400 before any source is read).
func hdrDecide(s *Snapshot, r *http.Request) (hdrDecision, bool) {
	v, bad := readTarget(r, s.target)
	if bad != badNone {
		return hdrDecision{}, false
	}
	r = r.Clone(r.Context()) // the gateway gets the request untouched
	joinCookieLines(r)       // as ServeHTTP does before any source is read
	var d hdrDecision
	for _, src := range hdrDiffSources {
		var vs valueSet
		ok := s.sources.values(r, &v, chi.NewRouteContext(), src, &vs)
		d.values = append(d.values, slices.Clone(vs.list()))
		d.over = append(d.over, !ok)
		one := valueSet{one: true}
		s.sources.values(r, &v, chi.NewRouteContext(), src, &one)
		d.one = append(d.one, slices.Clone(one.list()))
	}
	return d, true
}

// hdrHarness is a gateway per forwarder, served as the one-view
// differential serves its gateways (diffGateway: HTTP/1.1, h2c, h2 over
// TLS, each request's decision and count recorded), and the upstream.
type hdrHarness struct {
	up   *recUpstream
	gws  []*diffGateway[hdrDecision]
	seq  int
	stop func()
}

func newHdrHarness(tb testing.TB) *hdrHarness {
	h := &hdrHarness{up: newRecUpstream(tb)}
	cleanups := []func(){h.up.close}
	for _, fwd := range []string{"standard", "fast"} {
		cfg, err := config.Parse("hdr.yaml", []byte(fmt.Sprintf(hdrDiffRules, h.up.url(), fwd)))
		if err != nil {
			tb.Fatal(err)
		}
		dg := newDiffGateway[hdrDecision](fwd)
		g := New(Deps{Log: zerolog.Nop(), Observer: dg.observer})
		if err := g.Load(cfg); err != nil {
			tb.Fatal(err)
		}
		stop := dg.serve(g, func(r *http.Request) (hdrDecision, bool) { return hdrDecide(dg.snap, r) })
		cleanups = append(append(cleanups, stop...), g.Close)
		h.gws = append(h.gws, dg)
	}
	h.stop = func() {
		for _, g := range h.gws {
			g.closeConns()
		}
		for i := len(cleanups) - 1; i >= 0; i-- {
			cleanups[i]()
		}
	}
	return h
}

// sendRaw writes one request on a new connection and returns the status
// (0: no answer).
func sendRaw(addr, req string) int {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		return 0
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c, req); err != nil {
		return 0
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return 0
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// hdrUpstreamViews are the readings of a forwarded head: for each source,
// the values each kind of upstream reads, by the reader's name.
func hdrUpstreamViews(head string) ([]map[string][]string, error) {
	req, err := http.ReadRequest(bufio.NewReader(strings.NewReader(head)))
	if err != nil {
		return nil, err
	}
	names, vals := rawHeaderLines(head)
	var out []map[string][]string
	for _, src := range hdrDiffSources {
		views := map[string][]string{}
		switch src.Kind {
		case config.SourceHeader:
			list := fieldOf(src.Name)
			var vs valueSet
			headerValues(req.Header.Values(src.Name), list, &vs)
			views["go Header.Values"] = slices.Clone(vs.list())
			var raw, cgi []string
			cgiName := strings.ToUpper(strings.ReplaceAll(src.Name, "-", "_"))
			for i, n := range names {
				if strings.EqualFold(n, src.Name) {
					raw = append(raw, vals[i])
				}
				if strings.ToUpper(strings.ReplaceAll(n, "-", "_")) == cgiName {
					cgi = append(cgi, vals[i])
				}
			}
			vs = valueSet{}
			headerValues(raw, list, &vs)
			views["plain bytes"] = slices.Clone(vs.list())
			vs = valueSet{}
			headerValues(cgi, list, &vs)
			views["CGI HTTP_"+cgiName] = slices.Clone(vs.list())
		case config.SourceCookie:
			var goVals []string
			for _, c := range req.Cookies() {
				// The gateway keys " v" as v (cookieValues: stricter, one
				// bucket), so the Go value is compared as it is keyed.
				v, _ := cookieKey(c.Value)
				if c.Name == src.Name && v != "" && !slices.Contains(goVals, v) {
					goVals = append(goVals, v)
				}
			}
			views["go Cookies"] = goVals
			var raw []string
			for i, n := range names {
				if strings.EqualFold(n, "Cookie") {
					raw = append(raw, vals[i])
				}
			}
			views["node cookie.parse"] = nodeCookie(raw, src.Name)
			views["PHP $_COOKIE"] = phpCookie(raw, src.Name)
			views["Rack 2 parse_query(;,)"] = rack2Cookie(raw, src.Name)
			views["Django parse_cookie"] = djangoCookie(raw, src.Name)
			views["Werkzeug parse_cookie"] = werkzeugCookie(raw, src.Name)
			views["Starlette cookie_parser"] = starletteCookie(raw, src.Name)
			views["Python SimpleCookie"] = simpleCookieCookie(raw, src.Name)
		case config.SourceQuery:
			views["PHP $_GET"] = phpQuery(req.URL.RawQuery, src.Name)
			var goVals []string
			for _, v := range req.URL.Query()[src.Name] {
				if v != "" && !slices.Contains(goVals, v) {
					goVals = append(goVals, v)
				}
			}
			views["go URL.Query"] = goVals
		case config.SourceHost:
			// The upstream gets its own host in Host; the client's is in
			// X-Forwarded-Host, which is what the host source must key on.
			var hs []string
			var vs valueSet
			headerValues(req.Header.Values("X-Forwarded-Host"), fieldList, &vs)
			for _, v := range vs.list() {
				if hv := match.Host(v); hv != "" && !slices.Contains(hs, hv) {
					hs = append(hs, hv)
				}
			}
			views["go X-Forwarded-Host"] = hs
		}
		if src.Name == "Authorization" {
			views["go BasicAuth"], views["werkzeug scheme"] = credentialReadings(req)
		}
		out = append(out, views)
	}
	return out, nil
}

// credentialReadings are the credentials two servers read in a forwarded
// request's Authorization, each as the gateway keys them: Go's
// Request.BasicAuth (the user and password, in standard base64), and a
// reader taking the scheme up to the first space in any case and the
// credentials after it stripped, as Werkzeug's Authorization.from_header
// does (for the schemes the corpus uses: bearer, basic and token).
func credentialReadings(req *http.Request) (basic, scheme []string) {
	if u, p, ok := req.BasicAuth(); ok {
		basic = []string{"Basic " + base64.StdEncoding.EncodeToString([]byte(u+":"+p))}
	}
	for _, line := range req.Header.Values("Authorization") {
		name, rest, ok := strings.Cut(strings.Trim(line, " \t"), " ")
		rest = strings.Trim(rest, " \t")
		if !ok || rest == "" {
			continue
		}
		switch strings.ToLower(name) {
		case "bearer":
			scheme = append(scheme, "Bearer "+rest)
		case "token":
			scheme = append(scheme, "token "+rest)
		}
	}
	return basic, scheme
}

// sentHeaders is a forwarded head's header lines that come from the
// client (not the ones each transport writes itself), in order.
func sentHeaders(head string) []string {
	names, vals := rawHeaderLines(head)
	var out []string
	for i, n := range names {
		switch strings.ToLower(n) {
		case "host", "x-gw", "content-length":
			continue
		}
		out = append(out, strings.ToLower(n)+": "+vals[i])
	}
	slices.Sort(out) // the order of distinct names is free; a name's values stay in order below
	return out
}

// check sends the request with the given request-target and header lines
// (a Host line among them, or "Host: gw" is added) over HTTP/1.1, byte for
// byte, through both gateways and reports every broken property.
func (h *hdrHarness) check(target string, lines []string) []string {
	return h.run(hdrFields(lines), func(g *diffGateway[hdrDecision], seq string) (int, string) {
		var b strings.Builder
		// X-Pad takes a first hostile line that is an obs-fold.
		fmt.Fprintf(&b, "GET %s HTTP/1.1\r\nX-Seq: %s\r\nX-Gw: %s\r\nX-Pad: 1\r\n", target, seq, g.name)
		host := false
		for _, l := range lines {
			host = host || strings.HasPrefix(strings.ToLower(l), "host:")
			b.WriteString(l + "\r\n")
		}
		if !host {
			b.WriteString("Host: gw\r\n")
		}
		b.WriteString("\r\n")
		req := b.String()
		return sendRaw(g.addr, req), strconv.Quote(req)
	})
}

// checkH2 sends q over proto (h2c or h2), frame by frame, through both
// gateways and reports every broken property, as check does.
func (h *hdrHarness) checkH2(proto string, q diffReq) []string {
	return h.run(q.fields, func(g *diffGateway[hdrDecision], seq string) (int, string) {
		return g.send(proto, q, seq), proto + " " + strconv.Quote(q.String())
	})
}

// run sends one request through each gateway (send: its status, 0 for no
// answer, -1 for a stream reset before one, and how it was sent) and
// checks the one view of its header sources: a request the view refuses
// is neither forwarded nor counted; one the gateway answers itself (400)
// is not counted; one forwarded is counted, on the resource of the route
// that took it, and every value an upstream reads of a source is one the
// gateway keyed on (hdrDecide). fields are the header fields sent, by
// name and value.
func (h *hdrHarness) run(fields [][2]string, send func(g *diffGateway[hdrDecision], seq string) (int, string)) []string {
	h.seq++
	seq := strconv.Itoa(h.seq)
	var errs []string
	var sent []string
	var sentFrom string
	for _, g := range h.gws {
		status, req := send(g, seq)
		d, decided, res, counted, err := g.take(seq)
		rec, forwarded := h.up.take(g.name + "/" + seq)
		var head string
		if forwarded {
			head = rec.head
		}
		switch {
		case err != nil:
			errs = append(errs, fmt.Sprintf("%s %s: %v", g.name, req, err))
			continue
		case status == 0:
			errs = append(errs, fmt.Sprintf("%s %s: no answer", g.name, req))
			continue
		case !decided && forwarded:
			errs = append(errs, fmt.Sprintf("%s %s: refused by the view (%d), yet forwarded:\n%s", g.name, req, status, head))
			continue
		case !decided && counted:
			errs = append(errs, fmt.Sprintf("%s %s: refused by the view (%d), yet counted on %q", g.name, req, status, res))
			continue
		case !decided:
			continue // 400 from net/http or the view, or the stream reset: nothing forwarded or counted
		case !forwarded && status == http.StatusOK:
			errs = append(errs, fmt.Sprintf("%s %s: 200 but nothing forwarded", g.name, req))
			continue
		case !forwarded && counted:
			errs = append(errs, fmt.Sprintf("%s %s: answered %d, nothing forwarded, yet counted on %q", g.name, req, status, res))
			continue
		case !forwarded:
			continue
		case !counted:
			errs = append(errs, fmt.Sprintf("%s %s: forwarded, yet counted on no resource:\n%s", g.name, req, head))
			continue
		}
		// origin.from (X-App) and hashOn (cookie:sid, on the route of
		// resource all only: vh's upstream does not hash) must give one
		// value.
		for i, src := range hdrDiffSources {
			one := src == (config.Source{Kind: config.SourceHeader, Name: "X-App"}) ||
				src == (config.Source{Kind: config.SourceCookie, Name: "sid"}) && res == "all"
			if one && len(d.one[i]) > 1 {
				errs = append(errs, fmt.Sprintf("%s %s: %s gave %q, yet forwarded (must be 400)", g.name, req, src, d.one[i]))
			}
			if d.over[i] && one {
				errs = append(errs, fmt.Sprintf("%s %s: %s over 16 values, yet forwarded", g.name, req, src))
			}
		}
		views, err := hdrUpstreamViews(head)
		if err != nil {
			errs = append(errs, fmt.Sprintf("%s %s: the upstream cannot read what it got (%v):\n%s", g.name, req, err, head))
			continue
		}
		// The route with hosts (forwarded under /vh) is the one whose
		// limits apply exactly when the upstream reads a host it names.
		hosts := views[slices.Index(hdrDiffSources, config.Source{Kind: config.SourceHost})]["go X-Forwarded-Host"]
		named := slices.ContainsFunc(hosts, func(h string) bool { return h == "victim.example" || strings.HasSuffix(h, ".victim.example") })
		byHost := strings.HasPrefix(head, "GET /vh/")
		if byHost != named {
			errs = append(errs, fmt.Sprintf("%s %s: the host routes took it: %v; the upstream reads the host %q\nforwarded:\n%s", g.name, req, byHost, hosts, head))
		}
		if want := map[bool]string{true: "vh", false: "all"}[byHost]; res != want {
			errs = append(errs, fmt.Sprintf("%s %s: counted on %q, forwarded by the route of %q:\n%s", g.name, req, res, want, head))
		}
		for i, src := range hdrDiffSources {
			for reader, vals := range views[i] {
				for _, v := range vals {
					if !slices.Contains(d.values[i], v) {
						errs = append(errs, fmt.Sprintf("%s %s: %s: %s reads %q, the gateway counted %q\nforwarded:\n%s",
							g.name, req, src, reader, v, d.values[i], head))
					}
				}
			}
		}
		s := sentHeaders(head)
		for _, name := range []string{"user-agent", "content-type"} {
			if severalFields(fields, name) {
				// Known: the fast forwarder sends the last line only
				// (TestForwardersSendFasthttpSpecialHeadersAlike).
				// Either way the limits counted every line.
				s = slices.DeleteFunc(s, func(l string) bool { return strings.HasPrefix(l, name+":") })
			}
		}
		if sent != nil && !slices.Equal(s, sent) {
			errs = append(errs, fmt.Sprintf("%s: the forwarders sent different headers:\n  %s %q\n  %s %q", req, sentFrom, sent, g.name, s))
		}
		sent, sentFrom = s, g.name
	}
	return errs
}

// hdrFields are header lines as (name, value) fields, cut at the first
// colon (an obs-fold line, which has none, is all name).
func hdrFields(lines []string) [][2]string {
	var fs [][2]string
	for _, l := range lines {
		k, v, _ := strings.Cut(l, ":")
		fs = append(fs, [2]string{k, v})
	}
	return fs
}

// hdrNames and hdrValues are what generated header lines are made of.
var hdrNames = []string{
	"X-Tenant", "x-tenant", "X-TENANT", "X_Tenant", "x_tenant", "X-tenant", "X-App", "x-app", "X_App",
	"Cookie", "cookie", "COOKIE", "X-Forwarded-Host", "x_forwarded_host", "X-Forwarded-For", "Forwarded",
	"Connection", "Host", "X-Other", "User-Agent", "Content-Type", "Accept-Encoding", "X-Forwarded-Proto",
	"Te", "Upgrade", "Keep-Alive", "Proxy-Authorization", "Authorization", "Referer", "X-Real-Ip",
	"X-Tenant ", " X-Tenant", "\tX-Tenant", "X-Tenant\t", "X_Forwarded_For", "X-Tenant\xff", "X-Ténant",
}

var hdrValues = []string{
	"victim", "a, b", "a,b", " victim ", "\tvictim\t", "", "\"v,w\"", "victim\r\n x", "caf\xc3\xa9", "\xff",
	"victim,", ",victim", "a, victim, a", "sid=victim", "sid=a;sid=b", "sid=\"victim\"", "$Version=1; sid=victim",
	"sid =victim", " sid=victim", "s id=victim", "sid=a, sid=victim", "SID=victim", "sid=", "sid=a;sid=a",
	"sid=a; sid=\"a\"", "x=1;sid=v2", "sid=\"\"", "sid=\"a", "sid=vict%69m", "s%69d=victim", "sid=\"victimZ",
	"sid=a+b", "sid=a%20b", "sid=%ff", "sid=%25ff", "x=1, sid=victim", "sid=%zz%41", "X-Tenant", "x_tenant", "close", "keep-alive, X-Tenant",
	"victim.example", "Victim.Example.", "victim:8080", "[::1]:80", "VICTIM", "1.2.3.4", "for=1.2.3.4",
	// Hosts the host routes must take, or the upstream must not read as theirs.
	"x.victim.example", "[victim.example]", "[VICTIM.example.]:443", "a..victim.example", ".victim.example",
	strings.Repeat("a", 250) + ".victim.example",
	// Python's readings: backslash and octal escapes, a quoted ';',
	// Unicode white space, ill-formed UTF-8, white space as a separator;
	// PHP's name mangling of s_id.
	`sid="\166ictim"`, `sid="vic\tim"`, `"\166ictim"`, `sid="vic;tim"`, `sid="a;sid=b"`, "sid=\xa0victim",
	"sid\xa0=victim", "sid=victim\xc2\xa0", "sid=\x1cvictim", "sid=vict\xffm", "sid=vict\xfem", "sid=\xe2\x80",
	`sid="\351"`, "sid=\xc3\xa9", `sid="\303\251"`, "x=1 sid=victim", "x=1 sid = victim", "sid=victim junk=1",
	`x=1 sid="a b"`, "s.id=victim", "s id=victim", "s_id=victim", "s%2Eid=victim", "%20s_id=victim", "s_id%00x=victim",
	"s[id=victim", `sid=" victim"`, "sid=\"victim\xa0\"",
	// Credentials: a scheme in any case, runs of spaces after it, Basic's
	// base64 unpadded or with its leftover bits set (victim:pw, victim:pwd).
	"Bearer victim", "bearer victim", "BEARER  victim", "Bearer \tvictim", "token victim", "Token  victim",
	"Basic dmljdGltOnB3", "basic dmljdGltOnB3", "BASIC   dmljdGltOnB3", "Basic dmljdGltOnB3ZA==", "Basic dmljdGltOnB3ZA",
	"Basic dmljdGltOnB3ZB==", "basic dmljdGlt!OnB3ZA==",
}

// hdrCase is a request of the header-source differential: a
// request-target and header lines, as HTTP/1.1 writes them.
type hdrCase struct {
	target string
	lines  []string
}

// hdrSeeds are hand-picked: one per corner the brief names.
var hdrSeeds = []hdrCase{
	{"/t", []string{"Host: victim.example"}},
	{"/t", []string{"Host: X.Victim.Example.:8443"}},
	{"/t", []string{"Host: [victim.example]"}},
	{"/t", []string{"Host: [VICTIM.example.]:443"}},
	{"/t", []string{"Host: a..victim.example"}},
	{"/t", []string{"Host: .victim.example"}},
	{"/t", []string{"Host: " + strings.Repeat("a", 250) + ".victim.example"}},
	{"http://victim.example/t", []string{"Host: other"}},
	{"/t", []string{"X-Tenant: victim"}},
	{"/t", []string{"X-Tenant: a", "X-Tenant: victim"}},
	{"/t", []string{"X-Tenant: a, victim"}},
	{"/t", []string{"x-tenant: victim", "X-TENANT: b"}},
	{"/t", []string{"X-Tenant: \tvictim\t "}},
	{"/t", []string{"X-Tenant: a", " victim"}}, // obs-fold
	{"/t", []string{"X-Tenant:", "X-Tenant: victim"}},
	{"/t", []string{"X_Tenant: victim"}},
	{"/t", []string{"X-Tenant: a", "X_Tenant: victim"}},
	{"/t", []string{"x_tenant: victim"}},
	{"/t", []string{"X-App: a", "X_App: b"}},
	{"/t", []string{"X-App: a", "X-App: b"}},
	{"/t", []string{"X-App: a, b"}},
	{"/t", []string{"Cookie: sid=a", "Cookie: sid=victim"}},
	{"/t", []string{"Cookie: sid=\"victim\""}},
	{"/t", []string{"Cookie: x=1;sid=victim"}},
	{"/t", []string{"Cookie: sid=a; sid=victim"}},
	{"/t", []string{"Cookie: s id=victim; sid =victim"}},
	{"/t", []string{"Cookie: $Version=1; sid=victim; $Path=/"}},
	{"/t", []string{"Cookie: sid=caf\xc3\xa9"}},
	{"/t", []string{"Cookie: sid=a, sid=victim"}},
	{"/t", []string{"Cookie: x=1, sid=victim"}},
	{"/t", []string{"Cookie: sid=vict%69m"}},
	{"/t", []string{"Cookie: s%69d=victim"}},
	{"/t", []string{"Cookie: sid=\"victimZ"}},
	{"/t", []string{"Cookie: sid=a+b"}},
	{"/t", []string{`Cookie: sid="\166ictim"`}},
	{"/t", []string{`Cookie: sid="vic;tim"`}},
	{"/t", []string{"Cookie: sid=\xa0victim"}},
	{"/t", []string{"Cookie: sid\xc2\xa0=victim"}},
	{"/t", []string{"Cookie: sid=vict\xffm"}},
	{"/t", []string{"Cookie: x=1 sid=victim"}},
	{"/t", []string{"Cookie: s.id=victim"}},
	{"/t", []string{"Cookie: s_id%00x=victim"}},
	{"/t", []string{`Cookie: sid="a`, `Cookie: b"`}},
	{"/t", []string{"Cookie: sid=vic\xe2\x80tim"}},
	{"/t", []string{"Host: Victim.Example.:8080"}},
	{"/t", []string{"Host: VICTIM"}},
	{"http://victim/t", []string{"Host: other"}},
	{"http://Victim.Example./t", nil},
	{"/t", []string{"X-Forwarded-Host: victim"}},
	{"/t", []string{"x_forwarded_host: victim"}},
	{"/t", []string{"X-Forwarded-For: 1.2.3.4"}},
	{"/t", []string{"Connection: X-Tenant", "X-Tenant: victim"}},
	{"/t", []string{"Connection: x_tenant", "X_Tenant: victim"}},
	// Connection lines over 256 bytes are read through a set (connNamesOf),
	// in any case, naming a twin, or naming nothing a source reads.
	{"/t", []string{"Connection: " + strings.Repeat("x-filler, ", 30) + "X-TENANT", "X-Tenant: victim"}},
	{"/t", []string{"Connection: " + strings.Repeat("a,", 150), "Connection: x_tenant", "X_Tenant: victim"}},
	{"/t", []string{"Connection: " + strings.Repeat("k,", 200), "X-Tenant: victim"}},
	{"/t", []string{"X-Tenant: caf\xc3\xa9", "X-Tenant: \xff"}},
	{"/t", []string{"User-Agent: a", "User-Agent: b"}},
	{"/t", []string{"Content-Type: a/b", "Content-Type: c/d"}},
	{"/t", []string{"Content-Type: a/b, c/d"}},
	{"/t", []string{"Authorization: bearer victim"}},
	{"/t", []string{"Authorization: BEARER  victim"}},
	{"/t", []string{"Authorization: Bearer victim", "Authorization: bearer victim"}},
	{"/t", []string{"Authorization: basic dmljdGltOnB3ZA=="}},
	{"/t", []string{"Authorization: Basic dmljdGltOnB3ZB=="}},
	{"/t", []string{"Authorization: BASIC  dmljdGltOnB3"}},
	{"/t", []string{"authorization: Token   victim"}},
}

func hdrLine(rng *rand.Rand) string {
	n := hdrNames[rng.IntN(len(hdrNames))]
	v := hdrValues[rng.IntN(len(hdrValues))]
	if strings.EqualFold(n, "cookie") && rng.IntN(2) == 0 {
		v = "sid=" + hdrValues[rng.IntN(len(hdrValues))]
	}
	if strings.EqualFold(n, "authorization") && rng.IntN(2) == 0 {
		v = []string{"Bearer", "bearer", "BASIC", "Basic", "token"}[rng.IntN(5)] + []string{" ", "  ", " \t"}[rng.IntN(3)] + hdrValues[rng.IntN(len(hdrValues))]
	}
	return n + ":" + []string{" ", "", "\t", "  "}[rng.IntN(4)] + v
}

// hdrCases are the seeds and n requests generated by rng.
func hdrCases(rng *rand.Rand, n int) []hdrCase {
	cs := append([]hdrCase(nil), hdrSeeds...)
	for range n {
		var lines []string
		for n := 1 + rng.IntN(4); n > 0; n-- {
			lines = append(lines, hdrLine(rng))
		}
		target := "/t"
		if rng.IntN(6) == 0 {
			target = "http://" + []string{"victim", "Victim.Example.", "victim:8080", "a", "victim:0:0", "victim:8x"}[rng.IntN(6)] + "/t"
		}
		if rng.IntN(3) == 0 {
			// Query names as PHP mangles them into $_GET, arrays too.
			target += "?" + []string{"s_id", "s.id", "s+id", "s%20id", "%20s_id", "+s_id", "s_id%00x", "s%5Bid", "s%5fid", "s[id]", "sXid",
				"s_id[]", "s_id%5B0%5D", "s.id[x][y]", "s_id[", "s[id"}[rng.IntN(16)] +
				"=" + []string{"victim", "a", "vict%69m", "a+b"}[rng.IntN(4)]
		}
		cs = append(cs, hdrCase{target, lines})
	}
	return cs
}

// hdrReport reports a differential's failures, one of each kind (up to
// 30), and how many more there were when done is called.
func hdrReport(t *testing.T) (report func(errs []string), done func()) {
	failures := 0
	seen := map[string]bool{}
	report = func(errs []string) {
		for _, e := range errs {
			first := strings.SplitN(e, "\n", 2)[0]
			kind := e[:strings.IndexByte(e, ' ')] + first[strings.LastIndex(first, "\": ")+2:]
			if i := strings.Index(kind, " reads "); i >= 0 {
				kind = kind[:i]
			}
			failures++
			if !seen[kind] && len(seen) < 30 {
				seen[kind] = true
				t.Error(e)
			}
		}
	}
	done = func() {
		if failures > len(seen) {
			t.Errorf("... and %d more of the same kinds", failures-len(seen))
		}
	}
	return report, done
}

func TestHeaderSourcesOneView(t *testing.T) {
	h := newHdrHarness(t)
	defer h.stop()
	report, done := hdrReport(t)
	defer done()
	for _, c := range hdrCases(rand.New(rand.NewPCG(7, 11)), 600) {
		report(h.check(c.target, c.lines))
	}
}

// TestHeaderSourcesOneViewH2 is TestHeaderSourcesOneView over h2c and
// h2 over TLS, with both forwarders: its requests as an h2 client writes
// them (hdrH2), a third of them with the header block cut into frames of
// a few bytes, then what only HTTP/2 lets a client write (hdrH2Cases).
// Go's h2 server refuses a malformed field (an upper-case or ill-formed
// name, a NUL, CR or LF in a value) by resetting the stream, before the
// gateway sees it: that is checked as a refusal, never forwarded nor
// counted.
func TestHeaderSourcesOneViewH2(t *testing.T) {
	h := newHdrHarness(t)
	defer h.stop()
	report, done := hdrReport(t)
	defer done()
	var qs []diffReq
	for i, c := range hdrCases(rand.New(rand.NewPCG(7, 12)), hdrH2Generated) {
		q := hdrH2(c.target, c.lines)
		if i%3 == 2 && h2WellFormed(q.fields) {
			q.fragment = 1 + i%7
		}
		qs = append(qs, q)
	}
	for _, q := range append(qs, hdrH2Cases...) {
		for _, proto := range []string{"h2c", "h2"} {
			report(h.checkH2(proto, q))
		}
	}
}

// hdrH2Generated is how many generated requests TestHeaderSourcesOneViewH2
// sends beyond the seeds (over two protocols, so fewer than over HTTP/1.1).
const hdrH2Generated = 200

// hdrH2 is the h2 request a client writes for an HTTP/1.1 case: the first
// Host line is the :authority, a later one a host field; names are in
// lower case, as h2 requires (hdrH2Cases sends upper-case ones); a value
// is what follows the colon and one space, so the white space HTTP/1.1
// trims and h2 carries is kept; an obs-fold line is joined to its field
// with a space, as an HTTP/1.1 server reads it.
func hdrH2(target string, lines []string) diffReq {
	q := diffReq{method: "GET", target: target, h2only: true}
	for _, l := range lines {
		if l != "" && (l[0] == ' ' || l[0] == '\t') && len(q.fields) > 0 {
			q.fields[len(q.fields)-1][1] += " " + trimOWS(l)
			continue
		}
		k, v, _ := strings.Cut(l, ":")
		v = strings.TrimPrefix(v, " ")
		lower := []byte(k)
		for i, c := range lower {
			lower[i] = lowerASCII(c)
		}
		k = string(lower)
		if k == "host" && q.authority == "" && v != "" {
			q.authority = v
			continue
		}
		q.fields = append(q.fields, [2]string{k, v})
	}
	return q
}

// hdrH2Cases are header blocks only HTTP/2 lets a client write, or
// writes otherwise than HTTP/1.1 does: each sent whole and with the block
// cut into 1-byte frames (a HEADERS frame, then a CONTINUATION frame per
// byte), every field across frames, if it is short and Go's server takes
// it (h2WellFormed).
var hdrH2Cases = func() []diffReq {
	long := strings.Repeat("v", 20000) // past a frame (16384 bytes): on in a CONTINUATION frame
	var cs []diffReq
	for _, f := range [][][2]string{
		// A field repeated, spelt twice (X_App is HTTP_X_APP too).
		{{"x-tenant", "a"}, {"x-tenant", "victim"}}, {{"x-tenant", "victim"}, {"x-tenant", "victim"}},
		{{"x-app", "a"}, {"x-app", "a"}}, {{"x-app", "a"}, {"x-app", "b"}}, {{"x-app", "a"}, {"x_app", "b"}},
		{{"x-app", "a"}, {"x-app", ""}}, {{"x-forwarded-host", "victim.example"}, {"x-forwarded-host", "gw"}},
		{{"x-forwarded-for", "1.2.3.4"}, {"x-forwarded-for", "5.6.7.8"}},
		// cookie in several fields, which RFC 9113 8.2.3 joins with "; ":
		// so does the gateway, and an upstream reads the one line it sends.
		{{"cookie", "sid=a"}, {"cookie", "sid=victim"}}, {{"cookie", "x=1"}, {"cookie", "sid=victim"}},
		{{"cookie", "sid=victim"}, {"cookie", "sid=victim"}}, {{"cookie", `sid="a`}, {"cookie", `b"`}},
		{{"cookie", ""}, {"cookie", "sid=victim"}}, {{"cookie", "sid=a;"}, {"cookie", ";sid=b"}},
		{{"cookie", "sid=a,"}, {"cookie", "s_id=b"}}, {{"cookie", "sid"}, {"cookie", "=victim"}},
		{{"cookie", "s"}, {"cookie", "id=victim"}}, {{"cookie", "sid=a"}, {"x-tenant", "b"}, {"cookie", "sid=c"}},
		// Upper-case names: malformed (RFC 9113 8.2.1), reset.
		{{"X-Tenant", "victim"}}, {{"Cookie", "sid=victim"}}, {{"x-Tenant", "victim"}}, {{"X-APP", "a"}},
		{{"cookie", "sid=a"}, {"Cookie", "sid=b"}}, {{"x-tenant", "a"}, {"X-Tenant", "b"}}, {{"Host", "victim.example"}},
		// White space around a value: malformed too (RFC 9113 8.2.1), but
		// Go's server takes it; the gateway and an upstream over HTTP/1.1
		// trim it.
		{{"x-tenant", " victim"}}, {{"x-tenant", "victim\t"}}, {{"x-tenant", " "}}, {{"x-app", " a "}},
		{{"x-app", "a"}, {"x-app", " a"}}, {{"x-app", "a"}, {"x-app", "a\t"}}, {{"cookie", " sid=victim "}},
		{{"cookie", "sid= victim"}}, {{"cookie", "sid=victim"}, {"cookie", " sid=victim"}}, {{"cookie", "\tsid=a"}, {"cookie", "sid=b\t"}},
		{{"x-forwarded-host", " victim.example"}}, {{"x-forwarded-host", "victim.example "}}, {{"x-tenant", "a , victim"}},
		// NUL, CR, LF and other controls in a value: reset.
		{{"x-tenant", "a\x00b"}}, {{"x-tenant", "a\rb"}}, {{"x-tenant", "a\nb"}}, {{"x-tenant", "a\r\nx-app: b"}},
		{{"cookie", "sid=a\r\ncookie: sid=b"}}, {{"x-app", "\x00"}}, {{"cookie", "sid=\x00"}}, {{"cookie", "sid=a\nb"}},
		{{"x-tenant", "a\x01"}}, {{"x-tenant", "a\x7f"}}, {{"x-forwarded-host", "victim.example\r\n"}},
		// Names HTTP/1.1 has no line for, or that h2 refuses.
		{{"x-tenant\x00", "victim"}}, {{"x-tenant:", "victim"}}, {{"x tenant", "victim"}}, {{"", "victim"}},
		{{"x-tenant\r\nx-app", "victim"}},
		// Long values, past a frame (cookies are cut across frames
		// below: the test's Python cookie readers are slow on 20 kB); more
		// values of one source than the gateway keeps (16).
		{{"x-tenant", long}}, {{"x-app", long}}, {{"x-tenant", long}, {"x-tenant", "victim"}},
		{{"x-forwarded-host", long + ".victim.example"}},
		{{"x-tenant", strings.Repeat("a,", 20) + "victim"}}, {{"cookie", strings.Repeat("sid=a; ", 20) + "sid=victim"}},
		// One field read by a cookie source and a header source
		// (header:Cookie and cookie:sid; a cookie-looking header).
		{{"cookie", "sid=victim"}, {"x-tenant", "sid=victim"}}, {{"cookie", "x-tenant=victim"}, {"x-tenant", "victim"}},
		{{"cookie", "sid=a"}, {"cookie", "s_id=a"}}, {{"x-app", "sid=a"}, {"cookie", "sid=a"}},
	} {
		cs = append(cs, diffReq{method: "GET", target: "/t", fields: f, h2only: true})
	}
	// The host routes: :authority and host fields.
	for _, c := range []diffReq{
		{authority: "victim.example"}, {authority: "gw", fields: [][2]string{{"host", "victim.example"}}},
		{authority: "victim.example", fields: [][2]string{{"host", "gw"}}}, {noAuthority: true, fields: [][2]string{{"host", "victim.example"}}},
		{authority: " victim.example"}, {authority: "victim.example "}, {authority: "x.victim.example"},
		{authority: "gw", fields: [][2]string{{"x-forwarded-host", "victim.example"}}},
	} {
		c.method, c.target, c.h2only = "GET", "/t", true
		cs = append(cs, c)
	}
	longCookie := strings.Repeat("v", 4000)
	for _, f := range [][][2]string{
		{{"cookie", "sid=" + longCookie}}, {{"cookie", "x=" + longCookie}, {"cookie", "sid=victim"}},
		{{"cookie", "sid=a"}, {"x-tenant", longCookie}, {"cookie", "sid=" + longCookie}},
	} {
		cs = append(cs, diffReq{method: "GET", target: "/t", fields: f, h2only: true, fragment: 1000})
	}
	for _, c := range cs {
		if n := len(fmt.Sprint(c.fields)); n < 1000 && h2WellFormed(c.fields) {
			c.fragment = 1
			cs = append(cs, c)
		}
	}
	return cs
}()

// h2WellFormed reports whether Go's h2 server takes fields as they are
// (lower-case token names, values without NUL, CR or LF): the ones it
// refuses are not sent cut across frames too, as then it ends the
// connection, a second later, and that tests only the server.
func h2WellFormed(fields [][2]string) bool {
	for _, f := range fields {
		if f[0] == "" || !httpguts.ValidHeaderFieldValue(f[1]) {
			return false
		}
		for _, c := range []byte(f[0]) {
			if !httpguts.IsTokenRune(rune(c)) || 'A' <= c && c <= 'Z' {
				return false
			}
		}
	}
	return true
}

// gwCookieKey is how the gateway keys a value a decoding upstream read:
// trimmed and unquoted again after decoding (cookieKey; stricter, never a
// way past). A Go upstream's raw value is keyed by cookieKey itself.
// A '+' is a space to the gateway, whichever way it was written.
func gwCookieKey(v string) string {
	return bareCookie(strings.ReplaceAll(v, "+", " "))
}

// nodeCookie reads name as jshttp/cookie 0.x (Express 4) does: the header
// lines joined by "; ", pairs split at ';', name and value trimmed, a value
// that starts with '"' sliced (1, -1), then decodeURIComponent (the raw
// value when that throws); the first pair of a name wins.
func nodeCookie(lines []string, name string) []string {
	for _, pair := range strings.Split(strings.Join(lines, "; "), ";") {
		k, v, ok := strings.Cut(pair, "=")
		if !ok || strings.TrimSpace(k) != name {
			continue
		}
		v = strings.TrimSpace(v)
		if strings.HasPrefix(v, `"`) {
			v = v[1:max(1, len(v)-1)]
		}
		if strings.Contains(v, "%") {
			if d, err := url.PathUnescape(v); err == nil && utf8.ValidString(d) {
				v = d
			}
		}
		if v == "" {
			return nil
		}
		return []string{gwCookieKey(v)}
	}
	return nil
}

// phpDecode is PHP's urldecode: '+' is a space, a valid %XX its byte, any
// other '%' kept.
func phpDecode(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '+':
			b.WriteByte(' ')
		case c == '%' && i+2 < len(s) && match.IsHex(s[i+1]) && match.IsHex(s[i+2]):
			b.WriteByte(match.Unhex(s[i+1])<<4 | match.Unhex(s[i+2]))
			i += 2
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

// phpCookie reads name as PHP fills $_COOKIE: pairs split at ';', leading
// white space skipped, name and value urldecoded, and the name as
// php_register_variable_ex makes it: leading spaces skipped, cut at a
// NUL, ' ' and '.' written '_', and a '[' without a ']' after it '_' (a
// name with "[...]" is an array, no string value).
func phpCookie(lines []string, name string) []string {
	var out []string
	for _, line := range lines {
		for _, pair := range strings.Split(line, ";") {
			k, v, _ := strings.Cut(strings.TrimLeft(pair, " \t\n\r\v\f"), "=")
			if phpName(phpDecode(k)) != name {
				continue
			}
			if v = gwCookieKey(phpDecode(v)); v != "" {
				out = append(out, v)
			}
		}
	}
	return out
}

// phpName is a decoded name as php_register_variable_ex makes it:
// leading spaces skipped, cut at a NUL, ' ' and '.' written '_', and a
// '[' without a ']' after it '_'. A name with "[...]" is an array of the
// name before the '[' (key[] and key[0] are key to $_GET, and to Rails'
// find_by(token: params[:key]) the array finds the record key=v names).
func phpName(k string) string {
	k = strings.TrimLeft(k, " ")
	if i := strings.IndexByte(k, 0); i >= 0 {
		k = k[:i]
	}
	if i := strings.IndexByte(k, '['); i >= 0 {
		if strings.IndexByte(k[i:], ']') >= 0 {
			k = k[:i]
		} else {
			k = k[:i] + "_" + k[i+1:]
		}
	}
	return strings.NewReplacer(" ", "_", ".", "_").Replace(k)
}

// phpQuery reads name as PHP fills $_GET from a raw query: pairs split at
// '&', name and value urldecoded, the name mangled as phpCookie's is.
func phpQuery(raw, name string) []string {
	var out []string
	for _, pair := range strings.Split(raw, "&") {
		k, v, _ := strings.Cut(pair, "=")
		if phpName(phpDecode(k)) != name {
			continue
		}
		if v = phpDecode(v); v != "" {
			out = append(out, v)
		}
	}
	return out
}

// rack2Cookie reads name as Rack 2's parse_query(cookie, ";,") does: pairs
// split at ';' or ',' (spaces after them dropped), name and value
// unescaped ('+' a space).
func rack2Cookie(lines []string, name string) []string {
	var out []string
	for _, line := range lines {
		for _, pair := range strings.FieldsFunc(line, func(r rune) bool { return r == ';' || r == ',' }) {
			k, v, _ := strings.Cut(strings.TrimLeft(pair, " "), "=")
			dk, err1 := url.QueryUnescape(k)
			dv, err2 := url.QueryUnescape(v)
			if err1 != nil || err2 != nil || dk != name {
				continue
			}
			if dv = gwCookieKey(dv); dv != "" {
				out = append(out, dv)
			}
		}
	}
	return out
}

// severalFields reports more than one field called name, or an empty one.
func severalFields(fields [][2]string, name string) bool {
	n := 0
	for _, f := range fields {
		if k, v := f[0], f[1]; strings.EqualFold(k, name) {
			if n++; trimOWS(v) == "" {
				return true
			}
		}
	}
	return n > 1
}

// TestForwardersSendFasthttpSpecialHeadersAlike: with two User-Agent
// or two Content-Type lines, the standard forwarder sends what net/http
// writes (the first User-Agent; every Content-Type line), the fast one
// only the last of each (fasthttp's SetUserAgent and SetContentType
// replace); an empty Content-Type the standard one sends, the fast one
// dropped. No bypass (the limits count every line) but the forwarders
// differed; buildRequest now writes them as net/http does.
func TestForwardersSendFasthttpSpecialHeadersAlike(t *testing.T) {
	h := newHdrHarness(t)
	defer h.stop()
	for _, lines := range [][]string{
		{"User-Agent: a", "User-Agent: b"},
		{"Content-Type: a/b", "Content-Type: c/d"},
		{"Content-Type:"},
	} {
		h.seq++
		seq := strconv.Itoa(h.seq)
		var sent [][]string
		for _, g := range h.gws {
			req := fmt.Sprintf("GET /t HTTP/1.1\r\nHost: gw\r\nX-Seq: %s\r\nX-Gw: %s\r\n%s\r\n\r\n", seq, g.name, strings.Join(lines, "\r\n"))
			if status := sendRaw(g.addr, req); status != 200 {
				t.Fatalf("%s: %d", g.name, status)
			}
			rec, ok := h.up.take(g.name + "/" + seq)
			if !ok {
				t.Fatalf("%s: 200, but the upstream got nothing", g.name)
			}
			sent = append(sent, sentHeaders(rec.head))
		}
		if !slices.Equal(sent[0], sent[1]) {
			t.Errorf("%q: standard sent %q, fast %q", lines, sent[0], sent[1])
		}
	}
}

// TestTwinsOfRewrittenHeadersAreForwarded: both forwarders replace
// the client's X-Forwarded-For and X-Forwarded-Host, but pass on
// X_Forwarded_For and X_Forwarded_Host, which a CGI, WSGI, PHP or Rack
// upstream reads as the same HTTP_X_FORWARDED_FOR (the standard forwarder
// writes it after the real one, so a last-wins environ takes the forged
// address). Likewise origin.strip removes X-App but passes X_App. The
// fix needs both forwarders (forward_standard.go is not owned by this
// review): drop a client header whose CGI name (sameCGIName) is that of a
// header dropped or set anew (dropRequestHeader, the stripped origin).
func TestTwinsOfRewrittenHeadersAreForwarded(t *testing.T) {

	h := newHdrHarness(t)
	defer h.stop()
	for _, g := range h.gws {
		h.seq++
		seq := strconv.Itoa(h.seq)
		req := fmt.Sprintf("GET /t HTTP/1.1\r\nHost: gw\r\nX-Seq: %s\r\nX-Gw: %s\r\nX_Forwarded_For: 6.6.6.6\r\nX_Forwarded_Host: forged\r\n\r\n", seq, g.name)
		if status := sendRaw(g.addr, req); status != 200 {
			t.Fatalf("%s: %d", g.name, status)
		}
		rec, ok := h.up.take(g.name + "/" + seq)
		if !ok {
			t.Fatalf("%s: 200, but the upstream got nothing", g.name)
		}
		head := rec.head
		names, _ := rawHeaderLines(head)
		for _, n := range names {
			if n != "X-Forwarded-For" && n != "X-Forwarded-Host" && (sameCGIName(n, "X-Forwarded-For") || sameCGIName(n, "X-Forwarded-Host")) {
				t.Errorf("%s forwarded %s:\n%s", g.name, n, head)
			}
		}
	}
}
