package proxy

import (
	"errors"
	"net"
	"syscall"
	"time"
)

// errStaleConn: a pooled upstream connection turned out, before anything
// was written to it, to have been closed by the upstream while idle.
var errStaleConn = errors.New("proxy: pooled upstream connection closed while idle")

// idleProbe is how long a pooled connection must have been idle to be
// checked before its next request. Upstreams close idle keep-alive
// connections without a word (Node and Apache after 5 s, gunicorn after 2);
// net/http's Transport sees that and retries, fasthttp would write the
// request into the closed connection and fail a POST with 502. Connections
// reused sooner (any busy upstream) are not checked, so the check costs
// nothing under load and one non-blocking peek otherwise.
const idleProbe = 10 * time.Millisecond

// probedConn is the fast path's upstream connection: before the first
// write of a request on a connection idle for idleProbe, it peeks whether
// the upstream has closed it (or sent stray bytes) and then fails with
// errStaleConn, having written nothing, which retryStale retries on a new
// connection whatever the method.
//
// fasthttp uses a connection from one goroutine at a time and hands it over
// through its pool's lock, so the fields need no synchronisation.
type probedConn struct {
	net.Conn
	raw      syscall.RawConn // nil: cannot peek (not a TCP connection)
	written  time.Time       // the last write (the clock is read once a request)
	lastRead bool            // the last operation was a read: a request ended
}

func newProbedConn(c net.Conn) net.Conn {
	p := &probedConn{Conn: c, written: time.Now()}
	if sc, ok := c.(syscall.Conn); ok {
		p.raw, _ = sc.SyscallConn()
	}
	return p
}

func (c *probedConn) Read(b []byte) (int, error) {
	c.lastRead = true
	return c.Conn.Read(b)
}

// Write peeks first when a request starts (a read came last) on a
// connection whose previous request was written idleProbe ago or more:
// counting from the write overstates idleness by the upstream's answer
// time, which at worst costs a needless peek.
func (c *probedConn) Write(b []byte) (int, error) {
	if c.lastRead {
		now := time.Now()
		if now.Sub(c.written) >= idleProbe && c.closedByPeer() {
			return 0, errStaleConn
		}
		c.written, c.lastRead = now, false
	}
	return c.Conn.Write(b)
}

// closedByPeer peeks one byte without waiting: end of stream (the upstream
// closed) or data nobody asked for both mean the connection cannot carry a
// new request.
func (c *probedConn) closedByPeer() bool {
	if c.raw == nil {
		return false
	}
	var buf [1]byte
	stale := false
	_ = c.raw.Read(func(fd uintptr) bool {
		// 0 bytes: end of stream; 1: stray data; EAGAIN: alive and quiet.
		_, _, err := syscall.Recvfrom(int(fd), buf[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		stale = err == nil || err == syscall.ECONNRESET
		return true // never wait
	})
	return stale
}
