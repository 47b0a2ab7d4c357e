package proxy

import (
	"errors"
	"net/http"
)

// Frame floods. Between its requests a client connection should carry
// little: over HTTP/1.1 the next request's header block (at most 68 KiB),
// over HTTP/2 a few control frames. The HTTP/2 frames no request is made of
// never reach a handler, and Go's server answers each without limit: an
// h2 audit of the binary had one connection send 10.6 million empty
// CONTINUATION frames in 15 s, a header block never finished, for about a
// core (a PING, SETTINGS or WINDOW_UPDATE flood costs about as much) for as
// long as idleTimeout let it stay. So a connection that reads more than
// maxIdleRead bytes while none of its requests is being served is closed,
// as nginx closes an HTTP/2 connection whose bytes are mostly not payload
// ("http2 flood detected"). Reading a request's body, its upgraded
// tunnel's bytes or a stream's frames while any request of the connection
// is served counts nothing; each request's start and end begin the count
// anew. What a client may send after an early answer (net/http drains up
// to 256 KiB of an HTTP/1.1 body; an h2 stream's unread window, 1 MiB in
// Go's server) stays well below it.
const maxIdleRead = 8 << 20

// errFlood is the read error of a connection closed for a flood.
var errFlood = errors.New("sluice: connection closed: it sent over 8 MiB while none of its requests was being served")

// serving marks one of c's requests as being served, until its served:
// c's reads then count as a request's.
func (c *sendConn) serving() {
	c.active.Add(1)
	c.idleRead.Store(0)
}

func (c *sendConn) served() {
	c.active.Add(-1)
	c.idleRead.Store(0)
}

// countIdle counts n bytes read; it reports a flood once more than
// maxIdleRead were read with no request being served.
func (c *sendConn) countIdle(n int) bool {
	return c.active.Load() == 0 && c.idleRead.Add(int64(n)) > maxIdleRead
}

// serveConn marks r's request as being served on its connection, which it
// returns for the handler to call served on at its end (nil: r came
// otherwise).
func serveConn(r *http.Request) *sendConn {
	c := streamConn(r)
	if c != nil {
		c.serving()
	}
	return c
}
