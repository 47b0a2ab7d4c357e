package proxy_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// TestSpoofedForwardingHeadersAreDropped: X-Forwarded-Port, -Prefix,
// -Ssl and the other X-Forwarded-* headers a Spring, ASP.NET or Rails
// upstream builds its URLs from pass only from a trusted proxy; from any
// other peer they are the client's invention and no upstream gets them,
// nor their CGI twins (X_Forwarded_Prefix), on either forwarder
// (docs/forwarding.md: "Inbound Forwarded and X-Forwarded-* are never
// passed on as sent", which the audit of 2026-12-07 found untrue). A
// limit keyed on one reads what is forwarded: nothing from an untrusted
// peer.
func TestSpoofedForwardingHeadersAreDropped(t *testing.T) {
	spoofed := map[string]string{
		"X-Forwarded-Port": "1", "X-Forwarded-Prefix": "/admin", "X-Forwarded-Ssl": "on",
		"X-Forwarded-Server": "evil", "X-Forwarded-Scheme": "https", "X_forwarded_prefix": "/x",
	}
	var mu sync.Mutex
	var got []http.Header
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = append(got, r.Header.Clone())
		mu.Unlock()
	}))
	defer up.Close()
	for _, trusted := range []bool{false, true} {
		for _, fwd := range []string{"fast", "standard"} {
			t.Run(fmt.Sprintf("%s/trusted=%v", fwd, trusted), func(t *testing.T) {
				rules := fmt.Sprintf(`
upstreams:
  up: {targets: [%q]}
routes:
  - {path: /*, upstream: up, resource: all}
paramRules:
  - {resource: all, param: "header:X-Forwarded-Prefix", count: 1, durationSec: 600}
`, up.URL)
				if trusted {
					rules = "trustedProxies: [\"127.0.0.0/8\"]\n" + rules
				}
				gw := httptest.NewServer(loadedGateway(t, fwd, rules))
				defer gw.Close()
				for i := range 2 {
					// Trusted, the prefix is a value: its count of 1 holds.
					if st, want := getWith(t, gw.URL+"/t", spoofed), map[bool]int{true: 429, false: 200}[trusted && i == 1]; st != want {
						t.Fatalf("request %d: %d, want %d", i+1, st, want)
					}
				}
				mu.Lock()
				h := got[len(got)-1]
				mu.Unlock()
				for k, v := range spoofed {
					sent := h[k]
					if trusted && (len(sent) != 1 || sent[0] != v) {
						t.Errorf("from a trusted proxy %s: %q reached the upstream as %q", k, v, sent)
					}
					if !trusted && len(sent) > 0 {
						t.Errorf("from an untrusted peer %s: %q reached the upstream", k, sent)
					}
				}
				if p := h.Get("X-Forwarded-Proto"); p != "http" || !strings.HasPrefix(h.Get("X-Forwarded-For"), "127.0.0.1") {
					t.Errorf("X-Forwarded-Proto %q, -For %q: the gateway's own", p, h.Get("X-Forwarded-For"))
				}
			})
		}
	}
}

// TestHeaderSourceSkipsDroppedTwins: a header source keys on the lines the
// upstream gets. A twin of a header the forwarders drop or write anew
// (X_Forwarded_For, which CGI reads as HTTP_X_FORWARDED_FOR) is dropped,
// so it gives no value: keyed, a client charged a victim's address with
// its own calls. Nor does an X-Forwarded-* line of an untrusted peer,
// however the rule spells the name (header:X_Forwarded_Prefix). The review
// of 2026-12-07 had each of these 429 against an item of count 0 the
// upstream never saw.
func TestHeaderSourceSkipsDroppedTwins(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	defer up.Close()
	for _, c := range []struct{ param, item, name, value string }{
		{"header:X-Forwarded-For", "9.9.9.9", "X_Forwarded_For", "9.9.9.9"},
		{"header:X-Forwarded-Host", "victim.example", "X_Forwarded_Host", "victim.example"},
		{"header:X-Forwarded-Proto", "ftp", "X_forwarded_proto", "ftp"},
		{"header:X_Forwarded_Prefix", "evil", "X-Forwarded-Prefix", "evil"},
		{"header:X_Forwarded_Prefix", "evil", "X_Forwarded_Prefix", "evil"},
		{"header:X-Forwarded-Prefix", "evil", "X_Forwarded_Prefix", "evil"},
	} {
		for _, fwd := range []string{"fast", "standard"} {
			rules := fmt.Sprintf(`
upstreams:
  up: {targets: [%q]}
routes:
  - {path: /*, upstream: up, resource: all}
paramRules:
  - {resource: all, param: %q, count: 100, items: [{value: %q, count: 0}]}
`, up.URL, c.param, c.item)
			gw := httptest.NewServer(loadedGateway(t, fwd, rules))
			st := getWith(t, gw.URL+"/t", map[string]string{c.name: c.value})
			gw.Close()
			if st != 200 {
				t.Errorf("%s, %s: %q from an untrusted client: %d, want 200 (the upstream never gets it)", fwd, c.param, c.name+": "+c.value, st)
			}
		}
	}
}

// getWith GETs url with the header fields given, by name as written (not
// canonicalized), and returns the status.
func getWith(t *testing.T, url string, fields map[string]string) int {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	for k, v := range fields {
		req.Header[k] = []string{v}
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}
