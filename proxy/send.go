package proxy

import (
	"net"
	"net/http"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"
)

// Slow clients (docs/configuration.md#server-what-one-client-may-hold):
// server.sendTimeout bounds each wait for a client to take bytes, like
// nginx's send_timeout, in two places.
//
//   - The connection: every write to a client's socket (HTTP/1.1, a TLS
//     record, an HTTP/2 frame, an upgraded connection's bytes) gets a
//     deadline of sendTimeout from its start (Gateway.Listener). A client
//     whose TCP window stays shut is cut there.
//   - The HTTP/2 stream: a client may keep its connection read while never
//     opening one stream's flow-control window; writes to that stream then
//     wait in net/http's h2 server, not on the socket. A response's writes
//     to the stream are bounded by a timer that resets the stream when one
//     waits past sendTimeout (sendGuard), and the stream's own write
//     deadline covers what net/http flushes after the handler returns.
//
// Either way the blocked write fails, the forwarder aborts the response (the
// upstream call is cancelled) and route.forward's deferred release frees
// every slot the request held.

// Listener wraps the traffic listener ln: every write to a connection it
// accepts must start taking bytes within the server.sendTimeout in force
// when the connection was accepted, or it fails and the connection is cut.
func (g *Gateway) Listener(ln net.Listener) net.Listener { return &sendListener{Listener: ln, g: g} }

type sendListener struct {
	net.Listener
	g *Gateway
}

// Accept returns the next connection within the caps in force
// (conncap.go), closing those past them.
func (l *sendListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		ip := peerIP(c)
		if why := l.g.conns.admit(ip, l.g.connLimits()); why != "" {
			// Counted first, as cut does: whoever sees the connection
			// close finds it counted (a test that read the count once its
			// connection was refused found 0 on a busy machine).
			l.g.refusedConn(why, ip)
			_ = c.Close()
			continue
		}
		sc := newSendConn(c, l.g.sendTimeout())
		sc.g, sc.ip = l.g, ip
		return sc, nil
	}
}

// sendTimeout is server.sendTimeout of the snapshot in force (the default
// before the first Load).
func (g *Gateway) sendTimeout() time.Duration {
	if s := g.cur.Load(); s != nil {
		return s.sendTimeout
	}
	return defaultSendTimeout
}

// defaultSendTimeout is config.DefaultSendTimeout, for connections accepted
// before any rules are loaded (they get 503).
const defaultSendTimeout = 30 * time.Second

// sendConn gives each write to the client, in pieces of at most sendPiece
// bytes, sendTimeout to be taken: close to nginx's send_timeout (the time
// between two successive writes), a client that takes nothing for
// sendTimeout is cut, and one that keeps reading is not, as long as it takes
// a piece each sendTimeout. Reads, and a connection with nothing to write
// (an idle keep-alive, a stream waiting for its upstream), are not bounded
// by it.
//
// Setting a socket's deadline costs about as much as a small write, so the
// deadline is moved only when fewer than sendTimeout remain, to sendTimeout
// and a quarter more: a piece gets between sendTimeout and 1.25 times it,
// and a busy connection moves its deadline a few times a sendTimeout.
type sendConn struct {
	net.Conn
	timeout time.Duration
	born    time.Time    // the accept, the origin of until (monotonic)
	until   atomic.Int64 // the write deadline set, as time since born; 0: none of ours
	// g, set by Gateway.Listener, counted this connection in from ip
	// against its caps (conncap.go): the first Close gives it back. nil
	// for a connection made otherwise.
	g      *Gateway
	ip     netip.Addr
	closed atomic.Bool
	// streams counts an HTTP/2 connection's streams (resets.go).
	streams streamCounts
	// active counts the connection's requests being served, idleRead the
	// bytes read since one last began or ended (floods.go).
	active   atomic.Int32
	idleRead atomic.Int64
	cut      atomic.Bool // the gateway closed it for resets or a flood
}

// Read reads from the client; a connection that floods the gateway with
// bytes while none of its requests is served is closed (floods.go).
func (c *sendConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 && c.countIdle(n) {
		c.g.cut(c, RefusedFlood)
		return 0, errFlood
	}
	return n, err
}

// sendPiece is the most a client must take within one sendTimeout: 32 KiB,
// so a TLS record (16 KiB and its overhead) or an HTTP/2 frame batch is one
// write, and a 64 KiB copy is two.
const sendPiece = 32 << 10

func newSendConn(c net.Conn, timeout time.Duration) *sendConn {
	return &sendConn{Conn: c, timeout: timeout, born: time.Now()}
}

