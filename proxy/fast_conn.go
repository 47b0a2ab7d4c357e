package proxy

import (
	"bytes"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"os"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/valyala/fasthttp"
)

// errStaleConn: a pooled upstream connection turned out, before anything
// was written to it, to have been closed by the upstream while idle.
var errStaleConn = errors.New("proxy: pooled upstream connection closed while idle")

// idleProbe is how long a pooled connection must have been idle to be
// checked before its next request. Upstreams close idle keep-alive
// connections without a word (gunicorn after 2 s, Node, Apache and uvicorn
// after 5 s, nginx after 75 s); fasthttp would write the next request into
// the closed connection and fail a POST with 502, where net/http's
// Transport sees the close and retries. A connection reused sooner than the
// shortest of those timeouts cannot have been closed by one, so it is not
// checked: under load (a connection reused every few milliseconds) no
// request pays the peek, a syscall that cost about 3 µs a request on a VM
// when every reuse past 10 ms was checked.
const idleProbe = time.Second

// learnedProbe is the probe threshold of a target once it was seen to
// close a connection under a request, after keepAliveMin of idleness or
// more (no server keeps connections for less; a close sooner is a crash
// or a refusal and teaches nothing). A close after idleness d says only
// that the target's keep-alive is below d, not how far below: a share of d
// (d/4, as before) missed a 100 ms keep-alive after a close met 900 ms
// after the previous write, and the next POSTs, 150 ms apart, were lost
// too. So the threshold drops to its floor at once. Under load a
// connection is reused well within it and no request pays the peek; a
// connection idle that long is reused at a rate where a peek (about 3 µs)
// costs nothing that shows.
const (
	learnedProbe = 25 * time.Millisecond
	keepAliveMin = 50 * time.Millisecond
)

// closeWatch is shared by the connections to one target. closed counts the
// times one of them was found closed by the target (a probe, or a read
// ending in EOF or a reset): a target that goes away, killed or restarted,
// closes all of them at once, and its other connections, however briefly
// idle, are then each probed once before their next request.
//
// short is set once the target closed a connection under a request after
// keepAliveMin of idleness: the first request that meets such a close
// before any byte of its answer (a read ending, or a write of its body
// failing, as a body of several writes does). A target whose keep-alive
// timeout is shorter than idleProbe (HAProxy's http-keep-alive is often 1
// s or less) closes connections the probe would not look at, and a POST
// written into one fails; from then on, connections idle for learnedProbe
// or more are probed.
type closeWatch struct {
	closed atomic.Uint64
	short  atomic.Bool
}

// threshold is the idleness past which a connection is probed.
func (w *closeWatch) threshold() time.Duration {
	if w.short.Load() {
		return learnedProbe
	}
	return idleProbe
}

// learn notes a connection the target closed, before answering, after it
// had been idle for idle.
func (w *closeWatch) learn(idle time.Duration) {
	if idle >= keepAliveMin && idle < idleProbe && !w.short.Load() {
		w.short.Store(true)
	}
}

// probedConn is the fast path's upstream connection: before the first
// write of a request on a connection idle for idleProbe, or after another
// connection to its target was found closed, it peeks whether the upstream
// has closed it (or sent stray bytes) and then fails with errStaleConn,
// having written nothing. retryStale retries that on a new connection, and
// once every pooled connection was found closed it is a connection failure
// (classify), retried on another target whatever the method: so probing
// only where a close can have happened loses no request to a stale
// connection. A request written into a connection closed before the watch
// saw any close (the first after a target went away while none of its
// connections was in use) fails as a reset: retried if idempotent.
//
// fasthttp uses a connection from one goroutine at a time and hands it over
// through its pool's lock, so the fields need no synchronisation.
type probedConn struct {
	net.Conn
	raw      syscall.RawConn // nil: cannot peek (not a TCP connection)
	watch    *closeWatch
	seen     uint64        // watch.closed when the last request was written
	written  time.Time     // the last write (the clock is read once a request)
	idle     time.Duration // how long the connection was idle before the request under way
	lastRead bool          // the last operation was a read: a request ended
	// bodiless: the exchange under way is one whose answer has no body by
	// protocol (a HEAD request, a 1xx/204/304 answer), so an upstream that
	// sends one anyway (a Python app's do_HEAD = do_GET) leaves it on the
	// connection after the answer, where the next request would read it as
	// its own answer: the connection is peeked before its next request
	// however soon it comes, as net/http's Transport notices bytes arriving
	// on an idle connection and closes it.
	bodiless  bool
	firstRead bool // the next read is the first of an answer
	// served counts the exchanges answered on the connection, as the
	// forwarder saw them (fastForwarder.send): a write after a read may
	// start no request (one that failed is not sent again on this
	// connection). Atomic: for an answer with no body fasthttp has pooled
	// the connection again when send counts it.
	served atomic.Uint32
	// local is LocalAddr's answer, which carries the connection: fasthttp
	// keeps the last attempt's local address in the Response, so after a
	// failure the forwarder can tell a reused connection from a new one
	// (replayOnNewConn).
	local connAddr
	// wd and rd are the write and read deadlines set on the socket (zero:
	// none): see SetWriteDeadline.
	wd, rd time.Time
}

