package proxy_test

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// TestH2CUpgradeIsAnsweredOverHTTP1: a request asking to upgrade to h2c is
// served as a plain HTTP/1.1 request, and the upstream never sees the
// upgrade (it would take the connection's later streams past the rules).
func TestH2CUpgradeIsAnsweredOverHTTP1(t *testing.T) {
	seen := make(chan http.Header, 1)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen <- r.Header.Clone()
		fmt.Fprint(w, "ok")
	}))
	defer up.Close()
	base := parityGateway(t, "", fmt.Sprintf("upstreams:\n  up: {targets: [%q]}\nroutes:\n  - path: /*\n    upstream: up\n", up.URL))
	c, err := net.DialTimeout("tcp", strings.TrimPrefix(base, "http://"), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	fmt.Fprint(c, "GET /x HTTP/1.1\r\nHost: a.test\r\nConnection: Upgrade, HTTP2-Settings, X-Keep\r\n"+
		"Upgrade: h2c\r\nHTTP2-Settings: AAMAAABkAARAAAAAAAIAAAAA\r\nX-Keep: 1\r\n\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.Proto != "HTTP/1.1" {
		t.Fatalf("answer %s %d, want HTTP/1.1 200", resp.Proto, resp.StatusCode)
	}
	h := <-seen
	for _, k := range []string{"Upgrade", "Http2-Settings", "X-Keep"} {
		if v := h.Get(k); v != "" {
			t.Errorf("the upstream got %s: %q", k, v)
		}
	}
}
