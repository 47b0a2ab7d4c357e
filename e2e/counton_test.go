package e2e

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Param rules that take their tokens after the answer (countOn), against
// the real binary, with every request counted at the upstream.

// passwords is an upstream login: 401 unless X-Password is "right"; it
// counts the attempts that reached it, by X-User.
type passwords struct{ userCounter }

func newPasswords() *passwords { return &passwords{userCounter{seen: map[string]int{}}} }

func (p *passwords) handle(w http.ResponseWriter, r *http.Request) {
	p.count(r)
	if r.Header.Get("X-Password") != "right" {
		w.WriteHeader(http.StatusUnauthorized)
		return
	}
	w.Write([]byte("welcome"))
}

// lockoutRules: three failed logins (401) per user per 10 minutes.
const lockoutRules = `
routes:
  - path: /login
    upstream: up
    resource: login
paramRules:
  - resource: login
    param: header:X-User
    count: 3
    durationSec: 600
    countOn: failure
    failureStatuses: [401]
`

// attempt logs in as user at url with password and returns the status.
func attempt(t *testing.T, url, user, password string) int {
	t.Helper()
	resp, _ := get(t, url+"/login", "X-User: "+user, "X-Password: "+password)
	return resp.StatusCode
}

// TestLockoutAfterFailedLogins: only failed logins count. Successful logins
// between the failures cost nothing; after the third failure the next
// attempt (even with the right password) is answered 429 without reaching
// the upstream; another user is not affected; DELETE /api/params lifts the
// lockout, and the next attempt reaches the upstream again.
func TestLockoutAfterFailedLogins(t *testing.T) {
	t.Parallel()
	pw := newPasswords()
	up := startUpstream(t, pw.handle)
	g := startGateway(t, rulesFor(up.URL, lockoutRules))
	for i, st := range []struct {
		password string
		want     int
	}{
		{"wrong", 401}, {"right", 200}, {"right", 200}, {"wrong", 401},
		{"right", 200}, {"right", 200}, {"right", 200}, {"wrong", 401}, // the third failure
		{"right", 429}, {"wrong", 429}, // locked out, whatever the password
	} {
		if got := attempt(t, g.URL, "mallory", st.password); got != st.want {
			t.Fatalf("attempt %d (%s password): %d, want %d", i, st.password, got, st.want)
		}
	}
	if n := pw.of("mallory"); n != 8 {
		t.Fatalf("the upstream saw %d of mallory's attempts, want 8 (the two locked out never reached it)", n)
	}
	if got := attempt(t, g.URL, "alice", "right"); got != 200 {
		t.Fatalf("alice, another user: %d, want 200", got)
	}

	code, body, _ := admDo(t, "DELETE", g.AdminURL+"/api/params?resource=login&value=mallory", "")
	if code != 200 {
		t.Fatalf("DELETE /api/params: %d %s", code, body)
	}
	if got := attempt(t, g.URL, "mallory", "right"); got != 200 {
		t.Fatalf("after the lift: %d, want 200", got)
	}
	if n := pw.of("mallory"); n != 9 {
		t.Fatalf("after the lift the upstream saw %d of mallory's attempts, want 9", n)
	}
	// Lifted, mallory has three failures again.
	for i, want := range []int{401, 401, 401, 429} {
		if got := attempt(t, g.URL, "mallory", "wrong"); got != want {
			t.Fatalf("after the lift, attempt %d: %d, want %d", i, got, want)
		}
	}
}

// costUpstream answers 200 with X-Tokens-Used: the ?cost= of the request
// ("" sends no such header), as a language model reports tokens used.
type costUpstream struct {
	mu    sync.Mutex
	calls map[string]int // by path
}

func (c *costUpstream) handle(w http.ResponseWriter, r *http.Request) {
	c.mu.Lock()
	c.calls[r.URL.Path]++
	c.mu.Unlock()
	if cost := r.URL.Query().Get("cost"); cost != "" {
		w.Header().Set("X-Tokens-Used", cost)
	}
	w.Write([]byte("completion"))
}

func (c *costUpstream) of(path string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.calls[path]
}