// SetWriteDeadline and SetReadDeadline bound a request's exchange by the
// route's timeout (fasthttp sets both at every request). Moving a socket's
// deadline removes and inserts a timer, about 650 instructions each, two a
// request; so a deadline is set up to 1/32 of the time it leaves later
// than asked, and kept while it falls at most that much after the one
// asked for. A route timeout of 10 s then ends at most 0.3 s late, and a
// connection reused within that moves its deadlines about once a 0.3 s
// rather than twice a request.
func (c *probedConn) SetWriteDeadline(t time.Time) error { return c.moveDeadline(&c.wd, t, false) }

func (c *probedConn) SetReadDeadline(t time.Time) error { return c.moveDeadline(&c.rd, t, true) }

// moveDeadline sets the socket's read or write deadline, whose value is
// *cur, for t as coarseDeadline decides.
func (c *probedConn) moveDeadline(cur *time.Time, t time.Time, read bool) error {
	set, keep := coarseDeadline(*cur, t, time.Now())
	if keep {
		return nil
	}
	*cur = set
	if read {
		return c.Conn.SetReadDeadline(set)
	}
	return c.Conn.SetWriteDeadline(set)
}

// SetDeadline is exact: fasthttp sets both only for a TLS handshake,
// which dialTLS has made.
func (c *probedConn) SetDeadline(t time.Time) error {
	c.wd, c.rd = t, t
	return c.Conn.SetDeadline(t)
}

// Handshake tells fasthttp that an https:// target's connection speaks
// TLS already (dialTLS): it wraps a connection without this method in TLS
// of its own. A plain connection has nothing to do.
func (c *probedConn) Handshake() error {
	if tc, ok := c.Conn.(*tls.Conn); ok {
		return tc.Handshake()
	}
	return nil
}

// coarseDeadline decides, at now, a deadline asked for, t, on a socket
// whose deadline is cur: keep cur when t <= cur <= t + (t-now)/32, else
// set t + (t-now)/32. A zero t (no deadline) is kept only if none is set.
func coarseDeadline(cur, t, now time.Time) (set time.Time, keep bool) {
	if t.IsZero() {
		return t, cur.IsZero()
	}
	slack := max(t.Sub(now), 0) / 32
	if !cur.IsZero() && !cur.Before(t) && !cur.After(t.Add(slack)) {
		return cur, true
	}
	return t.Add(slack), false
}

// newProbedConn wraps c, the exchange's connection (TCP, or TLS over it),
// peeking at tcp, the socket under it.
func newProbedConn(c, tcp net.Conn, w *closeWatch) net.Conn {
	// lastRead: the first request starts a request as any other (it is
	// not peeked: it was just written).
	p := &probedConn{Conn: c, watch: w, seen: w.closed.Load(), written: time.Now(), lastRead: true}
	p.local = connAddr{Addr: c.LocalAddr(), conn: p}
	if sc, ok := tcp.(syscall.Conn); ok {
		p.raw, _ = sc.SyscallConn()
	}
	return p
}

// Read notes a connection the target closed in the watch.
func (c *probedConn) Read(b []byte) (int, error) {
	c.lastRead = true
	n, err := c.Conn.Read(b)
	if c.firstRead && n > 0 {
		c.firstRead = false
		c.bodiless = c.bodiless || bodilessStatus(b[:n])
	}
	if err != nil && (errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET)) {
		c.watch.closed.Add(1)
		if c.firstRead && n == 0 {
			c.watch.learn(c.idle)
		}
	}
	return n, err
}

