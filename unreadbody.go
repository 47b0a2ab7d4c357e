package main

import (
	"io"
	"net/http"
	"sync/atomic"
	"time"
)

// releaseUnreadBody keeps a slow client from holding its answer. When a
// handler returns before the request body was read to its end (the upstream
// failed or timed out, or answered without reading it), net/http reads up to
// 256 KiB more of the body before it writes the response, at whatever pace
// the client sends: a client dribbling its body ("slow POST") would hold the
// gateway's 408/504 and its connection for as long as it likes. Expiring the
// read deadline makes that read fail at once; net/http then sends the
// response and closes the connection, as it must with body bytes still on
// the wire. Requests without a body are passed through untouched.
func releaseUnreadBody(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body == nil || r.Body == http.NoBody {
			next.ServeHTTP(w, r)
			return
		}
		b := &eofBody{ReadCloser: r.Body}
		r.Body = b
		next.ServeHTTP(w, r)
		if !b.eof.Load() {
			_ = http.NewResponseController(w).SetReadDeadline(time.Now())
		}
	})
}

// eofBody records that a request body was read to its end; the forwarder
// may read it from another goroutine.
type eofBody struct {
	io.ReadCloser
	eof atomic.Bool
}

func (b *eofBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err == io.EOF {
		b.eof.Store(true)
	}
	return n, err
}
