package proxy

import (
	"context"
	"crypto/tls"
	"net"
	"net/http"
	"syscall"
	"time"
)

// A throttle queue's wait ends early when the client goes away (SPEC §3:
// "A queued request whose client goes away leaves the queue"), and the call
// gives its slot back. The request's context says so for most requests,
// but net/http watches an HTTP/1.x connection for the client leaving only
// once the request body has been read: a POST waiting in the queue with its
// body unread would keep its place until the wait ended. For such a request
// the wait is cut into pieces of peerPoll, and after each the client's
// socket is asked whether the peer has closed it (Linux: TCP_INFO state
// CLOSE_WAIT or CLOSE; elsewhere the context alone).

// peerPoll is how often a queued request with an unread body checks that
// its client is still there: a tenth of a throttle spacing of 2 per second,
// cheap next to a wait (one getsockopt).
const peerPoll = 50 * time.Millisecond

type connKey struct{}

// ConnContext is the traffic servers' http.Server.ConnContext: it keeps
// each connection in its requests' contexts, so that a queued request can
// look at its socket.
func (g *Gateway) ConnContext(ctx context.Context, c net.Conn) context.Context {
	return context.WithValue(ctx, connKey{}, c)
}

// queueWait waits d in a throttle queue and reports whether the client was
// still there at the end.
func (s *Snapshot) queueWait(r *http.Request, d time.Duration) bool {
	ctx := r.Context()
	raw := unreadBodyConn(r)
	if raw == nil {
		return s.clock.Sleep(ctx, d)
	}
	end := s.clock.Now() + int64(d)
	for {
		left := time.Duration(end - s.clock.Now())
		if left <= 0 {
			return true
		}
		if !s.clock.Sleep(ctx, min(left, peerPoll)) || peerClosed(raw) {
			return false
		}
	}
}

// unreadBodyConn is the socket of an HTTP/1.x request whose body net/http
// has not read (so its context cannot see the client leave); nil for any
// other request, or one served without Gateway.ConnContext.
func unreadBodyConn(r *http.Request) syscall.RawConn {
	if r.ProtoMajor != 1 || r.Body == nil || r.Body == http.NoBody {
		return nil
	}
	c, _ := r.Context().Value(connKey{}).(net.Conn)
	for c != nil {
		switch t := c.(type) {
		case *tls.Conn:
			c = t.NetConn()
		case *sendConn:
			c = t.Conn
		case syscall.Conn:
			raw, err := t.SyscallConn()
			if err != nil {
				return nil
			}
			return raw
		default:
			return nil
		}
	}
	return nil
}