// Write peeks first when a request starts (a read came last) on a
// connection whose previous request was written the watch's threshold ago
// or more (idleProbe, or less once the target was seen to close sooner), or
// when the watch saw a close since, or after an answer that has no body by
// protocol (bodiless): counting from the write overstates idleness by the
// upstream's answer time, which at worst costs a needless peek. Over TLS
// the bytes seen here are the plaintext (dialTLS); the peek looks at the
// socket, where any record on an idle connection (a close_notify, stray
// data) means it cannot carry a request.
func (c *probedConn) Write(b []byte) (int, error) {
	if c.lastRead {
		now := time.Now()
		closed := c.watch.closed.Load()
		idle := now.Sub(c.written)
		if idle >= c.watch.threshold() || closed != c.seen || c.bodiless {
			if c.closedByPeer() {
				c.watch.closed.Add(1)
				return 0, errStaleConn
			}
		}
		c.written, c.idle, c.seen, c.lastRead = now, idle, closed, false
		c.bodiless, c.firstRead = bytes.HasPrefix(b, headLine), true
	}
	n, err := c.Conn.Write(b)
	if err != nil && (errors.Is(err, syscall.EPIPE) || errors.Is(err, syscall.ECONNRESET)) {
		// The target closed the connection under a request whose body
		// went out in several writes: no answer will be read.
		c.watch.closed.Add(1)
		if c.firstRead {
			c.watch.learn(c.idle)
		}
	}
	return n, err
}

// LocalAddr is the socket's local address, carrying the connection.
func (c *probedConn) LocalAddr() net.Addr { return &c.local }

// connAddr is a probedConn's local address.
type connAddr struct {
	net.Addr
	conn *probedConn
}

// lastConn is the connection a fasthttp exchange last ran on (resp's
// local address), nil if it got none.
func lastConn(resp *fasthttp.Response) *probedConn {
	if a, ok := resp.LocalAddr().(*connAddr); ok {
		return a.conn
	}
	return nil
}

// headLine starts a HEAD request (fasthttp writes the request line in the
// connection's first write of a request).
var headLine = []byte("HEAD ")

// bodilessStatus reports an answer, from its first bytes, whose status
// (1xx, 204, 304) says it has no body.
func bodilessStatus(b []byte) bool {
	if len(b) < 12 || !bytes.HasPrefix(b, statusLine) || b[8] != ' ' {
		return false
	}
	return b[9] == '1' || (b[9] == '2' || b[9] == '3') && b[10] == '0' && b[11] == '4'
}

// statusLine starts an HTTP/1.x status line.
var statusLine = []byte("HTTP/1.")

// closedByPeer peeks one byte without waiting: end of stream (the upstream
// closed) or data nobody asked for both mean the connection cannot carry a
// new request. It peeks through Control, not RawConn.Read, which calls
// nothing once the previous request's read deadline has passed: an idle
// connection older than the route's timeout was never peeked at.
func (c *probedConn) closedByPeer() bool {
	if c.raw == nil {
		return false
	}
	var buf [1]byte
	stale := false
	_ = c.raw.Control(func(fd uintptr) {
		// 0 bytes: end of stream; 1: stray data; EAGAIN: alive and quiet.
		_, _, err := syscall.Recvfrom(int(fd), buf[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		stale = err == nil || err == syscall.ECONNRESET
	})
	if tc, ok := c.Conn.(*tls.Conn); ok && !stale {
		return tlsHolds(tc, c.rd)
	}
	return stale
}

// tlsHolds reports whether tc holds what it read from the socket and has
// not handed over: a record the upstream sent past its answer, which came
// in the same read as the answer's last record (a HEAD's body written
// right after its head, two records in one segment), or a close_notify.
// The socket peek cannot see those, and the next request would read them
// as its answer: another client served a body, or a whole answer, that
// the upstream wrote for the HEAD. A read with a deadline already past
// returns what tc holds, or a timeout without a system call (the poller
// refuses at once), and a timeout leaves a tls.Conn usable; rd is the read
// deadline the socket had (probedConn.rd).
func tlsHolds(tc *tls.Conn, rd time.Time) bool {
	if tc.SetReadDeadline(longAgo) != nil {
		return true
	}
	var b [1]byte
	n, err := tc.Read(b[:])
	if tc.SetReadDeadline(rd) != nil {
		return true
	}
	return n > 0 || !errors.Is(err, os.ErrDeadlineExceeded)
}