func (c *sendConn) Write(p []byte) (n int, err error) {
	for len(p) > 0 {
		q := p[:min(len(p), sendPiece)]
		if err = c.arm(); err != nil {
			return n, err
		}
		var m int
		m, err = c.Conn.Write(q)
		n += m
		if err != nil {
			return n, err
		}
		p = p[m:]
	}
	return n, nil
}

// arm makes sure the write about to start has at least sendTimeout.
func (c *sendConn) arm() error {
	el := time.Since(c.born)
	if time.Duration(c.until.Load())-el >= c.timeout {
		return nil
	}
	u := el + c.timeout + c.timeout/4
	c.until.Store(int64(u))
	return c.Conn.SetWriteDeadline(c.born.Add(u))
}

// SetDeadline and SetWriteDeadline (net/http clears the deadlines of a
// hijacked connection; crypto/tls bounds its closing alert) are in force
// until the next write, which sets sendTimeout's again.
func (c *sendConn) SetDeadline(t time.Time) error {
	c.until.Store(0)
	return c.Conn.SetDeadline(t)
}

// SetWriteDeadline with a zero t while ours is set keeps ours: net/http
// clears the write deadline after every HTTP/1.x response, and the next
// write would only set sendTimeout's again, two deadline changes a
// request (about 1.4k instructions, each a timer's removal or insertion)
// for a deadline that bounds no write in between.
func (c *sendConn) SetWriteDeadline(t time.Time) error {
	if t.IsZero() && c.until.Load() != 0 {
		return nil
	}
	c.until.Store(0)
	return c.Conn.SetWriteDeadline(t)
}

// Close closes the connection and, the first time, gives its place under
// the connection caps back. net/http closes a connection more than once
// (crypto/tls and a hijacker's Close may both reach it).
func (c *sendConn) Close() error {
	if c.g != nil && c.closed.CompareAndSwap(false, true) {
		c.g.conns.leave(c.ip)
	}
	return c.Conn.Close()
}

// CloseWrite lets net/http half-close a connection it ends after a
// response (a graceful close, so the client reads the whole answer).
func (c *sendConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

// sendGuard bounds each write of one HTTP/2 response: a write (or flush)
// still waiting for the client's flow-control window after timeout resets
// the stream, which fails the write. Built for HTTP/2 requests only
// (HTTP/1.1 writes wait on the socket, which sendConn bounds). Safe for
// the timer's goroutine and the handler's.
type sendGuard struct {
	timeout time.Duration
	t       *time.Timer // nil until the first write

	mu sync.Mutex
	w  http.ResponseWriter // the stream's writer; nil once the response is over
}

func newSendGuard(w http.ResponseWriter, timeout time.Duration) *sendGuard {
	return &sendGuard{timeout: timeout, w: w}
}

// write writes p to w in pieces of at most sendPiece, each given timeout
// to be taken, as sendConn does on a connection (here exactly timeout: a
// timer's Reset costs little).
func (g *sendGuard) write(w http.ResponseWriter, p []byte) (n int, err error) {
	for len(p) > 0 {
		q := p[:min(len(p), sendPiece)]
		g.arm()
		m, err := w.Write(q)
		g.disarm()
		n += m
		if err != nil {
			return n, err
		}
		p = p[m:]
	}
	return n, nil
}

// arm starts the wait of one write; disarm ends it.
func (g *sendGuard) arm() {
	if g.t == nil {
		g.t = time.AfterFunc(g.timeout, g.expire)
		return
	}
	g.t.Reset(g.timeout)
}

func (g *sendGuard) disarm() { g.t.Stop() }

// expire resets the stream: net/http's h2 server does so at once for a
// write deadline in the past, and the waiting write fails.
func (g *sendGuard) expire() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.w != nil {
		_ = http.NewResponseController(g.w).SetWriteDeadline(longAgo)
	}
}

// done ends the guard before the handler returns (net/http's writer must
// not be touched after that).
func (g *sendGuard) done() {
	if g.t != nil {
		g.t.Stop()
	}
	g.mu.Lock()
	g.w = nil
	g.mu.Unlock()
}

var longAgo = time.Unix(1, 0)

// boundStreamFlush bounds what net/http's h2 server writes of the response
// after the handler returns (the buffered rest, END_STREAM, trailers) by
// the stream's own write deadline: a client that never opens the window
// would otherwise keep the handler's goroutine and the stream. The stream's
// close stops the deadline's timer; a stream already closed (reset by
// sendGuard, or by the client) is left alone: its context ended as it
// closed, and a deadline set after the close fired a second RST_STREAM on
// it a timeout later (RFC 9113 5.1: no frame after the stream's close).
func boundStreamFlush(w http.ResponseWriter, r *http.Request, timeout time.Duration) {
	if r.Context().Err() != nil {
		return
	}
	_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(timeout))
}