// TestResponseCostOverdraw: on both forwarders, a call is let in while its
// key has a token left and is charged the upstream's X-Tokens-Used after
// the answer: a call larger than what is left passes (overdraw), and the
// next one is blocked before the upstream, with Retry-After counting down
// the debt. The client never sees X-Tokens-Used. An answer without it (or
// with a malformed figure) costs acquireCount.
func TestResponseCostOverdraw(t *testing.T) {
	t.Parallel()
	cu := &costUpstream{calls: map[string]int{}}
	up := startUpstream(t, cu.handle)
	rules := "routes:\n"
	params := "paramRules:\n"
	for _, fwd := range []string{"fast", "standard"} {
		rules += fmt.Sprintf("  - { path: /%s, upstream: up, resource: %s, forwarder: %s }\n", fwd, fwd, fwd)
		// 1000 tokens per hour per key: 3.6 s a token.
		params += fmt.Sprintf("  - { resource: %s, param: \"header:X-Key\", count: 1000, durationSec: 3600, countOn: \"responseHeader:X-Tokens-Used\" }\n", fwd)
	}
	g := startGateway(t, rulesFor(up.URL, rules+params))
	for _, fwd := range []string{"fast", "standard"} {
		path := "/" + fwd
		for i, st := range []struct {
			cost string
			want int
		}{
			{"600", 200},
			{"", 200},    // no figure: 1 (acquireCount)
			{"-7", 200},  // malformed: 1
			{"abc", 200}, // malformed: 1
			{"900", 200}, // 397 left: passes, 503 in debt
			{"1", 429},
			{"", 429},
		} {
			resp, _ := get(t, g.URL+path+"?cost="+st.cost, "X-Key: k1")
			if resp.StatusCode != st.want {
				t.Fatalf("%s call %d (cost %q): %d, want %d", fwd, i, st.cost, resp.StatusCode, st.want)
			}
			if v, ok := resp.Header["X-Tokens-Used"]; ok {
				t.Fatalf("%s call %d: the client got X-Tokens-Used: %q", fwd, i, v)
			}
			if st.want == 429 {
				// The debt of 503 tokens and one more: 504 x 3.6 s.
				ra, err := strconv.Atoi(resp.Header.Get("Retry-After"))
				if err != nil || ra < 1800 || ra > 1816 {
					t.Fatalf("%s: Retry-After %q, want about 1814 s (the debt paid, then a token)", fwd, resp.Header.Get("Retry-After"))
				}
			}
		}
		if n := cu.of(path); n != 5 {
			t.Fatalf("%s: the upstream saw %d calls, want 5 (the blocked never reached it)", fwd, n)
		}
		if resp, _ := get(t, g.URL+path+"?cost=5", "X-Key: k2"); resp.StatusCode != 200 {
			t.Fatalf("%s: another key: %d, want 200", fwd, resp.StatusCode)
		}
	}
}

// TestLockoutAcrossTwoGateways: a clusterMode lockout counts a user's
// failures on every gateway of the namespace: two failures on one and one
// on the other lock the user out on both, before the upstream. Both show
// the user with nothing left (read from Redis); a DELETE /api/params on
// one lifts the lockout on both (the other within a heartbeat).
func TestLockoutAcrossTwoGateways(t *testing.T) {
	rd := clStartRedis(t)
	pw := newPasswords()
	up := startUpstream(t, pw.handle)
	gs := clStartGateways(t, 2, rulesFor(up.URL, lockoutRules+fmt.Sprintf(`    clusterMode: true
cluster:
  redis: %s
  namespace: %s
`, rd.url(), clNamespace(t))))
	for i, st := range []struct {
		gw       int
		password string
		want     int
	}{
		{0, "wrong", 401}, {1, "right", 200}, {0, "wrong", 401}, {0, "right", 200},
		{1, "wrong", 401}, // the third failure, on the other gateway
		{0, "right", 429}, {1, "right", 429},
	} {
		if got := attempt(t, gs[st.gw].URL, "mallory", st.password); got != st.want {
			t.Fatalf("attempt %d on gateway %d (%s password): %d, want %d", i, st.gw, st.password, got, st.want)
		}
	}
	if n := pw.of("mallory"); n != 5 {
		t.Fatalf("the upstream saw %d of mallory's attempts, want 5", n)
	}
	for i, g := range gs {
		if p := getParams(t, g, "resource=login&value=mallory").Rules[0].Values[0]; p.Remaining != 0 {
			t.Errorf("gateway %d's peek at mallory: %+v, want nothing left", i, p)
		}
	}
	if code, body, _ := admDo(t, "DELETE", gs[0].AdminURL+"/api/params?resource=login&value=mallory", ""); code != 200 {
		t.Fatalf("DELETE /api/params on gateway 0: %d %s", code, body)
	}
	if got := attempt(t, gs[0].URL, "mallory", "right"); got != 200 {
		t.Fatalf("after the lift, gateway 0: %d, want 200", got)
	}
	// Gateway 1 noted the window full; its heartbeat (1 s) reads the lift.
	deadline := time.Now().Add(5 * time.Second)
	for attempt(t, gs[1].URL, "mallory", "right") != 200 {
		if time.Now().After(deadline) {
			t.Fatal("gateway 1 still locks mallory out 5 s after the lift")
		}
		time.Sleep(100 * time.Millisecond)
	}
	if n := pw.of("mallory"); n != 7 {
		t.Fatalf("after the lift the upstream saw %d of mallory's attempts, want 7", n)
	}
}

