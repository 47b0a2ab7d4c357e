package proxy

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"

	"golang.org/x/net/http/httpguts"
)

// recUpstream is a raw upstream on loopback for the differential tests
// (the one view's, the header sources'): it records each request it reads
// by the gateway (X-Gw) and the request (X-Seq) it came for, byte for byte
// as it came and as Go's server reads it, body included, and answers 200
// "ok". A head Go's server refuses is recorded too, with the reason, and
// answered 400 on a closed connection: where its body ends is unknown.
type recUpstream struct {
	ln    net.Listener
	mu    sync.Mutex
	seen  map[string]*upRequest // by "gw/seq"
	conns []net.Conn
	wg    sync.WaitGroup
}

// upRequest is one request as the upstream got it.
type upRequest struct {
	head string        // the request line and header lines, as sent, up to the empty line
	r    *http.Request // as Go's server reads the head; nil when it refuses it
	err  error         // why Go's server refuses it
	body []byte        // the body, as far as r's framing goes
	// bodyErr: the body ended before its framing said (the gateway cut
	// the connection): the request is incomplete, and no service serves it.
	bodyErr error
	n       int // requests recorded under the key (a retry is one more)
}

func newRecUpstream(tb testing.TB) *recUpstream {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	u := &recUpstream{ln: ln, seen: map[string]*upRequest{}}
	u.wg.Add(1)
	go func() {
		defer u.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			u.mu.Lock()
			u.conns = append(u.conns, c)
			u.mu.Unlock()
			u.wg.Add(1)
			go func() {
				defer u.wg.Done()
				u.serve(c)
			}()
		}
	}()
	return u
}

func (u *recUpstream) url() string { return "http://" + u.ln.Addr().String() }

// close stops the upstream and waits for its connections' goroutines.
func (u *recUpstream) close() {
	u.ln.Close()
	u.mu.Lock()
	for _, c := range u.conns {
		c.Close()
	}
	u.mu.Unlock()
	u.wg.Wait()
}

// teeReader keeps the bytes read through it.
type teeReader struct {
	r   io.Reader
	buf []byte
}

func (t *teeReader) Read(p []byte) (int, error) {
	n, err := t.r.Read(p)
	t.buf = append(t.buf, p[:n]...)
	return n, err
}

func (u *recUpstream) serve(c net.Conn) {
	defer c.Close()
	tee := &teeReader{r: c}
	br := bufio.NewReader(tee)
	for {
		if _, err := br.Peek(1); err != nil {
			return
		}
		// The bytes read and not yet taken are this request's first.
		tee.buf = tee.buf[len(tee.buf)-br.Buffered():]
		r, err := http.ReadRequest(br)
		head := string(tee.buf)
		if i := strings.Index(head, "\r\n\r\n"); i >= 0 {
			head = head[:i+4]
		}
		if err == nil {
			err = goServerRefuses(head, r)
		}
		rec := &upRequest{head: head, r: r, err: err}
		if err == nil {
			if httpguts.HeaderValuesContainsToken(r.Header["Expect"], "100-continue") {
				_, _ = io.WriteString(c, "HTTP/1.1 100 Continue\r\n\r\n")
			}
			rec.body, rec.bodyErr = io.ReadAll(r.Body)
		}
		u.record(rawHeaderValue(head, "X-Gw")+"/"+rawHeaderValue(head, "X-Seq"), rec)
		switch {
		case err != nil:
			_, _ = io.WriteString(c, "HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
			return
		case rec.bodyErr != nil:
			return
		case r.Method == http.MethodHead:
			_, _ = io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n")
		default:
			_, _ = io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
		}
	}
}

func (u *recUpstream) record(key string, rec *upRequest) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if prev := u.seen[key]; prev != nil {
		rec.n = prev.n
	}
	rec.n++
	u.seen[key] = rec
}

// take returns (and forgets) the last request recorded under key.
func (u *recUpstream) take(key string) (*upRequest, bool) {
	u.mu.Lock()
	defer u.mu.Unlock()
	rec, ok := u.seen[key]
	delete(u.seen, key)
	return rec, ok
}

// goServerRefuses applies what Go's server checks beyond ReadRequest
// (net/http's conn.readRequest): an HTTP/1.1 request names its Host, once,
// and a valid one, and every header field is valid.
func goServerRefuses(head string, r *http.Request) error {
	var hosts []string
	names, vals := rawHeaderLines(head)
	for i, n := range names {
		if strings.EqualFold(n, "Host") {
			hosts = append(hosts, vals[i])
		}
	}
	switch {
	case r.ProtoMajor != 1:
		return errors.New("unsupported protocol version")
	case r.ProtoAtLeast(1, 1) && len(hosts) == 0 && r.Method != http.MethodConnect:
		return errors.New("missing required Host header")
	case len(hosts) == 1 && !httpguts.ValidHostHeader(hosts[0]):
		return errors.New("malformed Host header")
	}
	for k, vv := range r.Header {
		if !httpguts.ValidHeaderFieldName(k) {
			return errors.New("invalid header name")
		}
		for _, v := range vv {
			if !httpguts.ValidHeaderFieldValue(v) {
				return errors.New("invalid header value")
			}
		}
	}
	return nil
}
