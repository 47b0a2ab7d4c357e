package e2e

import (
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// Param match strategies and composite keys (SPEC §3 Sources: Composite
// keys, Match strategies) against the real binary, counted at the upstream.

const pmRules = `
routes:
  - path: /m
    upstream: up
    resource: m
  - path: /c
    upstream: up
    resource: c
  - path: /t
    upstream: up
    resource: t
paramRules:
  - resource: m
    param: query:user
    match: { strategy: prefix, pattern: "vip-" }
    count: 2
    durationSec: 3600
  - resource: c
    param: header:X-Client
    count: 1
    durationSec: 3600
    items:
      - { value: "10.1.0.0/16", match: cidr, count: 3 }
      - { value: "^bot-[0-9]+$", match: regex, count: 0 }
  - resource: t
    param: ip+header:X-Tenant
    count: 2
    durationSec: 3600
`

// TestParamMatchAndCompositeKeys: a prefix match limits only the values
// that match it (each on its own); items with a cidr and a regex give their
// count to each value they match; a composite key ip+header:X-Tenant gives
// each tenant of one client its own bucket, and a request without a tenant
// is not limited. Every count is what reached the upstream.
func TestParamMatchAndCompositeKeys(t *testing.T) {
	var mu sync.Mutex
	seen := map[string]int{} // path + " " + the value the rule reads
	up := startUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		seen[r.URL.Path+" "+r.URL.Query().Get("user")+r.Header.Get("X-Client")+r.Header.Get("X-Tenant")]++
	})
	g := startGateway(t, rulesFor(up.URL, pmRules))
	send := func(path, hdr, value string, n int) {
		for range n {
			var lines []string
			if hdr != "" && value != "" {
				lines = []string{hdr, value}
			}
			target := g.URL + path
			if hdr == "" {
				target += "?user=" + value
			}
			if status := svGet(t, target, lines...); status != 200 && status != 429 {
				t.Fatalf("%s %s=%s: %d, want 200 or 429", path, hdr, value, status)
			}
		}
	}
	for _, v := range []string{"vip-1", "vip-2", "std-1", "xvip-1"} {
		send("/m", "", v, 5)
	}
	for _, v := range []string{"10.1.2.3", "10.1.2.4", "10.2.0.1", "bot-7", "human"} {
		send("/c", "X-Client", v, 5)
	}
	for _, v := range []string{"acme", "beta", ""} {
		send("/t", "X-Tenant", v, 5)
	}
	want := map[string]int{
		"/m vip-1": 2, "/m vip-2": 2, "/m std-1": 5, "/m xvip-1": 5, // only vip-* limited, each on its own
		"/c 10.1.2.3": 3, "/c 10.1.2.4": 3, "/c 10.2.0.1": 1, "/c human": 1, // cidr item 3 each, else count 1
		"/t acme": 2, "/t beta": 2, "/t ": 5, // a bucket per tenant; no tenant, no limit
	}
	mu.Lock()
	defer mu.Unlock()
	for k, n := range want {
		if seen[k] != n {
			t.Errorf("upstream received %d of %q, want %d", seen[k], k, n)
		}
	}
	if n := seen["/c bot-7"]; n != 0 {
		t.Errorf("upstream received %d of bot-7 (regex item, count 0), want 0", n)
	}
	// A blocked request says why.
	resp, _ := get(t, g.URL+"/m?user=vip-1")
	if resp.StatusCode != 429 || resp.Header.Get("X-Sluice-Blocked") != "param" {
		t.Errorf("vip-1 past its count: %d X-Sluice-Blocked=%q, want 429 param", resp.StatusCode, resp.Header.Get("X-Sluice-Blocked"))
	}
}

// TestValidateParamMatch: sluice validate refuses a bad regex and a cidr
// on a source that holds no address, naming file, line and field.
func TestValidateParamMatch(t *testing.T) {
	t.Parallel()
	rules := rulesFor("http://127.0.0.1:9", `
routes:
  - path: /r
    upstream: up
    resource: r
paramRules:
  - resource: r
    param: query:id
    count: 1
    match: { strategy: cidr, pattern: "10.0.0.0/8" }
  - resource: r
    param: header:X-User
    count: 1
    items:
      - { value: "(vip", match: regex, count: 5 }
`)
	path := filepath.Join(t.TempDir(), "rules.yaml")
	if err := os.WriteFile(path, []byte(rules), 0o644); err != nil {
		t.Fatal(err)
	}
	want := path + `:14: paramRules[0].match.strategy: cidr needs address values: param must be ip or a header holding an address, got "query:id"` + "\n" +
		path + ":19: paramRules[1].items[0].value: invalid regexp: missing closing ): `(vip`"
	out, err := exec.Command(binary, "validate", path).CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 || strings.TrimSpace(string(out)) != want {
		t.Errorf("sluice validate: %v, output:\n%s\nwant exit 1 and:\n%s", err, out, want)
	}
}
