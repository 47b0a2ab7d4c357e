package proxy_test

import (
	"bufio"
	"crypto/sha1"
	"encoding/base64"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"sluice/limiter"
	"sluice/proxy"
)

// switchTo hijacks an upstream handler's connection and answers r with
// 101 Switching Protocols to websocket, accepting r's key, with extra
// header lines (each ending "\r\n"). The caller owns the connection; ok
// is false if it could not be had.
func switchTo(w http.ResponseWriter, r *http.Request, extra string) (conn net.Conn, brw *bufio.ReadWriter, ok bool) {
	conn, brw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		return nil, nil, false
	}
	io.WriteString(brw, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"+
		"Sec-WebSocket-Accept: "+wsAccept(r.Header.Get("Sec-WebSocket-Key"))+"\r\n"+extra+"\r\n")
	brw.Flush()
	return conn, brw, true
}

// askUpgrade sends, on a new connection to gw (a URL), a request for path
// to upgrade to websocket, with extra header lines, and reads the answer.
// The connection has 10 s to live; the caller closes it.
func askUpgrade(t *testing.T, gw, path, extra string) (net.Conn, *bufio.Reader, *http.Response) {
	t.Helper()
	c, err := net.Dial("tcp", strings.TrimPrefix(gw, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	c.SetDeadline(time.Now().Add(10 * time.Second))
	io.WriteString(c, "GET "+path+" HTTP/1.1\r\nHost: gw\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n"+extra+"\r\n")
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		c.Close()
		t.Fatalf("upgrade of %s: %v", path, err)
	}
	return c, br, resp
}

// settled waits until no call of g's one resource is in flight (a tunnel's
// call has ended, its guards exited) and returns the resource's figures.
func settled(t *testing.T, g *proxy.Gateway) limiter.NodeStats {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		st := g.Current().Flow.Stats(g.Now())
		if len(st) == 1 && st[0].Node.Concurrency == 0 {
			return st[0].Node
		}
		if time.Now().After(deadline) {
			t.Fatalf("a call never ended: %+v", st)
		}
	}
}

// wsAccept is the Sec-WebSocket-Accept a WebSocket server answers key with.
func wsAccept(key string) string {
	sum := sha1.Sum([]byte(key + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"))
	return base64.StdEncoding.EncodeToString(sum[:])
}
