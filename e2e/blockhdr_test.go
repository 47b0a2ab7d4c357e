package e2e

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// noRedirects is a client that shows a redirect instead of following it.
var noRedirects = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

// TestBodyCapAndBlockAnswers runs the real binary: a route's own
// blockResponse answers differently from the top-level one, a redirect
// route answers 302 with Location; a body whose Content-Length is over
// maxBodyBytes is answered 413 with nothing sent upstream, and a chunked
// one over it is cut (the upstream got at most the cap) and answered 413;
// both are counted in sluice_body_too_large_total.
func TestBodyCapAndBlockAnswers(t *testing.T) {
	// Not parallel: a body cut at the cap is answered 413 while the client
	// still writes it, and Go's client reports the 413 only if it arrives
	// soon after its write fails.
	var (
		mu       sync.Mutex
		requests int
		bytes    int64
	)
	up := startUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		n, _ := io.Copy(io.Discard, r.Body)
		mu.Lock()
		requests++
		bytes += n
		mu.Unlock()
		io.WriteString(w, "ok")
	})
	atUpstream := func() (int, int64) {
		mu.Lock()
		defer mu.Unlock()
		return requests, bytes
	}
	g := startGateway(t, rulesFor(up.URL, `
server:
  maxBodyBytes: 64
routes:
  - path: /upload
    upstream: up
  - path: /top
    upstream: up
  - path: /own
    upstream: up
    blockResponse: { status: 503, contentType: text/plain, body: "busy: {{.Resource}}" }
  - path: /away
    upstream: up
    blockResponse: { redirect: "https://status.example.com/down" }
flowRules:
  - { resource: /top, count: 1, statIntervalMs: 60000 }
  - { resource: /own, count: 1, statIntervalMs: 60000 }
  - { resource: /away, count: 1, statIntervalMs: 60000 }
`))

	// Block answers: the first call of each passes, the second is blocked.
	answers := []struct {
		path                        string
		status                      int
		contentType, body, location string
	}{
		{"/top", 429, "application/json", `{"error":"blocked","resource":"/top","reason":"flow"}`, ""},
		{"/own", 503, "text/plain", "busy: /own", ""},
		{"/away", 302, "", "", "https://status.example.com/down"},
	}
	for _, a := range answers {
		for i := range 2 {
			resp, err := noRedirects.Get(g.URL + a.path)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if i == 0 {
				if resp.StatusCode != 200 {
					t.Fatalf("%s: first call %d, want 200", a.path, resp.StatusCode)
				}
				continue
			}
			h := resp.Header
			if resp.StatusCode != a.status || h.Get("Content-Type") != a.contentType || string(body) != a.body || h.Get("Location") != a.location {
				t.Errorf("%s blocked: %d %q %q Location %q; want %d %q %q Location %q", a.path, resp.StatusCode,
					h.Get("Content-Type"), body, h.Get("Location"), a.status, a.contentType, a.body, a.location)
			}
		}
	}

	// Content-Length over the cap: 413, and the upstream sees nothing.
	reqs0, bytes0 := atUpstream()
	resp, err := http.Post(g.URL+"/upload", "text/plain", strings.NewReader(strings.Repeat("x", 1000)))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 413 || strings.TrimSpace(string(body)) != `{"error":"request body too large"}` {
		t.Errorf("Content-Length 1000 over 64: %d %q, want 413", resp.StatusCode, body)
	}
	if reqs, n := atUpstream(); reqs != reqs0 || n != bytes0 {
		t.Errorf("Content-Length over the cap: the upstream got %d requests, %d bytes; want none", reqs-reqs0, n-bytes0)
	}

	// Chunked (no length) over the cap: cut at the cap, 413. Sent raw, as
	// the answer comes while the body is still being written: Go's client
	// drops that answer when the gateway hangs up before the last write
	// (a reset on a busy machine).
	raw := fmt.Sprintf("POST /upload HTTP/1.1\r\nHost: x\r\nContent-Type: text/plain\r\nTransfer-Encoding: chunked\r\n\r\n%x\r\n%s\r\n0\r\n\r\n",
		100000, strings.Repeat("y", 100000))
	if resp, _, err := hdRaw(t, hdAddr(g.URL), raw); err != nil || resp.StatusCode != 413 {
		t.Errorf("chunked body of 100000 over 64: %v %v, want 413", resp, err)
	}
	// Within the cap: passes whole (and, being answered after the cut
	// request's upstream call ended, orders the count below after it).
	resp, err = http.Post(g.URL+"/upload", "text/plain", strings.NewReader(strings.Repeat("z", 64)))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("64 bytes within the cap: %d, want 200", resp.StatusCode)
	}
	// Every upstream call begun (the harness counts them) has ended (counted here).
	poll(t, 5*time.Second, "the upstream's calls ended", func() bool {
		begun, _ := up.stats()
		ended, _ := atUpstream()
		return int64(ended) == begun
	})
	if _, n := atUpstream(); n-bytes0 < 64 || n-bytes0 > 128 {
		t.Errorf("the upstream got %d bytes since the cut body, want the 64 passed and at most 64 of the cut body", n-bytes0)
	}
	if got := metric(t, g, `sluice_body_too_large_total{resource="/upload"}`); got != "2" {
		t.Errorf("sluice_body_too_large_total{resource=\"/upload\"} = %q, want 2", got)
	}
}

