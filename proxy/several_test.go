package proxy_test

import (
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"sluice/config"
	"sluice/proxy"
)

// sendLines requests target with the given header lines (name, value, name,
// value...: a name may repeat) and returns the status and X-Sluice-Blocked.
func sendLines(g http.Handler, target string, lines ...string) (status int, blocked string) {
	req := httptest.NewRequest("GET", target, nil)
	for i := 0; i+1 < len(lines); i += 2 {
		req.Header.Add(lines[i], lines[i+1])
	}
	w := httptest.NewRecorder()
	g.ServeHTTP(w, req)
	return w.Code, w.Header().Get("X-Sluice-Blocked")
}

// step is one request of a several-values test and what it must get: a
// status and, for a block, the guard.
type step struct {
	target string
	lines  []string
	status int
	reason string
}

func ids(n int) string {
	var b strings.Builder
	for i := range n {
		if i > 0 {
			b.WriteByte('&')
		}
		b.WriteString("id=" + strconv.Itoa(1000+i))
	}
	return b.String()
}

// TestSeveralValuesOnSyntheticTime: a param rule checks every distinct
// non-empty value of its source (SPEC §3 Sources: Several values): a value
// hidden behind an empty or decoy one is limited, a decoy that passed is
// given its token back when the other value blocks, and more than 16
// values is 400 and counts nowhere.
func TestSeveralValuesOnSyntheticTime(t *testing.T) {
	const paramOn = `
paramRules:
  - resource: item
    param: %s
    count: 2
`
	for _, tc := range []struct {
		name, source string
		steps        []step
	}{
		{"query", "query:id", []step{
			{target: "/item/x?id=102", status: 200}, {target: "/item/x?id=102", status: 200},
			{target: "/item/x?id=&id=102", status: 429, reason: "param"},
			{target: "/item/x?id=101&id=102", status: 429, reason: "param"},
			{target: "/item/x?id=102&id=101", status: 429, reason: "param"},
			{target: "/item/x?id=10%32", status: 429, reason: "param"},
			// 101 was given back what the blocked calls took.
			{target: "/item/x?id=101&id=101", status: 200}, {target: "/item/x?id=101", status: 200},
			{target: "/item/x?id=101", status: 429, reason: "param"},
			// Sixteen values are checked; seventeen cannot be.
			{target: "/item/x?" + ids(16), status: 200},
			{target: "/item/x?" + ids(17), status: 400},
			{target: "/item/x?" + ids(17) + "&id=102", status: 400},
			{target: "/item/x?" + ids(16), status: 200},
			{target: "/item/x?" + ids(16), status: 429, reason: "param"},
		}},
		{"header", "header:X-Key", []step{
			{target: "/item/x", lines: []string{"X-Key", "102"}, status: 200},
			{target: "/item/x", lines: []string{"X-Key", "102"}, status: 200},
			{target: "/item/x", lines: []string{"X-Key", "", "X-Key", "102"}, status: 429, reason: "param"},
			{target: "/item/x", lines: []string{"X-Key", "101", "X-Key", "102"}, status: 429, reason: "param"},
			{target: "/item/x", lines: []string{"X-Key", "101, 102"}, status: 429, reason: "param"},
			{target: "/item/x", lines: []string{"X-Key", "101,101", "X-Key", " 101"}, status: 200},
			{target: "/item/x", lines: []string{"X-Key", "101"}, status: 200},
			{target: "/item/x", lines: []string{"X-Key", "101"}, status: 429, reason: "param"},
			{target: "/item/x", lines: []string{"X-Key", strings.ReplaceAll(ids(17), "&", ",")}, status: 400},
		}},
		{"cookie", "cookie:id", []step{
			{target: "/item/x", lines: []string{"Cookie", "id=102"}, status: 200},
			{target: "/item/x", lines: []string{"Cookie", "id=102"}, status: 200},
			{target: "/item/x", lines: []string{"Cookie", "id=; id=102"}, status: 429, reason: "param"},
			// A space or tab before '=' is the same cookie to net/http,
			// Python and Node: it must not get past the limit.
			{target: "/item/x", lines: []string{"Cookie", "id =102"}, status: 429, reason: "param"},
			{target: "/item/x", lines: []string{"Cookie", "id\t=102"}, status: 429, reason: "param"},
			{target: "/item/x", lines: []string{"Cookie", "a=1; id =102"}, status: 429, reason: "param"},
			{target: "/item/x", lines: []string{"Cookie", "id=101", "Cookie", "id=102"}, status: 429, reason: "param"},
			{target: "/item/x", lines: []string{"Cookie", "id=101; a=1"}, status: 200},
			{target: "/item/x", lines: []string{"Cookie", "id=101"}, status: 200},
			{target: "/item/x", lines: []string{"Cookie", "id=101"}, status: 429, reason: "param"},
			{target: "/item/x", lines: []string{"Cookie", strings.ReplaceAll(ids(17), "&", "; ")}, status: 400},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g, _, up := clockedGateway(t, strings.Replace(paramOn, "%s", tc.source, 1))
			forwarded := int32(0)
			for i, st := range tc.steps {
				status, blocked := sendLines(g, st.target, st.lines...)
				if status != st.status || blocked != st.reason {
					t.Fatalf("step %d (%s %q): %d %q, want %d %q", i, st.target, st.lines, status, blocked, st.status, st.reason)
				}
				if status == 200 {
					forwarded++
				}
				if n := up.calls.Load(); n != forwarded {
					t.Fatalf("step %d: upstream has %d requests, want %d", i, n, forwarded)
				}
			}
		})
	}
}

