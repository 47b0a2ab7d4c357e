package proxy_test

import (
	"net/http/httptest"
	"net/url"
	"testing"

	"github.com/rs/zerolog"

	"sluice/config"
	"sluice/proxy"
)

// TestGRPCBlockIsATrailersOnlyAnswer: a blocked gRPC call gets HTTP 200,
// the call's own content-type, grpc-status 8 and a grpc-message naming
// the resource and the reason, with no body; other calls keep the
// configured block response.
func TestGRPCBlockIsATrailersOnlyAnswer(t *testing.T) {
	cfg, err := config.Parse("grpc.yaml", []byte(`
upstreams:
  up: { targets: ["http://127.0.0.1:9"], protocol: h2c }
routes:
  - { path: /echo.Echo/*, upstream: up, resource: "echo svc" }
flowRules:
  - { resource: "echo svc", count: 1, statIntervalMs: 60000 }
`))
	if err != nil {
		t.Fatal(err)
	}
	g := proxy.New(proxy.Deps{Log: zerolog.Nop()})
	if err := g.Load(cfg); err != nil {
		t.Fatal(err)
	}
	call := func(ct string) *httptest.ResponseRecorder {
		req := httptest.NewRequest("POST", "/echo.Echo/Say", nil)
		req.Header.Set("Content-Type", ct)
		rec := httptest.NewRecorder()
		g.ServeHTTP(rec, req)
		return rec
	}
	call("application/grpc") // the one pass (its upstream is down: 502)
	for _, ct := range []string{"application/grpc", "application/grpc+proto", "Application/GRPC-web"} {
		rec := call(ct)
		h := rec.Header()
		msg, _ := url.PathUnescape(h.Get("Grpc-Message"))
		if rec.Code != 200 || h.Get("Content-Type") != ct || h.Get("Grpc-Status") != "8" ||
			msg != "sluice: resource echo svc blocked (flow)" || rec.Body.Len() != 0 {
			t.Errorf("%s: %d %v %q, want 200, grpc-status 8 and no body", ct, rec.Code, h, rec.Body)
		}
	}
	if rec := call("application/json"); rec.Code != 429 || rec.Header().Get("Grpc-Status") != "" {
		t.Errorf("a plain call: %d %v, want the usual 429", rec.Code, rec.Header())
	}
}
