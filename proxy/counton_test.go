package proxy_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"net/textproto"
	"sync/atomic"
	"testing"
)

// TestCostHeaderReachesClientOnlyWhenKept: a countOn responseHeader rule's
// header is removed from the final answer on both forwarders and from an
// interim (103) answer, unless the route sets keepCostHeaders; then the
// client sees it on both. Either way its figure is charged: a key of 10
// tokens is let in once more after spending 8, then refused before the
// upstream.
func TestCostHeaderReachesClientOnlyWhenKept(t *testing.T) {
	var reached atomic.Int64
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reached.Add(1)
		w.Header().Set("X-Tokens-Used", "1")
		w.Header().Set("Link", "</style.css>; rel=preload")
		w.WriteHeader(http.StatusEarlyHints)
		w.Header().Set("X-Tokens-Used", r.URL.Query().Get("used"))
		w.Write([]byte("ok"))
	}))
	defer up.Close()
	for _, tc := range []struct {
		fwd  string
		keep bool
	}{{"fast", false}, {"standard", false}, {"fast", true}, {"standard", true}} {
		fwd := tc.fwd
		t.Run(fmt.Sprintf("%s/keep=%v", fwd, tc.keep), func(t *testing.T) {
			reached.Store(0)
			srv := costGateway(t, up.URL, fwd, tc.keep)
			for i, st := range []struct {
				used string
				want int
			}{{"8", 200}, {"5", 200}, {"1", 429}} {
				var interim []textproto.MIMEHeader
				ctx := httptrace.WithClientTrace(context.Background(), &httptrace.ClientTrace{
					Got1xxResponse: func(code int, h textproto.MIMEHeader) error {
						interim = append(interim, h)
						return nil
					},
				})
				req, _ := http.NewRequestWithContext(ctx, "GET", srv.URL+"/chat?used="+st.used, nil)
				req.Header.Set("X-Key", "k")
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				if resp.StatusCode != st.want {
					t.Fatalf("call %d: %d, want %d", i, resp.StatusCode, st.want)
				}
				v, ok := resp.Header["X-Tokens-Used"]
				switch {
				case st.want != 200:
					// Refused before the upstream: there is no figure to show.
				case tc.keep && (len(v) != 1 || v[0] != st.used):
					t.Fatalf("call %d: the client got X-Tokens-Used %q, want [%s] (the route keeps it)", i, v, st.used)
				case !tc.keep && ok:
					t.Fatalf("call %d: the client got X-Tokens-Used: %q", i, v)
				}
				if fwd == "standard" && len(interim) == 0 && st.want == 200 {
					t.Fatalf("call %d: no interim answer came through (the test sees none to check)", i)
				}
				for _, h := range interim {
					v, ok := h["X-Tokens-Used"]
					if tc.keep && (len(v) != 1 || v[0] != "1") {
						t.Fatalf("call %d: an interim answer carried X-Tokens-Used %q, want [1] (the route keeps it)", i, v)
					}
					if !tc.keep && ok {
						t.Fatalf("call %d: an interim answer carried X-Tokens-Used: %q", i, v)
					}
				}
			}
			if reached.Load() != 2 {
				t.Fatalf("the upstream was reached %d times, want 2", reached.Load())
			}
		})
	}
}

// TestCostTrailerNeverReachesClient: a figure header the upstream sends as
// a trailer (announced in Trailer, or not) is not read, and, like the
// header, it does not reach the client on either forwarder unless the
// route keeps it; other trailers still do.
func TestCostTrailerNeverReachesClient(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("announce") == "1" {
			w.Header().Set("Trailer", "X-Tokens-Used, X-Checksum")
		}
		w.WriteHeader(http.StatusOK)
		w.Write([]byte("ok"))
		w.(http.Flusher).Flush() // chunked, so unannounced trailers can follow
		if r.URL.Query().Get("announce") == "1" {
			w.Header().Set("X-Tokens-Used", "3")
			w.Header().Set("X-Checksum", "abc")
		} else {
			w.Header().Set(http.TrailerPrefix+"X-Tokens-Used", "3")
			w.Header().Set(http.TrailerPrefix+"X-Checksum", "abc")
		}
	}))
	defer up.Close()
	for _, fwd := range []string{"fast", "standard"} {
		for _, keep := range []bool{false, true} {
			for _, announce := range []string{"0", "1"} {
				t.Run(fmt.Sprintf("%s/keep=%v/announced=%s", fwd, keep, announce), func(t *testing.T) {
					srv := costGateway(t, up.URL, fwd, keep)
					req, _ := http.NewRequest("GET", srv.URL+"/chat?announce="+announce, nil)
					req.Header.Set("X-Key", "k")
					resp, err := http.DefaultClient.Do(req)
					if err != nil {
						t.Fatal(err)
					}
					if _, err := io.ReadAll(resp.Body); err != nil {
						t.Fatal(err)
					}
					resp.Body.Close()
					if resp.StatusCode != 200 {
						t.Fatalf("status %d", resp.StatusCode)
					}
					if got := resp.Trailer.Get("X-Checksum"); got != "abc" {
						t.Fatalf("trailer X-Checksum = %q, want abc (trailers %v): the test sees no trailers to check", got, resp.Trailer)
					}
					got, ok := resp.Trailer["X-Tokens-Used"]
					if keep && (len(got) != 1 || got[0] != "3") {
						t.Errorf("the route keeps cost headers: trailer X-Tokens-Used = %q, want [3]", got)
					}
					if !keep && ok && len(got) > 0 {
						t.Errorf("the client got the cost trailer X-Tokens-Used: %q", got)
					}
				})
			}
		}
	}
}