// TestRateLimitPolicies: a route counted by two flow rules and a param
// rule lists one policy per rule in RateLimit-Policy, each named by the
// resource and a suffix, the param rule's with its value's partition key
// (a 12-byte hash, never the value); RateLimit names the one nearest to
// blocking, and the X-RateLimit-* fields repeat it. Both fields are read
// with the test's strict RFC 8941 parser.
func TestRateLimitPolicies(t *testing.T) {
	up := startUpstream(t, nil)
	g := startGateway(t, rulesFor(up.URL, `
routes:
  - path: /api/{key}
    upstream: up
    resource: api
    blockResponse: { legacyHeaders: true }
flowRules:
  - { resource: api, count: 100, statIntervalMs: 60000 }
  - { resource: api, count: 5, statIntervalMs: 10000 }
paramRules:
  - { resource: api, param: path:key, count: 3, durationSec: 60 }
`))
	pks := map[string]string{}
	steps := []struct {
		key              string
		status           int
		near             string // the policy RateLimit names: the fewest remaining
		remaining, limit int64
	}{
		// r after each call: flow1 99..95, flow2 4..0, param k1 2..0, k2 2..1.
		{"k1", 200, "api#param1", 2, 3},
		{"k1", 200, "api#param1", 1, 3},
		{"k1", 200, "api#param1", 0, 3},
		{"k2", 200, "api#flow2", 1, 5},
		{"k2", 200, "api#flow2", 0, 5},
		{"k3", 429, "api#flow2", 0, 5}, // flow2 blocks
	}
	for i, st := range steps {
		resp, _ := get(t, g.URL+"/api/"+st.key)
		h := resp.Header
		if resp.StatusCode != st.status {
			t.Fatalf("step %d (%s): %d, want %d", i, st.key, resp.StatusCode, st.status)
		}
		policies, err := parseSFList(h.Values("RateLimit-Policy"))
		if err != nil {
			t.Fatalf("step %d: RateLimit-Policy %q: %v", i, h.Values("RateLimit-Policy"), err)
		}
		limits, err := parseSFList(h.Values("RateLimit"))
		if err != nil || len(limits) != 1 {
			t.Fatalf("step %d: RateLimit %q: %v, want one item", i, h.Values("RateLimit"), err)
		}
		// Passes list every policy; a block lists those met up to the blocker.
		want := map[string][2]int64{"api#flow1": {100, 60}, "api#flow2": {5, 10}, "api#param1": {3, 60}}
		if st.status == 429 {
			want = map[string][2]int64{"api#flow1": {100, 60}, "api#flow2": {5, 10}}
		}
		if len(policies) != len(want) {
			t.Errorf("step %d: RateLimit-Policy %q: %d items, want %d", i, h.Values("RateLimit-Policy"), len(policies), len(want))
		}
		for _, p := range policies {
			name, _ := p.value.(string)
			w, ok := want[name]
			if !ok || p.param("q") != w[0] || p.param("w") != w[1] {
				t.Errorf("step %d: policy %q q=%v w=%v, want one of %v", i, name, p.param("q"), p.param("w"), want)
			}
			pk, hasPK := p.param("pk").([]byte)
			if hasPK != (name == "api#param1") {
				t.Errorf("step %d: policy %q pk %v, want a pk on the param rule only", i, name, p.param("pk"))
			}
			if hasPK {
				if len(pk) != 12 || strings.Contains(string(pk), st.key) {
					t.Errorf("step %d: pk %x, want 12 bytes of hash, not the value %q", i, pk, st.key)
				}
				if prev, seen := pks[st.key]; seen && prev != string(pk) {
					t.Errorf("step %d: value %s has pk %x, earlier %x: want one key per value", i, st.key, pk, prev)
				}
				pks[st.key] = string(pk)
			}
		}
		rl := limits[0]
		if name, _ := rl.value.(string); name != st.near || rl.param("r") != st.remaining {
			t.Errorf("step %d: RateLimit %q, want %s with r=%d", i, h.Values("RateLimit"), st.near, st.remaining)
		}
		if pk, ok := rl.param("pk").([]byte); ok != (st.near == "api#param1") || (ok && string(pk) != pks[st.key]) {
			t.Errorf("step %d: RateLimit pk %x, want the value's pk on a param policy only", i, pk)
		}
		tsec, _ := rl.param("t").(int64)
		legacy := [3]string{h.Get("X-RateLimit-Limit"), h.Get("X-RateLimit-Remaining"), h.Get("X-RateLimit-Reset")}
		if want := [3]string{fmt.Sprint(st.limit), fmt.Sprint(st.remaining), fmt.Sprint(tsec)}; legacy != want {
			t.Errorf("step %d: X-RateLimit-Limit/-Remaining/-Reset %q, want %q (the policy RateLimit names)", i, legacy, want)
		}
	}
	if pks["k1"] == pks["k2"] {
		t.Errorf("values k1 and k2 have the same pk %x", pks["k1"])
	}
}
