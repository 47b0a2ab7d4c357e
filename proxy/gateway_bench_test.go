package proxy_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"

	"github.com/rs/zerolog"

	"sluice/config"
	"sluice/proxy"
)

// BenchmarkGateway serves requests through Gateway.ServeHTTP (route match,
// system/flow/param checks, forwarding, response copy) against an
// in-process upstream, once per forwarder. The upstream is a raw HTTP/1.1
// responder on an httptest listener that allocates nothing per request, so
// allocs/op is the gateway's own; the client side is a reused request and a
// discarding ResponseWriter, so neither is counted either.
func BenchmarkGateway(b *testing.B) {
	for _, size := range []int{100, 64 << 10} {
		up := startRawUpstream(b, size)
		for _, fwd := range []string{"standard", "fast"} {
			b.Run(fmt.Sprintf("%s/%dB", fwd, size), func(b *testing.B) {
				g := benchGateway(b, up, fwd)
				b.ReportAllocs()
				b.SetBytes(int64(size))
				serveParallel(b, g, "/item/42?x=1", size)
			})
		}
	}
}

func benchGateway(b testing.TB, upURL, fwd string) *proxy.Gateway {
	b.Helper()
	rules := fmt.Sprintf(`
upstreams:
  up:
    targets: [%q]
    timeout: 5s
routes:
  - path: /item/{id}
    upstream: up
    resource: item
    forwarder: %s
flowRules:
  - resource: item
    count: 1000000000
paramRules:
  - resource: item
    param: path:id
    count: 1000000000
`, upURL, fwd)
	cfg, err := config.Parse("bench.yaml", []byte(rules))
	if err != nil {
		b.Fatal(err)
	}
	g := proxy.New(proxy.Deps{Log: zerolog.Nop()})
	if err := g.Load(cfg); err != nil {
		b.Fatal(err)
	}
	return g
}

// benchHostGateway is benchGateway with host routes besides: an exact
// name and a wildcard ahead of the route without hosts.
func benchHostGateway(b testing.TB, upURL string) *proxy.Gateway {
	b.Helper()
	cfg, err := config.Parse("bench.yaml", []byte(fmt.Sprintf(`
upstreams:
  up:
    targets: [%q]
routes:
  - path: /item/{id}
    hosts: [shop.example.com]
    upstream: up
    forwarder: fast
  - path: /item/{id}
    hosts: ["*.example.com"]
    upstream: up
    forwarder: fast
  - path: /item/{id}
    upstream: up
    forwarder: fast
`, upURL)))
	if err != nil {
		b.Fatal(err)
	}
	g := proxy.New(proxy.Deps{Log: zerolog.Nop()})
	if err := g.Load(cfg); err != nil {
		b.Fatal(err)
	}
	return g
}

// discardWriter is a ResponseWriter that keeps only the status and the
// number of body bytes.
type discardWriter struct {
	h      http.Header
	status int
	n      int
}

func (w *discardWriter) Header() http.Header { return w.h }
func (w *discardWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
}
func (w *discardWriter) Write(p []byte) (int, error) {
	if w.status == 0 {
		w.status = 200
	}
	w.n += len(p)
	return len(p), nil
}
func (w *discardWriter) Flush() {}

// startRawUpstream answers every request on a keep-alive connection with a
// fixed 200 response of size bytes, allocating nothing per request.
func startRawUpstream(tb testing.TB, size int) string {
	return startRawUpstreamHeader(tb, size, "")
}

// startRawUpstreamHeader is startRawUpstream whose answers carry the
// header lines extra ("Name: value\r\n" each) too.
func startRawUpstreamHeader(tb testing.TB, size int, extra string) string {
	tb.Helper()
	srv := httptest.NewUnstartedServer(nil)
	ln := srv.Listener
	resp := []byte("HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n" + extra + "Content-Length: " + strconv.Itoa(size) + "\r\n\r\n")
	resp = append(resp, bytes.Repeat([]byte("x"), size)...)
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		conns = map[net.Conn]bool{}
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns[c] = true
			mu.Unlock()
			wg.Add(1)
			go func() {
				defer wg.Done()
				serveRaw(c, resp)
			}()
		}
	}()
	// The gateway's pool keeps its connections open: close them from this
	// side so that every goroutine of the helper ends with the test.
	tb.Cleanup(func() {
		ln.Close()
		srv.Close()
		mu.Lock()
		for c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return "http://" + ln.Addr().String()
}

func serveRaw(c net.Conn, resp []byte) {
	defer c.Close()
	br := bufio.NewReaderSize(c, 16<<10)
	for {
		// Read the header block; a request body (Content-Length) is skipped.
		cl := 0
		for {
			line, err := br.ReadSlice('\n')
			if err != nil {
				return
			}
			if len(line) <= 2 {
				break
			}
			if len(line) > 16 && (line[0] == 'C' || line[0] == 'c') && bytes.EqualFold(line[:15], []byte("Content-Length:")) {
				cl, _ = strconv.Atoi(string(bytes.TrimSpace(line[15:])))
			}
		}
		if cl > 0 {
			if _, err := io.CopyN(io.Discard, br, int64(cl)); err != nil {
				return
			}
		}
		if _, err := c.Write(resp); err != nil {
			return
		}
	}
}

// serveParallel has g serve GET target from every goroutine, each with its
// own request, reused, and a discarding ResponseWriter, so that allocs/op
// is the gateway's own. The request's context can be cancelled, as a
// server's is. Each answer must be 200 with size bytes.
func serveParallel(b *testing.B, g *proxy.Gateway, target string, size int) {
	b.RunParallel(func(pb *testing.PB) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		req := httptest.NewRequestWithContext(ctx, "GET", target, nil)
		req.RemoteAddr = "127.0.0.1:50000"
		w := &discardWriter{h: http.Header{}}
		for pb.Next() {
			clear(w.h)
			w.status, w.n = 0, 0
			g.ServeHTTP(w, req)
			if w.status != 200 || w.n != size {
				b.Errorf("status %d, %d bytes; want 200, %d", w.status, w.n, size)
				return
			}
		}
	})
}