// TestTooManyValuesCountNowhere: a request refused for too many values
// gives back what the guards before the param check took, and counts as
// neither a pass nor a block.
func TestTooManyValuesCountNowhere(t *testing.T) {
	g, _, _ := clockedGateway(t, `
flowRules:
  - resource: item
    count: 2
paramRules:
  - resource: item
    param: query:id
    count: 100
`)
	for range 3 {
		if status, _ := sendLines(g, "/item/x?"+ids(17)); status != 400 {
			t.Fatalf("17 values: %d, want 400", status)
		}
	}
	for i := range 2 {
		if status, blocked := sendLines(g, "/item/x?id=1"); status != 200 {
			t.Fatalf("call %d after three 400s: %d %q, want a pass (flow count 2)", i+1, status, blocked)
		}
	}
	st := g.Current().Flow.Stats(g.Now())
	if len(st) != 1 || st[0].Node.PassQps != 2 || st[0].Node.BlockQps != 0 {
		t.Errorf("stats %+v, want 2 passes and no block", st)
	}
}

// TestOneValueSources: origin.from and hashOn must give one value: several
// distinct ones are 400 before any guard counts the request; the same
// value twice is that value.
func TestOneValueSources(t *testing.T) {
	cfg, err := config.Parse("one.yaml", []byte(`
origin:
  from: header:X-Origin
upstreams:
  up:
    targets: ["http://a.invalid", "http://b.invalid"]
    balance: hash
    hashOn: query:user
routes:
  - path: /item/{id}
    upstream: up
    resource: item
flowRules:
  - resource: item
    limitApp: a
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
	for i, st := range []step{
		{target: "/item/x", lines: []string{"X-Origin", "a", "X-Origin", "b"}, status: 400},
		{target: "/item/x", lines: []string{"X-Origin", "b, a"}, status: 400},
		{target: "/item/x?user=1&user=2", lines: []string{"X-Origin", "a"}, status: 400},
		{target: "/item/x?user=1&user=1&user=", lines: []string{"X-Origin", "a", "X-Origin", "a"}, status: 200},
		{target: "/item/x", lines: []string{"X-Origin", "a"}, status: 429, reason: "flow"},
		{target: "/item/x", lines: []string{"X-Origin", ""}, status: 200},
	} {
		status, blocked := sendLines(g, st.target, st.lines...)
		if status != st.status || blocked != st.reason {
			t.Fatalf("step %d (%s %q): %d %q, want %d %q", i, st.target, st.lines, status, blocked, st.status, st.reason)
		}
	}
	if n := up.calls.Load(); n != 2 {
		t.Errorf("upstream got %d requests, want 2", n)
	}
}

// TestOnePeerOneKey: the TCP peer ::ffff:192.0.2.7 (an IPv4 client on a
// dual-stack listener) and 192.0.2.7 are one client to an `ip` rule, and so
// are the ways one IPv6 peer can be written; another client keeps its own
// bucket.
func TestOnePeerOneKey(t *testing.T) {
	g, _, _ := clockedGateway(t, `
paramRules:
  - resource: item
    param: ip
    count: 2
    durationSec: 60
`)
	for i, c := range []struct {
		remote string
		status int
	}{
		{"[::ffff:192.0.2.7]:40000", 200}, {"192.0.2.7:40001", 200}, {"[::ffff:c000:207]:40002", 429},
		{"[2001:db8::7]:1", 200}, {"[2001:DB8:0:0::7]:2", 200}, {"[2001:db8::0:7%eth0]:3", 429},
		{"192.0.2.8:1", 200},
	} {
		req := httptest.NewRequest("GET", "/item/x", nil)
		req.RemoteAddr = c.remote
		w := httptest.NewRecorder()
		g.ServeHTTP(w, req)
		if w.Code != c.status {
			t.Errorf("request %d from %s: %d, want %d", i, c.remote, w.Code, c.status)
		}
	}
}

// TestTooManyValuesDryRun: a dryRun param rule never changes what passes,
// 17 values of its source included; a real rule after it still blocks
// with 429, not 400.
func TestTooManyValuesDryRun(t *testing.T) {
	g, _, up := clockedGateway(t, `
paramRules:
  - resource: item
    param: query:id
    count: 1
    dryRun: true
  - resource: item
    param: header:X-Key
    count: 1
`)
	for i, st := range []step{
		{target: "/item/x?" + ids(17), lines: []string{"X-Key", "k"}, status: 200},
		{target: "/item/x?" + ids(17), lines: []string{"X-Key", "k"}, status: 429, reason: "param"},
	} {
		status, blocked := sendLines(g, st.target, st.lines...)
		if status != st.status || blocked != st.reason {
			t.Fatalf("step %d: %d %q, want %d %q", i, status, blocked, st.status, st.reason)
		}
	}
	if n := up.calls.Load(); n != 1 {
		t.Errorf("upstream got %d requests, want 1", n)
	}
}
