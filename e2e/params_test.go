package e2e

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"
)

// /api/params against the real binary: who is being limited now, a peek
// that takes no token, and lifting a value.

// loginRules: 2 logins per 10 minutes per X-User, on /login: no token comes back while a test runs.
const loginRules = `
routes:
  - path: /login
    upstream: up
    resource: login
paramRules:
  - resource: login
    param: header:X-User
    count: 2
    durationSec: 600
`

// userCounter is an upstream that counts the requests of each X-User.
type userCounter struct {
	mu   sync.Mutex
	seen map[string]int
}

func (u *userCounter) handle(w http.ResponseWriter, r *http.Request) {
	u.count(r)
	w.Write([]byte("ok"))
}

// count counts r for its X-User.
func (u *userCounter) count(r *http.Request) {
	u.mu.Lock()
	u.seen[r.Header.Get("X-User")]++
	u.mu.Unlock()
}

func (u *userCounter) of(user string) int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.seen[user]
}

// login sends calls logins as user and returns how many passed (200);
// every other answer must be 429.
func login(t *testing.T, g *gateway, user string, calls int) int {
	t.Helper()
	passed := 0
	for range calls {
		resp, _ := get(t, g.URL+"/login", "X-User: "+user)
		switch resp.StatusCode {
		case 200:
			passed++
		case 429:
		default:
			t.Fatalf("login as %q: %d", user, resp.StatusCode)
		}
	}
	return passed
}

type paramsAnswer struct {
	Rules []struct {
		Config  struct{ Count float64 } `json:"config"`
		Tracked int                     `json:"tracked"`
		Values  []struct {
			Value     string  `json:"value"`
			Tracked   bool    `json:"tracked"`
			Passes    float64 `json:"passes"`
			Blocks    float64 `json:"blocks"`
			Remaining float64 `json:"remaining"`
			NextToken float64 `json:"nextTokenSec"`
		} `json:"values"`
	} `json:"rules"`
}

func getParams(t *testing.T, g *gateway, query string) paramsAnswer {
	t.Helper()
	code, body, _ := admDo(t, "GET", g.AdminURL+"/api/params?"+query, "")
	if code != 200 {
		t.Fatalf("GET /api/params?%s: %d %s", query, code, body)
	}
	var a paramsAnswer
	if err := json.Unmarshal([]byte(body), &a); err != nil || len(a.Rules) != 1 {
		t.Fatalf("GET /api/params?%s: %v: %s", query, err, body)
	}
	return a
}

// TestParamsWhoIsLimited: after floods of blocks for three users, the top
// list names them by blocks, most first, with their passes; a value peeked
// at many times still gets its full count; DELETE lifts a blocked user,
// whose next login passes and reaches the upstream.
func TestParamsWhoIsLimited(t *testing.T) {
	t.Parallel()
	uc := &userCounter{seen: map[string]int{}}
	up := startUpstream(t, uc.handle)
	g := startGateway(t, rulesFor(up.URL, loginRules))
	for user, calls := range map[string]int{"mallory": 14, "trudy": 9, "eve": 5, "alice": 1} {
		if got := login(t, g, user, calls); got != min(calls, 2) {
			t.Fatalf("%s: %d of %d logins passed, want %d", user, got, calls, min(calls, 2))
		}
	}
	// Passes and blocks are of the last minute, estimated from two
	// buckets of a minute (internal/ring.Coarse): should a bucket end
	// between the floods and the look, the older one weighs a little less.
	top := getParams(t, g, "resource=login").Rules[0]
	want := []struct {
		user           string
		passes, blocks float64
	}{{"mallory", 2, 12}, {"trudy", 2, 7}, {"eve", 2, 3}}
	if len(top.Values) != len(want) || top.Tracked != 4 {
		t.Fatalf("top list: %+v, want %v (alice, never blocked, is not in it); tracked %d, want 4", top.Values, want, top.Tracked)
	}
	for i, w := range want {
		v := top.Values[i]
		if v.Value != w.user || v.Passes != w.passes || v.Blocks < w.blocks-1 || v.Blocks > w.blocks || v.Remaining != 0 || v.NextToken <= 0 || v.NextToken > 300 {
			t.Errorf("top %d: %+v, want %s with %v passes, %v blocks, nothing left and the next token within 300 s", i, v, w.user, w.passes, w.blocks)
		}
	}

	// A peek takes no token: 50 peeks, then the user still gets 2 logins.
	for range 50 {
		p := getParams(t, g, "resource=login&value=bob&value=mallory").Rules[0].Values
		if len(p) != 2 || p[0].Tracked || p[0].Remaining != 2 || p[1].Remaining != 0 || p[1].Blocks < 11 {
			t.Fatalf("peek: %+v", p)
		}
	}
	if got := login(t, g, "bob", 3); got != 2 {
		t.Fatalf("after 50 peeks bob passed %d of 3 logins, want 2 (the full count)", got)
	}

	// The lift: mallory's next login passes and reaches the upstream.
	before := uc.of("mallory")
	code, body, _ := admDo(t, "DELETE", g.AdminURL+"/api/params?resource=login&value=mallory", "")
	if code != 200 {
		t.Fatalf("DELETE: %d %s", code, body)
	}
	if got := login(t, g, "mallory", 3); got != 2 || uc.of("mallory") != before+2 {
		t.Errorf("after the lift mallory passed %d of 3 (want 2), the upstream saw %d more (want 2)", got, uc.of("mallory")-before)
	}
	if got := login(t, g, "trudy", 1); got != 0 {
		t.Error("lifting mallory lifted trudy too")
	}
	if ev := g.logs.Events("admin: param value lifted"); len(ev) != 1 || ev[0]["value"] != "mallory" || ev[0]["resource"] != "login" {
		t.Errorf("lift log events: %v", ev)
	}
	for q, want := range map[string]int{"resource=nope&value=x": 404, "resource=login": 400} {
		if code, body, _ := admDo(t, "DELETE", g.AdminURL+"/api/params?"+q, ""); code != want {
			t.Errorf("DELETE ?%s: %d, want %d: %s", q, code, want, body)
		}
	}
}

