package proxy_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"sluice/config"
	"sluice/internal/logtest"
	"sluice/proxy"
)

// TestAccessLogHasEveryRequest: with log.access, SPEC §3 promises one
// access event per request. Requests no route served had none: a 404, a
// 405, and a target refused before routing (400: "#", "..", a bad
// escape). nginx and Traefik log those, and they are most of what a
// scanner sends. Each now has its one line, with its status.
func TestAccessLogHasEveryRequest(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	defer up.Close()
	cfg, err := config.Parse("rules.yaml", []byte(fmt.Sprintf(`
log: { access: true }
upstreams:
  up: { targets: [%q] }
routes:
  - path: /a
    methods: [GET]
    upstream: up
`, up.URL)))
	if err != nil {
		t.Fatal(err)
	}
	var logs logtest.Buffer
	g := proxy.New(proxy.Deps{Log: zerolog.New(&logs)})
	if err := g.Load(cfg); err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	srv := httptest.NewServer(g)
	defer srv.Close()
	addr := strings.TrimPrefix(srv.URL, "http://")

	for _, tc := range []struct {
		request, path, decision string
		status                  int
	}{
		{"GET /a HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", "/a", "pass", 200},
		{"GET /nothing HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", "/nothing", "noRoute", 404},
		{"POST /a HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: 2\r\n\r\nhi", "/a", "noRoute", 405},
		{"GET /a#x HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", "/a#x", "badRequest", 400},
		{"GET /x/../a HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", "/x/../a", "badRequest", 400},
		{"GET /" + strings.Repeat("a", 9000) + " HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", "/" + strings.Repeat("a", 2047), "badRequest", 414},
	} {
		before := len(logs.Events("access"))
		// Connection: close: net/http closes it once the handler, and
		// so the access line, is done.
		got := rawRoundTrip(t, addr, tc.request, 5*time.Second)
		if !strings.HasPrefix(got, fmt.Sprintf("HTTP/1.1 %d ", tc.status)) {
			t.Fatalf("%q answered %.40q, want %d", tc.request, got, tc.status)
		}
		lines := logs.Events("access")[before:]
		if len(lines) != 1 {
			t.Errorf("%q: %d access lines, want 1: %v", tc.request, len(lines), lines)
			continue
		}
		l := lines[0]
		if l["status"] != float64(tc.status) || l["path"] != tc.path || l["decision"] != tc.decision {
			t.Errorf("%q: access line %v, want status %d, path %s, decision %s", tc.request, l, tc.status, tc.path, tc.decision)
		}
	}
}

// cancelledUpstream is a transport whose calls end with the request's
// context: a client that has left cuts the upstream call, as net/http's
// Transport does.
type cancelledUpstream struct{ stubUpstream }

func (u *cancelledUpstream) RoundTrip(r *http.Request) (*http.Response, error) {
	if err := r.Context().Err(); err != nil {
		u.calls.Add(1)
		return nil, err
	}
	return u.stubUpstream.RoundTrip(r)
}

// TestAccessLogHasClientsThatLeft: a client that left before any answer
// was written has its access line too, with nginx's 499 for a status. One
// that left a throttle's queue had none at all (it is not forwarded and
// counts in no metric, so the log is the only place an operator sees
// it), and one that left while the upstream had its call was logged with
// status 0, which reads as a field left out.
func TestAccessLogHasClientsThatLeft(t *testing.T) {
	for _, tc := range []struct {
		name, rules, decision string
		calls                 int32 // sent to the upstream
	}{
		{"left the queue", `
flowRules:
  - resource: item
    count: 10
    controlBehavior: throttle
    maxQueueingTimeMs: 500
`, "clientGone", 1},
		{"left while the upstream had it", "", "pass", 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var logs logtest.Buffer
			up := &cancelledUpstream{}
			up.status.Store(200)
			g, _, _ := stubGateway(t, "log: { access: true }\n"+itemRoute+tc.rules, func(d *proxy.Deps) {
				d.Log, d.Transport = zerolog.New(&logs), up
			})
			defer g.Close()
			if status, _, _ := get(g, "1", ""); status != 200 {
				t.Fatalf("the first call: status %d", status)
			}
			if !getLeft(g, "1") {
				t.Fatal("the call of a client that left was answered")
			}
			if got := up.calls.Load(); got != tc.calls {
				t.Errorf("the upstream had %d calls, want %d", got, tc.calls)
			}
			lines := logs.Events("access")
			if len(lines) != 2 {
				t.Fatalf("%d access lines, want 2 (one a request): %v", len(lines), lines)
			}
			l := lines[1]
			if l["status"] != float64(499) || l["decision"] != tc.decision || l["resource"] != "item" || l["path"] != "/item/1" {
				t.Errorf("access line %v, want status 499, decision %s, resource item, path /item/1", l, tc.decision)
			}
		})
	}
}
