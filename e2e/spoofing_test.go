package e2e

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
)

// hdSpoofRules limits each client IP (the `ip` source) to 3 requests a minute.
func hdSpoofRules(upURL, trusted string) string {
	return fmt.Sprintf(`trustedProxies: [%s]
upstreams:
  up:
    targets: [%q]
routes:
  - path: /p
    upstream: up
    resource: p
paramRules:
  - resource: p
    param: ip
    count: 3
    durationSec: 60
`, trusted, upURL)
}

// hdPasses sends one request per X-Forwarded-For value and counts the 200s;
// any status other than 200 or a param 429 fails the test.
func hdPasses(t *testing.T, url string, xffs []string) int {
	t.Helper()
	n := 0
	for _, xff := range xffs {
		resp, _ := get(t, url, "X-Forwarded-For: "+xff)
		switch {
		case resp.StatusCode == 200:
			n++
		case resp.StatusCode == 429 && resp.Header.Get("X-Sluice-Blocked") == "param":
		default:
			t.Fatalf("XFF %q: %d %s", xff, resp.StatusCode, resp.Header.Get("X-Sluice-Blocked"))
		}
	}
	return n
}

func hdSeq(format string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf(format, i)
	}
	return out
}

// TestSpoofedXFFFromUntrustedPeerIsIgnored: the test client (127.0.0.1) is
// not a trusted proxy, so whatever X-Forwarded-For it sends, all its
// requests share one `ip` key: 3 of 10 pass. The upstream sees the real
// peer only.
func TestSpoofedXFFFromUntrustedPeerIsIgnored(t *testing.T) {
	t.Parallel()
	up := startUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Seen-XFF", strings.Join(r.Header.Values("X-Forwarded-For"), "|"))
	})
	g := startGateway(t, hdSpoofRules(up.URL, `"10.0.0.0/8"`))
	xffs := append(hdSeq("203.0.113.%d", 5), "10.0.0.1", "", "garbage", "::1", "1.1.1.1, 2.2.2.2")
	if n := hdPasses(t, g.URL+"/p", xffs); n != 3 {
		t.Errorf("%d of %d requests with changing X-Forwarded-For passed, want 3 (one key: the peer)", n, len(xffs))
	}
	resp, _ := get(t, g.URL+"/p", "X-Forwarded-For: 203.0.113.9")
	if got := resp.Header.Get("X-Seen-XFF"); got != "" && got != "127.0.0.1" {
		t.Errorf("upstream saw X-Forwarded-For %q, want 127.0.0.1", got)
	}
}

// TestXFFFromTrustedProxy: behind a trusted proxy (127.0.0.1) the client is
// the right-most untrusted X-Forwarded-For address: distinct clients get
// distinct keys, while one client prepending fake hops does not escape its
// own key, and a garbage hop falls back to the last address vouched for.
func TestXFFFromTrustedProxy(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var seen []string
	up := startUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Header.Get("X-Forwarded-For"))
		mu.Unlock()
	})
	g := startGateway(t, hdSpoofRules(up.URL, `"127.0.0.1/32"`))
	if n := hdPasses(t, g.URL+"/p", hdSeq("198.51.100.%d", 6)); n != 6 {
		t.Errorf("6 distinct clients behind the proxy: %d passed, want 6", n)
	}
	if n := hdPasses(t, g.URL+"/p", hdSeq("6.6.6.%d, 192.0.2.7", 6)); n != 3 {
		t.Errorf("one client (192.0.2.7) with 6 fake left-hand hops: %d passed, want 3", n)
	}
	if n := hdPasses(t, g.URL+"/p", []string{"192.0.2.8, 127.0.0.1", "192.0.2.8", "192.0.2.8,127.0.0.1,127.0.0.1", "192.0.2.8"}); n != 3 {
		t.Errorf("trusted hops after the client: %d of 4 passed, want 3 (one key 192.0.2.8)", n)
	}
	// Garbage: the key is the trusted peer itself, one shared key.
	if n := hdPasses(t, g.URL+"/p", hdSeq("not-an-ip-%d", 5)); n != 3 {
		t.Errorf("garbage hops: %d of 5 passed, want 3 (keyed by the peer)", n)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(seen) == 0 || seen[0] != "198.51.100.0, 127.0.0.1" {
		t.Errorf("upstream saw X-Forwarded-For %q, want the chain extended with the peer", seen[:min(1, len(seen))])
	}
}

// TestOriginHeaderStripped: with origin.strip the origin header decides the
// limit but never reaches the upstream; without it, it is forwarded. Run
// with each forwarder.
func TestOriginHeaderStripped(t *testing.T) {
	for _, fwd := range []string{"standard", "fast"} {
		for _, strip := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/strip=%v", fwd, strip), func(t *testing.T) {
				t.Setenv("SLUICE_FORWARDER", fwd)
				up := startUpstream(t, func(w http.ResponseWriter, r *http.Request) {
					w.Header().Set("X-Seen-Origin", strings.Join(r.Header.Values("X-Origin"), "|"))
				})
				g := startGateway(t, fmt.Sprintf(`origin:
  from: header:X-Origin
  strip: %v
upstreams:
  up:
    targets: [%q]
routes:
  - path: /o
    upstream: up
    resource: o
flowRules:
  - resource: o
    limitApp: partner
    count: 2
    statIntervalMs: 60000
`, strip, up.URL))
				var statuses []int
				for range 3 {
					resp, _ := get(t, g.URL+"/o", "X-Origin: partner")
					statuses = append(statuses, resp.StatusCode)
					seen := resp.Header.Get("X-Seen-Origin")
					if resp.StatusCode == 200 && (strip && seen != "" || !strip && seen != "partner") {
						t.Errorf("strip=%v: upstream saw X-Origin %q", strip, seen)
					}
				}
				if fmt.Sprint(statuses) != "[200 200 429]" {
					t.Errorf("origin partner with count 2: %v, want [200 200 429] (the origin still decides)", statuses)
				}
				if resp, _ := get(t, g.URL+"/o", "X-Origin: other-team"); resp.StatusCode != 200 {
					t.Errorf("another origin: %d, want 200", resp.StatusCode)
				}
			})
		}
	}
}