// costGateway serves, in front of upstream, the route /chat (resource
// chat) on forwarder fwd, whose param rule on X-Key takes 10 tokens an
// hour counted from X-Tokens-Used; keep: the route keeps cost headers.
func costGateway(t *testing.T, upstream, fwd string, keep bool) *httptest.Server {
	t.Helper()
	srv, _ := rulesGatewayOf(t, costRules(upstream, fwd, keep))
	return srv
}

// costRules is costGateway's rules file.
func costRules(upstream, fwd string, keep bool) string {
	return fmt.Sprintf(`
upstreams:
  up:
    targets: [%q]
routes:
  - path: /chat
    upstream: up
    resource: chat
    forwarder: %s
    keepCostHeaders: %v
paramRules:
  - resource: chat
    param: header:X-Key
    count: 10
    durationSec: 3600
    countOn: "responseHeader:X-Tokens-Used"
`, upstream, fwd, keep)
}

// TestCostHeaderOnAnUpgrade: an upgrade's 101 is the answer a countOn
// responseHeader rule reads, on every forwarder (upgrades take the
// standard path): its figure is charged, 8 of a key's 10 tokens, so the
// key is let in once more (for 5) and then refused, and the header does not reach
// the client unless the route keeps it. Before, ReverseProxy wrote the 101
// to the hijacked connection past the gateway: the client saw the header,
// and the call cost its acquireCount, 1. A 101 to a request that asked for
// no upgrade is a failure, and its figure is not charged.
func TestCostHeaderOnAnUpgrade(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Has("hostile") {
			// A 101 to a request that asked for no upgrade.
			if conn, _, ok := switchTo(w, r, "X-Tokens-Used: 9\r\n"); ok {
				conn.Close()
			}
			return
		}
		if r.Header.Get("Upgrade") == "" {
			w.Header().Set("X-Tokens-Used", "5")
			io.WriteString(w, "ok")
			return
		}
		if conn, _, ok := switchTo(w, r, "X-Tokens-Used: 8\r\n"); ok {
			conn.Close()
		}
	}))
	defer up.Close()
	for _, tc := range []struct {
		fwd  string
		keep bool
	}{{"fast", false}, {"standard", false}, {"auto", true}} {
		t.Run(fmt.Sprintf("%s/keep=%v", tc.fwd, tc.keep), func(t *testing.T) {
			srv, g := rulesGatewayOf(t, costRules(up.URL, tc.fwd, tc.keep))
			c, br, resp := askUpgrade(t, srv.URL, "/chat", "X-Key: k\r\n")
			defer c.Close()
			if resp.StatusCode != 101 {
				t.Fatalf("upgrade: %d, want 101", resp.StatusCode)
			}
			if v, ok := resp.Header["X-Tokens-Used"]; ok != tc.keep {
				t.Errorf("the 101 carried X-Tokens-Used %q, want it only if the route keeps it (%v)", v, tc.keep)
			}
			// The upstream ends the tunnel at once; the call ends, and its
			// charge is taken, once the client closes its side too.
			io.Copy(io.Discard, br)
			c.Close()
			settled(t, g)
			for i, want := range []int{200, 429} {
				if got := keyedCall(t, "GET", srv.URL+"/chat", nil); got != want {
					t.Fatalf("call %d after the upgrade cost 8 of 10: %d, want %d", i, got, want)
				}
			}
		})
	}
	// A hostile 101 to a plain request is the upstream's failure (502),
	// not an answer whose figure is charged: the call costs acquireCount,
	// 1, so two calls of 5 pass after it before the key is refused.
	srv, _ := rulesGatewayOf(t, costRules(up.URL, "standard", false))
	for i, want := range []int{502, 200, 200, 429} {
		target := srv.URL + "/chat"
		if i == 0 {
			target += "?hostile"
		}
		if got := keyedCall(t, "GET", target, nil); got != want {
			t.Fatalf("call %d after a hostile 101: %d, want %d", i, got, want)
		}
	}
}