// TestMonthlyTokenQuotaAcrossTwoGateways: a month's tokens per key, counted
// from the upstream's X-Tokens-Used (window month with countOn
// responseHeader) on two gateways sharing a Redis. The calls pass while the
// key has a token left this month, whichever gateway takes them, and the
// last one overdraws. Then both gateways refuse the key before the
// upstream, with Retry-After the seconds to the 1st (UTC). Another key is
// not affected; the client never sees X-Tokens-Used; both gateways' peeks
// read nothing left; a DELETE /api/params on one lifts the key on both.
func TestMonthlyTokenQuotaAcrossTwoGateways(t *testing.T) {
	now := time.Now().UTC()
	first := time.Date(now.Year(), now.Month()+1, 1, 0, 0, 0, 0, time.UTC)
	if time.Until(first) < 2*time.Minute {
		t.Skip("within two minutes of the 1st (UTC): the quota would reset during the test")
	}
	rd := clStartRedis(t)
	cu := &costUpstream{calls: map[string]int{}}
	up := startUpstream(t, cu.handle)
	gs := clStartGateways(t, 2, rulesFor(up.URL, fmt.Sprintf(`
routes:
  - path: /v1/complete
    upstream: up
    resource: llm
paramRules:
  - resource: llm
    param: header:X-Key
    count: 1000
    window: month
    timezone: UTC
    clusterMode: true
    countOn: "responseHeader:X-Tokens-Used"
cluster:
  redis: %s
  namespace: %s
`, rd.url(), clNamespace(t))))
	call := func(gw int, key, cost string, want int) *http.Response {
		t.Helper()
		resp, _ := get(t, gs[gw].URL+"/v1/complete?cost="+cost, "X-Key: "+key)
		if resp.StatusCode != want {
			t.Fatalf("gateway %d, key %s, cost %q: %d, want %d", gw, key, cost, resp.StatusCode, want)
		}
		if v, ok := resp.Header["X-Tokens-Used"]; ok {
			t.Fatalf("gateway %d: the client got X-Tokens-Used: %q", gw, v)
		}
		return resp
	}
	// The RateLimit fields give the month: q and w, and r what the month
	// had left when the call was let in, less the token it holds while in
	// flight (its cost is known only after).
	month := int64(first.Sub(time.Date(now.Year(), now.Month(), 1, 0, 0, 0, 0, time.UTC)) / time.Second)
	for i, st := range []struct {
		gw    int
		cost  string
		wantR int64
	}{{gw: 0, cost: "600", wantR: 999}, {gw: 1, cost: "300", wantR: 399}} {
		resp := call(st.gw, "k1", st.cost, 200)
		policies, err := parseSFList(resp.Header.Values("RateLimit-Policy"))
		if err != nil || len(policies) != 1 || policies[0].param("q") != int64(1000) || policies[0].param("w") != month {
			t.Errorf("call %d: RateLimit-Policy %q, want q=1000 w=%d (the month's length)", i, resp.Header.Values("RateLimit-Policy"), month)
		}
		limits, err := parseSFList(resp.Header.Values("RateLimit"))
		if err != nil || len(limits) != 1 || limits[0].param("r") != st.wantR {
			t.Errorf("call %d: RateLimit %q, want r=%d", i, resp.Header.Values("RateLimit"), st.wantR)
		}
	}
	call(1, "k1", "", 200)    // no figure: acquireCount (1); 99 left
	call(0, "k1", "500", 200) // overdraws: 1401 of 1000
	for gw := range gs {
		resp := call(gw, "k1", "1", 429)
		ra, err := strconv.ParseInt(resp.Header.Get("Retry-After"), 10, 64)
		want := int64(time.Until(first).Seconds())
		if err != nil || ra < want-3 || ra > want+3 {
			t.Errorf("gateway %d: Retry-After %q, want about %d (seconds to the 1st, UTC)", gw, resp.Header.Get("Retry-After"), want)
		}
	}
	if n := cu.of("/v1/complete"); n != 4 {
		t.Fatalf("the upstream saw %d calls, want 4 (the refused never reached it)", n)
	}
	call(1, "k2", "5", 200)
	for i, g := range gs {
		if p := getParams(t, g, "resource=llm&value=k1").Rules[0].Values[0]; p.Remaining != 0 {
			t.Errorf("gateway %d's peek at k1: %+v, want nothing left", i, p)
		}
	}
	if code, body, _ := admDo(t, "DELETE", gs[0].AdminURL+"/api/params?resource=llm&value=k1", ""); code != 200 {
		t.Fatalf("DELETE /api/params on gateway 0: %d %s", code, body)
	}
	call(0, "k1", "10", 200)
	// Gateway 1 noted the key refused; its heartbeat (1 s) reads the lift.
	deadline := time.Now().Add(5 * time.Second)
	for {
		resp, _ := get(t, gs[1].URL+"/v1/complete?cost=10", "X-Key: k1")
		if resp.StatusCode == 200 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("gateway 1 still refuses k1 5 s after the lift: %d", resp.StatusCode)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if p := getParams(t, gs[0], "resource=llm&value=k1").Rules[0].Values[0]; p.Remaining != 980 {
		t.Errorf("after the lift and two calls of 10: %+v, want 980 left", p)
	}
}

// TestParallelGuessesAcrossTwoGateways: 20 wrong passwords for one user
// sent at once, half to each of two gateways sharing a Redis, against a
// lockout of 3 failures: each guess holds its place in the fleet's window
// while it is in flight (the upstream answers after 300 ms), so 3 reach
// the upstream and 17 are refused at once. Let in on a look at the window,
// all 20 reached it before the first failure counted. The same with a
// lockout per calendar day, whose guesses were also let in on a look.
func TestParallelGuessesAcrossTwoGateways(t *testing.T) {
	for _, window := range []string{"rolling", "day"} {
		t.Run(window, func(t *testing.T) { parallelGuesses(t, window) })
	}
}

// parallelGuesses sends 20 wrong guesses at once through two gateways
// against the lockout of 3 failures, on a rolling window of 10 minutes or a
// calendar day.
func parallelGuesses(t *testing.T, window string) {
	rules := lockoutRules
	if window != "rolling" {
		rules = strings.Replace(rules, "    durationSec: 600\n", "    window: "+window+"\n", 1)
	}
	rd := clStartRedis(t)
	pw := newPasswords()
	up := startUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(300 * time.Millisecond)
		pw.handle(w, r)
	})
	gs := clStartGateways(t, 2, rulesFor(up.URL, rules+fmt.Sprintf(`    clusterMode: true
cluster:
  redis: %s
  namespace: %s
  timeout: 250ms # exact counts: a busy machine's late answer would go to the fallback (cluster.timeout)
`, rd.url(), clNamespace(t))))
	var wg sync.WaitGroup
	codes := make([]int, 20)
	for i := range codes {
		wg.Go(func() { codes[i] = attempt(t, gs[i%2].URL, "mallory", "wrong") })
	}
	wg.Wait()
	refused := 0
	for _, c := range codes {
		if c == 429 {
			refused++
		}
	}
	if n := pw.of("mallory"); n > 3 || refused != 20-n {
		clLateAnswersSkip(t, gs) // a guess the fallback decided: the machine's count
		t.Fatalf("the upstream saw %d of 20 guesses sent at once (want at most 3), %d refused; codes %v", n, refused, codes)
	}
}

