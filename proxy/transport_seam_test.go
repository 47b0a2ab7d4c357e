package proxy

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"sluice/config"
)

// seamRoute is the route /* of a gateway on one target with no retries,
// and its two transports.
func seamRoute(t *testing.T, target, timeout string) (*route, map[string]transport) {
	t.Helper()
	cfg, err := config.Parse("seam.yaml", []byte(fmt.Sprintf(
		"upstreams:\n  up:\n    targets: [%q]\n    timeout: %s\nroutes:\n  - path: /*\n    upstream: up\n    forwarder: fast\n",
		target, timeout)))
	if err != nil {
		t.Fatal(err)
	}
	g := New(Deps{Log: zerolog.Nop()})
	if err := g.Load(cfg); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(g.Close)
	for _, rt := range g.Current().router.any.everyRoute() {
		return rt, map[string]transport{"standard": rt.std.(*standardForwarder), "fast": rt.fast.(*fastForwarder)}
	}
	t.Fatal("no route")
	return nil, nil
}

// sendOne sends one prepared GET of path over tr, as the attempts loop
// would prepare it, and returns send's result; aborted: the transport cut
// the client's response (http.ErrAbortHandler).
func sendOne(rt *route, tr transport, path string) (w *httptest.ResponseRecorder, code int, err error, aborted bool) {
	r := httptest.NewRequest("GET", path, nil)
	// As served by an http.Server: ReverseProxy cuts a broken response
	// only then.
	r = r.WithContext(context.WithValue(r.Context(), http.ServerContextKey, &http.Server{}))
	r.RemoteAddr = "127.0.0.1:50000"
	w = httptest.NewRecorder()
	v, _ := readTarget(r, targetRules{mergeSlashes: true, keepParams: true})
	s := rt.snap
	ex := s.pool.get(w, r, v, s.sources, nil)
	defer s.pool.put(ex)
	ex.try.now, ex.try.kept = s.clock.Now(), true
	p := &ex.out
	p.rt, p.ex, p.r, p.deadline = rt, ex, r, time.Now().Add(rt.upstream.timeout)
	p.target = rt.upstream.first(ex)
	tr.open(p)
	defer tr.close(p)
	defer func() {
		if v := recover(); v != nil {
			if v != http.ErrAbortHandler {
				panic(v)
			}
			aborted = true
		}
	}()
	code, err = tr.send(p)
	return w, code, err, false
}

// TestTransportsFailAlike is the seam's side of failures: each transport's
// client fails in its own words, and send reports them so that the one
// attempts loop reads them alike (classify, isTimeout): a target that
// refuses the connection, one slower than the deadline, a failure answer
// that is not retried (written as it came), and an answer cut short (no
// answer the client can take: a clean error before anything was written,
// or the response cut).
func TestTransportsFailAlike(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/slow":
			select {
			case <-time.After(5 * time.Second):
			case <-r.Context().Done():
			}
		case "/503":
			w.WriteHeader(503)
			io.WriteString(w, "busy")
		case "/cut":
			w.Header().Set("Content-Length", "1000")
			w.Write([]byte("only a little"))
			w.(http.Flusher).Flush()
			conn, _, _ := http.NewResponseController(w).Hijack()
			conn.Close()
		}
	}))
	defer up.Close()
	dead, _ := net.Listen("tcp", "127.0.0.1:0")
	deadURL := "http://" + dead.Addr().String()
	dead.Close()

	rt, trs := seamRoute(t, up.URL, "300ms")
	deadRt, deadTrs := seamRoute(t, deadURL, "300ms")
	for name, tr := range trs {
		t.Run(name, func(t *testing.T) {
			if w, code, err, _ := sendOne(deadRt, deadTrs[name], "/x"); code != 0 || classify(err) != failConnect || w.Code != 200 || w.Body.Len() != 0 {
				t.Errorf("refused: (%d, %v) classified %d, client got %d %q; want (0, a connect failure), nothing written", code, err, classify(err), w.Code, w.Body)
			}
			if w, code, err, _ := sendOne(rt, tr, "/slow"); code != 0 || !isTimeout(err) || classify(err) != failOther || w.Body.Len() != 0 {
				t.Errorf("slow: (%d, %v), timeout %v; want (0, a timeout), nothing written", code, err, isTimeout(err))
			}
			if w, code, err, _ := sendOne(rt, tr, "/503"); code != 503 || err != nil || w.Code != 503 || w.Body.String() != "busy" {
				t.Errorf("503 not retried: (%d, %v), client got %d %q; want it as the target sent it", code, err, w.Code, w.Body)
			}
			w, code, err, aborted := sendOne(rt, tr, "/cut")
			switch {
			case aborted: // the status went out; the response is cut
			case code == 200 && err != nil && w.Body.Len() == 0: // read whole first: nothing written
			default:
				t.Errorf("cut: (%d, %v), client got %d %q; want a cut response or an error before any byte", code, err, w.Code, w.Body)
			}
		})
	}
}
