package hotparam_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/rs/zerolog"

	"sluice/config"
	"sluice/proxy"
)

// cannedTransport answers every upstream call at once with an empty 200, so
// that a benchmark through the gateway measures the gateway.
type cannedTransport struct{}

func (cannedTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	return &http.Response{StatusCode: 200, ProtoMajor: 1, ProtoMinor: 1, Header: http.Header{},
		Body: http.NoBody, ContentLength: 0, Request: r}, nil
}

// nopWriter is a reusable ResponseWriter that keeps only the status.
type nopWriter struct {
	h      http.Header
	status int
}

func (w *nopWriter) Header() http.Header { return w.h }
func (w *nopWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
}
func (w *nopWriter) Write(p []byte) (int, error) {
	if w.status == 0 {
		w.status = 200
	}
	return len(p), nil
}

// BenchmarkProxyCheckPath serves requests through proxy.Gateway.ServeHTTP
// (route match, system, flow, param, block response or forward to a canned
// transport), with and without a param rule on path:id, so that the
// difference between cases is what the param rule costs a request end to
// end, including reading the path parameter through the Values interface.
//
// N distinct request paths (ids) are served round robin in every case: with
// 100000 of them the requests themselves fall out of cache, so compare each
// param case with the noParam or flow case of the same N.
//
//   - pass/noParam/values=N: flow rule only, every request forwarded.
//   - pass/param/values=N: plus a param rule that never blocks.
//   - block/flow/values=N: a flow rule blocks every request (baseline of the block path).
//   - block/param/values=N: the flow rule passes, the param rule blocks
//     every request of N ids (each id's one token per hour already spent).
func BenchmarkProxyCheckPath(b *testing.B) {
	cases := []struct {
		name      string
		flowCount string
		param     string // paramRules entry, "" none
		distinct  int
		status    int
	}{
		{"pass/noParam/values=10", "1e9", "", 10, 200},
		{"pass/param/values=10", "1e9", "count: 1e9", 10, 200},
		{"pass/noParam/values=100000", "1e9", "", 100000, 200},
		{"pass/param/values=100000", "1e9", "count: 1e9", 100000, 200},
		{"block/flow/values=10", "1", "", 10, 429},
		{"block/flow/values=100000", "1", "", 100000, 429},
		{"block/param/values=10", "1e9", "count: 1\n    durationSec: 3600", 10, 429},
		{"block/param/values=100000", "1e9", "count: 1\n    durationSec: 3600", 100000, 429},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			rules := `
upstreams:
  up:
    targets: ["http://127.0.0.1:1"]
routes:
  - path: /item/{id}
    upstream: up
    resource: item
    forwarder: standard
flowRules:
  - resource: item
    count: ` + c.flowCount + `
    statIntervalMs: 60000
`
			if c.param != "" {
				rules += "paramRules:\n  - resource: item\n    param: path:id\n    " + c.param + "\n"
			}
			cfg, err := config.Parse("bench.yaml", []byte(rules))
			if err != nil {
				b.Fatal(err)
			}
			g := proxy.New(proxy.Deps{Log: zerolog.Nop(), Transport: cannedTransport{}, Forwarder: "standard"})
			if err := g.Load(cfg); err != nil {
				b.Fatal(err)
			}
			reqs := make([]*http.Request, c.distinct)
			for i := range reqs {
				reqs[i] = httptest.NewRequest("GET", "/item/order-"+strconv.Itoa(i), nil)
				reqs[i].RemoteAddr = "127.0.0.1:50000"
				// Track every id first (for block cases: spend its token).
				g.ServeHTTP(&nopWriter{h: http.Header{}}, reqs[i])
			}
			var worker atomic.Int64
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				i := int(worker.Add(1)) * 7919
				w := &nopWriter{h: http.Header{}}
				for pb.Next() {
					clear(w.h)
					w.status = 0
					g.ServeHTTP(w, reqs[i%c.distinct])
					if w.status != c.status {
						b.Errorf("status %d, want %d", w.status, c.status)
						return
					}
					i++
				}
			})
		})
	}
}

// TestProxyParamBlockHeader is the cheap in-process twin of the e2e check:
// a request the param rule blocks is answered 429 with X-Sluice-Blocked:
// param, and one without the parameter source is not limited.
func TestProxyParamBlockHeader(t *testing.T) {
	cfg, err := config.Parse("t.yaml", []byte(`
upstreams:
  up:
    targets: ["http://127.0.0.1:1"]
routes:
  - path: /item
    upstream: up
    resource: item
paramRules:
  - resource: item
    param: header:X-User
    count: 1
    durationSec: 3600
`))
	if err != nil {
		t.Fatal(err)
	}
	g := proxy.New(proxy.Deps{Log: zerolog.Nop(), Transport: cannedTransport{}, Forwarder: "standard"})
	if err := g.Load(cfg); err != nil {
		t.Fatal(err)
	}
	do := func(user string) *http.Response {
		r := httptest.NewRequest("GET", "/item", nil)
		if user != "" {
			r.Header.Set("X-User", user)
		}
		w := httptest.NewRecorder()
		g.ServeHTTP(w, r)
		return w.Result()
	}
	steps := []struct {
		user   string
		status int
		reason string
	}{
		{"ann", 200, ""},
		{"ann", 429, "param"},
		{"bob", 200, ""},
		{"", 200, ""},
		{"", 200, ""},
	}
	for i, s := range steps {
		resp := do(s.user)
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != s.status || resp.Header.Get("X-Sluice-Blocked") != s.reason {
			t.Errorf("step %d (user %q): %d X-Sluice-Blocked=%q %s, want %d %q", i, s.user, resp.StatusCode,
				resp.Header.Get("X-Sluice-Blocked"), strings.TrimSpace(string(body)), s.status, s.reason)
		}
	}
}