// TestCalendarLockoutAcrossTwoGateways: a lockout of 3 failed logins per
// calendar day across two gateways. Each guess holds its place in the
// day's count while in flight; a success gives it back at once, so
// successes between failures, on either gateway, cost nothing; the third
// failure locks the user out on both.
func TestCalendarLockoutAcrossTwoGateways(t *testing.T) {
	rd := clStartRedis(t)
	pw := newPasswords()
	up := startUpstream(t, pw.handle)
	rules := strings.Replace(lockoutRules, "    durationSec: 600\n", "    window: day\n", 1)
	gs := clStartGateways(t, 2, rulesFor(up.URL, rules+fmt.Sprintf(`    clusterMode: true
cluster:
  redis: %s
  namespace: %s
`, rd.url(), clNamespace(t))))
	for i, st := range []struct {
		gw       int
		password string
		want     int
	}{
		{0, "wrong", 401}, {1, "right", 200}, {0, "right", 200}, {1, "right", 200}, {0, "wrong", 401},
		{1, "right", 200}, {1, "wrong", 401}, // the third failure, on the other gateway
		{0, "right", 429}, {1, "right", 429},
	} {
		if got := attempt(t, gs[st.gw].URL, "mallory", st.password); got != st.want {
			t.Fatalf("attempt %d on gateway %d (%s password): %d, want %d", i, st.gw, st.password, got, st.want)
		}
	}
	if n := pw.of("mallory"); n != 7 {
		t.Fatalf("the upstream saw %d of mallory's attempts, want 7", n)
	}
}
