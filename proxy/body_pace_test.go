package proxy_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"sluice/config"
	"sluice/proxy"
)

// TestSlowBodyIsCutAtItsPace: a request body must come at 240 bytes a
// second on average once its first 5 s have passed (Kestrel's defaults),
// on both forwarders and whatever the route timeout. A client that sent a
// byte a second held its request's slots (a concurrency rule's, a queue's)
// for the whole 30 s route timeout: five of them kept a route of five
// refusing everyone else (memory audit). Cut, it gets 408, and the
// upstream is charged nothing; a body that keeps the pace (1 KiB a second)
// is forwarded whole, and so is a gRPC stream, whatever its pace. A gRPC
// stream is a call over HTTP/2 to an HTTP/2 upstream: a client that only
// names gRPC in its content-type (over HTTP/1.1, to an HTTP/1.1 upstream,
// or as gRPC-Web, which has no client streams) keeps the pace (h2 audit).
func TestSlowBodyIsCutAtItsPace(t *testing.T) {
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, _ := io.Copy(io.Discard, r.Body)
		io.WriteString(w, strings.Repeat("x", int(n%10)))
	})
	up := httptest.NewServer(handler)
	t.Cleanup(up.Close)
	h2Up := httptest.NewUnstartedServer(handler)
	h2Up.Config.Protocols = new(http.Protocols)
	h2Up.Config.Protocols.SetUnencryptedHTTP2(true)
	h2Up.Start()
	t.Cleanup(h2Up.Close)
	// The cases wait out the pace's 5 s grace side by side, not two at a
	// time as t.Parallel would run them on two cores.
	var wg sync.WaitGroup
	defer wg.Wait()
	for _, fwd := range []string{"standard", "fast"} {
		for _, tc := range []struct {
			name  string
			ctype string
			h2    bool // the call over h2c, to an h2c upstream (else HTTP/1.1 to HTTP/1.1)
			h2Up  bool // the call over h2c, to an HTTP/1.1 upstream
			piece int  // bytes every 250 ms; 1: a byte a second
			total int
			want  int
			after time.Duration // the answer comes no sooner
		}{
			{name: "a byte a second", ctype: "text/plain", piece: 1, total: 100, want: 408, after: 5 * time.Second},
			{name: "1 KiB a second", ctype: "text/plain", piece: 256, total: 5632, want: 200, after: 5 * time.Second},
			// A gRPC stream's messages come when the client has them.
			{name: "gRPC stream, a byte a second", ctype: "application/grpc", h2: true, piece: 1, total: 6, want: 200, after: 6 * time.Second},
			{name: "gRPC named over HTTP/1.1", ctype: "application/grpc", piece: 1, total: 100, want: 408, after: 5 * time.Second},
			{name: "gRPC named over h2 to an HTTP/1.1 upstream", ctype: "application/grpc+proto", h2Up: true, piece: 1, total: 100, want: 408, after: 5 * time.Second},
			{name: "gRPC-Web over h2", ctype: "application/grpc-web+proto", h2: true, piece: 1, total: 100, want: 408, after: 5 * time.Second},
		} {
			if fwd == "fast" && (tc.want == 200 || tc.h2 || tc.h2Up) {
				continue // the pace and its exemption are the exchange's, one for both paths
			}
			name := fwd + "/" + tc.name
			var (
				addr string
				cnt  *counter
			)
			if tc.h2 || tc.h2Up {
				target := up.URL
				if tc.h2 {
					target = h2Up.URL
				}
				addr, cnt = countedH2cGateway(t, target, "30s", tc.h2)
			} else {
				addr, cnt = countedGateway(t, fwd, up.URL, "30s")
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				every := 250 * time.Millisecond
				if tc.piece == 1 {
					every = time.Second // a byte a second
				}
				body, w := io.Pipe()
				stop := make(chan struct{})
				defer close(stop)
				go func() {
					for sent := 0; sent < tc.total; sent += tc.piece {
						select {
						case <-stop:
							w.CloseWithError(io.ErrClosedPipe)
							return
						case <-time.After(every):
						}
						if _, err := w.Write([]byte(strings.Repeat("b", min(tc.piece, tc.total-sent)))); err != nil {
							return
						}
					}
					w.Close()
				}()
				start := time.Now()
				var (
					status int
					err    error
				)
				if tc.h2 || tc.h2Up {
					status, err = h2cPost(addr, tc.ctype, body)
				} else {
					status, err = h1Post(addr, tc.ctype, tc.total, body)
				}
				took := time.Since(start)
				if err != nil || status != tc.want || took < tc.after || took > 15*time.Second {
					t.Errorf("%s: %d %v after %v; want %d, after %v and well before the 30 s route timeout", name, status, err, took, tc.want, tc.after)
				}
				if _, errs := cnt.counts(); errs != 0 {
					t.Errorf("%s: %d upstream errors counted, want 0", name, errs)
				}
			}()
		}
	}
}

// h1Post sends a POST of a declared length over HTTP/1.1, its body as body
// gives it, and returns the status.
func h1Post(addr, ctype string, length int, body io.Reader) (int, error) {
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	io.WriteString(conn, "POST /up HTTP/1.1\r\nHost: x\r\nContent-Type: "+ctype+"\r\nContent-Length: "+strconv.Itoa(length)+"\r\n\r\n")
	go io.Copy(conn, body)
	conn.SetReadDeadline(time.Now().Add(20 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		return 0, err
	}
	return resp.StatusCode, nil
}

// h2cPost sends a POST over h2c (prior knowledge), its body streamed as
// body gives it, and returns the status.
func h2cPost(addr, ctype string, body io.Reader) (int, error) {
	tr := &http.Transport{Protocols: new(http.Protocols)}
	tr.Protocols.SetUnencryptedHTTP2(true)
	defer tr.CloseIdleConnections()
	req, err := http.NewRequest("POST", "http://"+addr+"/up", body)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", ctype)
	resp, err := (&http.Client{Transport: tr, Timeout: 20 * time.Second}).Do(req)
	if err != nil {
		return 0, err
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, nil
}

// countedH2cGateway is countedGateway on a listener that speaks h2c too,
// its upstream h2c when h2Up.
func countedH2cGateway(t *testing.T, target, timeout string, h2Up bool) (string, *counter) {
	t.Helper()
	c := &counter{}
	proto := "http1"
	if h2Up {
		proto = "h2c"
	}
	cfg, err := config.Parse("counted.yaml", []byte(fmt.Sprintf(
		"upstreams:\n  up:\n    targets: [%q]\n    timeout: %s\n    protocol: %s\nroutes:\n  - path: /*\n    upstream: up\n    resource: r\n", target, timeout, proto)))
	if err != nil {
		t.Fatal(err)
	}
	g := proxy.New(proxy.Deps{Log: zerolog.Nop(), Observer: func(string) proxy.Observer { return c }})
	if err := g.Load(cfg); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(g)
	srv.Config.Protocols = new(http.Protocols)
	srv.Config.Protocols.SetHTTP1(true)
	srv.Config.Protocols.SetUnencryptedHTTP2(true)
	srv.Start()
	t.Cleanup(srv.Close)
	return srv.Listener.Addr().String(), c
}