// TestParamsLiftFromAnotherMachine: without admin.token, a DELETE from a
// peer that is not on loopback is refused and lifts nothing; from loopback
// it lifts. A value with bytes a header can carry but HTML must not see
// is listed and lifted by its exact bytes.
func TestParamsLiftFromAnotherMachine(t *testing.T) {
	t.Parallel()
	others := otherAddrs(t)
	uc := &userCounter{seen: map[string]int{}}
	up := startUpstream(t, uc.handle)
	g := startGateway(t, rulesFor(up.URL, loginRules), "-admin", "0.0.0.0:0")
	_, port, err := net.SplitHostPort(strings.TrimPrefix(g.AdminURL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	user := `<b>"x"</b>&amp;`
	login(t, g, user, 5)
	lift := "/api/params?resource=login&value=" + url.QueryEscape(user)
	for _, a := range others {
		remote := "http://" + net.JoinHostPort(a.String(), port)
		if code, body, _ := admDo(t, "DELETE", remote+lift, ""); code != 403 {
			t.Errorf("DELETE from %s without a token: %d, want 403: %s", a, code, body)
		}
		if code, body, _ := admDo(t, "GET", remote+"/api/params?resource=login", ""); code != 200 || strings.Contains(body, "<b>") {
			t.Errorf("GET from %s: %d, want 200 with the value escaped: %s", a, code, body)
		}
	}
	if got := login(t, g, user, 1); got != 0 {
		t.Fatal("a refused DELETE lifted the value")
	}
	if top := getParams(t, g, "resource=login").Rules[0].Values; len(top) != 1 || top[0].Value != user {
		t.Fatalf("top list: %+v", top)
	}
	if code, body, _ := admDo(t, "DELETE", "http://127.0.0.1:"+port+lift, ""); code != 200 {
		t.Fatalf("DELETE from loopback: %d %s", code, body)
	}
	if got := login(t, g, user, 1); got != 1 || uc.of(user) != 3 {
		t.Errorf("after the lift: %d passed, the upstream saw %d of the user's logins; want 1 and 3", got, uc.of(user))
	}
}

// TestParamsClusterLift: a clusterMode login rule on two gateways sharing a
// namespace on the shared Redis. A user locked out through gateway 0 shows
// no token left on gateway 1 too (its figures are read from Redis, without
// taking a token); a DELETE on gateway 0 lifts the user on both: gateway 1,
// which had refused the user (and noted the window full), passes the next
// login within a heartbeat, and the upstream sees it.
func TestParamsClusterLift(t *testing.T) {
	redisURL := clRedisURL(t)
	uc := &userCounter{seen: map[string]int{}}
	up := startUpstream(t, uc.handle)
	gs := clStartGateways(t, 2, rulesFor(up.URL, loginRules+fmt.Sprintf(`    clusterMode: true
cluster:
  redis: %s
  namespace: %s
`, redisURL, clNamespace(t))))
	if got := login(t, gs[0], "mallory", 2) + login(t, gs[1], "mallory", 2) + login(t, gs[0], "mallory", 1); got != 2 {
		t.Fatalf("%d of 5 logins passed across two gateways, want 2 (the cluster's count)", got)
	}
	for i, g := range gs {
		p := getParams(t, g, "resource=login&value=mallory&value=bob").Rules[0].Values
		if len(p) != 2 || p[0].Remaining != 0 || p[0].NextToken <= 500 || p[1].Remaining != 2 {
			t.Errorf("gateway %d's peek: %+v; want mallory with nothing left for ~600 s, bob with 2", i, p)
		}
	}
	before := uc.of("mallory")
	if code, body, _ := admDo(t, "DELETE", gs[0].AdminURL+"/api/params?resource=login&value=mallory", ""); code != 200 {
		t.Fatalf("DELETE: %d %s", code, body)
	}
	// Gateway 1 noted the window full; its heartbeat (1 s) reads the lift.
	deadline := time.Now().Add(5 * time.Second)
	for login(t, gs[1], "mallory", 1) != 1 {
		if time.Now().After(deadline) {
			t.Fatal("gateway 1 still refuses mallory 5 s after the lift")
		}
		time.Sleep(100 * time.Millisecond)
	}
	if got := login(t, gs[0], "mallory", 2); got != 1 || uc.of("mallory") != before+2 {
		t.Errorf("after the lift: %d of 2 more passed on gateway 0 (want 1: the count is 2), the upstream saw %d (want 2)", got, uc.of("mallory")-before)
	}
}

// TestParamsCredentialShownWithTheToken: the top list of a rule on an API
// key shows each key only to a reader with the admin token (reads are open
// to any peer that reaches the listener); without it, the value is its pk,
// the very pk the client's RateLimit-Policy carries, so an operator can
// still tell which caller is limited.
func TestParamsCredentialShownWithTheToken(t *testing.T) {
	t.Parallel()
	up := startUpstream(t, func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("ok")) })
	g := startGateway(t, rulesFor(up.URL, `
admin:
  token: s3cret
routes:
  - { path: /v1/*, upstream: up, resource: api }
paramRules:
  - { resource: api, param: "header:X-Api-Key", count: 2, durationSec: 600 }
`))
	const key = "sk-live-4f9c2a"
	var pk string
	for i := range 3 {
		resp, _ := get(t, g.URL+"/v1/chat", "X-Api-Key: "+key)
		if want := map[bool]int{true: 429, false: 200}[i == 2]; resp.StatusCode != want {
			t.Fatalf("call %d: %d, want %d", i, resp.StatusCode, want)
		}
		_, rest, ok := strings.Cut(resp.Header.Get("RateLimit-Policy"), ";pk=:")
		if !ok {
			t.Fatalf("call %d: RateLimit-Policy %q has no pk", i, resp.Header.Get("RateLimit-Policy"))
		}
		pk, _, _ = strings.Cut(rest, ":")
	}
	read := func(hdr ...string) (masked bool, value, gotPK, body string) {
		t.Helper()
		code, body, _ := admDo(t, "GET", g.AdminURL+"/api/params?resource=api", "", hdr...)
		var a struct {
			Rules []struct {
				Masked bool `json:"masked"`
				Values []struct{ Value, PK string }
			}
		}
		if err := json.Unmarshal([]byte(body), &a); code != 200 || err != nil || len(a.Rules) != 1 || len(a.Rules[0].Values) != 1 {
			t.Fatalf("GET /api/params: %d %v %s", code, err, body)
		}
		return a.Rules[0].Masked, a.Rules[0].Values[0].Value, a.Rules[0].Values[0].PK, body
	}
	if masked, value, got, body := read(); !masked || value != "" || got != pk || strings.Contains(body, key) {
		t.Errorf("without the token: masked %v, value %q, pk %q (the client's: %q); the body must not hold the key: %s", masked, value, got, pk, body)
	}
	if masked, value, got, _ := read("Authorization: Bearer s3cret"); masked || value != key || got != pk {
		t.Errorf("with the token: masked %v, value %q, pk %q; want the key and the client's pk %q", masked, value, got, pk)
	}
}
