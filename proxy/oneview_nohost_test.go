package proxy_test

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"testing"

	"sluice/internal/h2test"
)

// TestNoHostIsRefused: a request with no host name (no Host over
// HTTP/1.0, an empty Host or only a port, an h2 request without
// :authority, with an empty one or only a port) gave the host source no
// value, so a limit of one call per client and host (ip+host) was skipped
// for it and every such request reached the upstream. It is 400 on both
// forwarders and never reaches the upstream; a request with a host is
// limited as before (one 200, then 429).
func TestNoHostIsRefused(t *testing.T) {
	for _, fwd := range []string{"fast", "standard"} {
		t.Run(fwd, func(t *testing.T) {
			up := newLineUp(t)
			addr := h2cGateway(t, fwd, fmt.Sprintf(`
upstreams:
  up:
    targets: ["http://%s"]
routes:
  - { path: /hc, upstream: up, resource: hc }
paramRules:
  - { resource: hc, param: "ip+host", count: 1, durationSec: 30 }
`, up.ln.Addr()))
			h1 := func(head string) string {
				c, err := net.Dial("tcp", addr)
				if err != nil {
					t.Fatal(err)
				}
				defer c.Close()
				fmt.Fprint(c, head)
				resp, err := http.ReadResponse(bufio.NewReader(c), nil)
				if err != nil {
					return "closed"
				}
				resp.Body.Close()
				return fmt.Sprint(resp.StatusCode)
			}
			h2 := func(authority ...string) string {
				f := [][2]string{{":method", "GET"}, {":scheme", "http"}, {":path", "/hc"}}
				for _, a := range authority {
					f = append(f, [2]string{":authority", a})
				}
				return h2test.Call(t, addr, f, nil)
			}
			for range 3 {
				for name, st := range map[string]string{
					"HTTP/1.0 without Host": h1("GET /hc HTTP/1.0\r\n\r\n"),
					"empty Host":            h1("GET /hc HTTP/1.1\r\nHost: \r\n\r\n"),
					"Host :80":              h1("GET /hc HTTP/1.1\r\nHost: :80\r\n\r\n"),
					"h2 without :authority": h2(),
					"h2 :authority empty":   h2(""),
					"h2 :authority :80":     h2(":80"),
				} {
					if st != "400" && st != "reset" {
						t.Errorf("%s: %s, want 400", name, st)
					}
				}
			}
			if got := up.seen(); len(got) != 0 {
				t.Fatalf("requests without a host reached the upstream: %q", got)
			}
			for i, want := range []string{"200", "429", "429"} {
				if st := h1("GET /hc HTTP/1.1\r\nHost: a.test\r\n\r\n"); st != want {
					t.Fatalf("call %d with a host: %s, want %s", i, st, want)
				}
			}
		})
	}
}
