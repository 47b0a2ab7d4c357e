package proxy

import (
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/url"
	"sync"
	"syscall"
	"time"

	"github.com/valyala/fasthttp"
)

// fastTarget is one upstream target as the fast path sends to it.
type fastTarget struct {
	hc       *fasthttp.HostClient // shared by every snapshot naming this scheme://host and connect timeout
	key      string               // the client's key in fastClients
	url      *url.URL
	host     []byte // the Host header: the target's host, as SetURL makes it
	https    bool
	joinPath bool // the target has a path or a query to merge
}

// fastClients holds one fasthttp.HostClient (a keep-alive connection pool)
// per scheme://host and connect timeout. Like the standard Transport it outlives snapshots, so a
// reload keeps warm connections; a reload drops the clients no route names
// any more. Safe for concurrent use.
type fastClients struct {
	mu sync.Mutex
	m  map[string]*fasthttp.HostClient
}

// target returns the fast target of u, whose dials are bounded by
// connect and whose idle connections are closed after idle, creating its
// client if needed.
func (c *fastClients) target(u *url.URL, connect, idle time.Duration) (*fastTarget, error) {
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, errors.New("proxy: fast forwarder: target scheme must be http or https")
	}
	if u.Host == "" {
		return nil, errors.New("proxy: fast forwarder: target has no host")
	}
	key := u.Scheme + "://" + u.Host + " " + connect.String() + " " + idle.String()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[string]*fasthttp.HostClient{}
	}
	hc := c.m[key]
	if hc == nil {
		hc = newHostClient(u, connect, idle)
		c.m[key] = hc
	}
	return &fastTarget{
		hc:       hc,
		key:      key,
		url:      u,
		host:     []byte(u.Host),
		https:    u.Scheme == "https",
		joinPath: u.Path != "" || u.RawPath != "" || u.RawQuery != "",
	}, nil
}

// retain closes the idle connections of, and forgets, every client whose
// key is not in keep. Requests still running on an older
// snapshot hold their client and finish normally.
func (c *fastClients) retain(keep map[string]bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	retainPools(c.m, keep)
}

// retainPools closes the idle connections of, and deletes from m, every
// pool whose key is not in keep: a reload's upstream clients, on either
// forwarder. The caller holds m's lock.
func retainPools[K comparable, P interface{ CloseIdleConnections() }](m map[K]P, keep map[K]bool) {
	for k, p := range m {
		if !keep[k] {
			p.CloseIdleConnections()
			delete(m, k)
		}
	}
}

// newHostClient is tuned like the standard Transport: many keep-alive
// connections per target, dials bounded by connect (a failed dial is a
// connectError), no User-Agent of its own, paths
// sent as given, response bodies streamed (the forwarder decides per
// response whether to copy or stream-and-flush).
func newHostClient(u *url.URL, connect, idle time.Duration) *fasthttp.HostClient {
	addr := u.Host
	if u.Port() == "" {
		if u.Scheme == "https" {
			addr = net.JoinHostPort(u.Hostname(), "443")
		} else {
			addr = net.JoinHostPort(u.Hostname(), "80")
		}
	}
	watch := new(closeWatch)
	var tlsConf *tls.Config
	if u.Scheme == "https" {
		tlsConf = &tls.Config{ServerName: u.Hostname()} // as fasthttp's own
	}
	return &fasthttp.HostClient{
		Addr:  addr,
		IsTLS: tlsConf != nil,
		// net.Dialer like the standard Transport's (connect, TCP keep-alive),
		// not fasthttp's default dialer, whose DNS cache runs a goroutine
		// for the life of the process.
		DialTimeout: func(addr string, timeout time.Duration) (net.Conn, error) {
			d := net.Dialer{Timeout: min(timeout, connect), KeepAlive: 30 * time.Second}
			c, err := d.Dial("tcp", addr)
			if err != nil {
				return nil, &connectError{err}
			}
			if tlsConf == nil {
				return newProbedConn(c, c, watch), nil
			}
			return dialTLS(c, tlsConf, watch)
		},
		MaxConns:                  4096,
		MaxConnWaitTimeout:        5 * time.Second,
		MaxIdleConnDuration:       idle, // upstreams.*.idleTimeout
		MaxIdemponentCallAttempts: maxStaleAttempts,
		RetryIfErr:                retryStale,
		ReadBufferSize:            maxUpstreamHeaderBytes, // also the response header limit
		WriteBufferSize:           8 << 10,
		NoDefaultUserAgentHeader:  true,
		DisablePathNormalizing:    true,
		StreamResponseBody:        true,
	}
}

// retryStale retries, once, a request whose pooled connection was found
// closed before anything was written (errStaleConn; a streamed body may
// already be partly read, so not that), as net/http's Transport does.
// fasthttp would otherwise retry every idempotent request on any error;
// the other retry net/http makes, a body-less request whose reused
// connection closed before an answer, is replayOnNewConn's.
func retryStale(req *fasthttp.Request, _ int, err error) (resetTimeout, retry bool) {
	return false, !req.IsBodyStream() && errors.Is(err, errStaleConn)
}

// maxStaleAttempts bounds fasthttp's attempts of one request, of which
// retryStale lets only those found stale go again: each drops one pooled
// connection the target closed, so a pool whose every connection went
// stale together (a burst of N, then a pause past the keep-alive) takes
// N+1 attempts, the last on a new connection. Two attempts answered a
// burst of two or more with 502 where net/http got 200.
const maxStaleAttempts = 64

// maxUpstreamHeaderBytes bounds an upstream answer's header block on both
// forwarders (the fast path's read buffer holds it whole): past it the
// answer is a 502.
const maxUpstreamHeaderBytes = 32 << 10

// closedUnanswered is the connection of a failed exchange (fasthttp's
// last, from resp) if the target closed it before any byte of the answer,
// else nil. fasthttp's EOF is such a close (over TLS, the close_notify
// alert); a reset may come after part of an answer (firstRead is false
// then), and an answer begun is not sent again (SPEC §9).
func closedUnanswered(resp *fasthttp.Response, err error) *probedConn {
	c := lastConn(resp)
	if c == nil {
		return nil
	}
	if errors.Is(err, fasthttp.ErrConnectionClosed) || errors.Is(err, io.EOF) ||
		(errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)) && c.firstRead {
		return c
	}
	return nil
}

// replayOnNewConn notes a close the target made under a request before
// answering (its watch learns the keep-alive is short, as the
// connection's Read has if it met the end of the stream itself: a reset's
// error may come from elsewhere) and reports whether
// the exchange is sent once more, on a new connection (send closes the
// idle ones first), as net/http's Transport does and not as a retry
// (routes' retries and retryBudget are for failing targets), and once
// only: a replayable body-less GET, HEAD, OPTIONS or TRACE
// whose connection had carried a request before, the race of an upstream
// closing an idle keep-alive connection under a new request. On a new
// connection the same close is the target's answer to this request:
// sending it again there would make a target that drops it see every
// attempt twice.
func replayOnNewConn(req *fasthttp.Request, resp *fasthttp.Response, err error) bool {
	c := closedUnanswered(resp, err)
	if c == nil {
		return false
	}
	c.watch.closed.Add(1)
	reused := c.served.Load() > 0
	if reused {
		c.watch.learn(c.idle)
	}
	return reused && !req.IsBodyStream() && len(req.Body()) == 0 &&
		(req.Header.IsGet() || req.Header.IsHead() || req.Header.IsOptions() || req.Header.IsTrace())
}

// tlsHandshakeTimeout bounds an upstream TLS handshake on both forwarders
// (the standard Transport's TLSHandshakeTimeout).
const tlsHandshakeTimeout = 5 * time.Second

// dialTLS makes the TLS connection to an https:// target on c, which the
// probedConn then wraps: it sees the exchange's plaintext, as over plain
// TCP, where wrapped by fasthttp's TLS it saw records. So over TLS too a
// HEAD or a 204 is known to leave no body (an upstream that sends one
// anyway leaves it for the next request, another client's), and a close
// under a request is a read ending in EOF, not the close_notify alert's
// bytes followed by the alert fasthttp wrote back as it closed, which hid
// how long the connection had been idle (a short keep-alive was never
// learned). The probedConn's Handshake tells fasthttp the TLS is done.
// The handshake writes no request, so its failure is a connectError: any
// method may go to another target.
func dialTLS(c net.Conn, conf *tls.Config, watch *closeWatch) (net.Conn, error) {
	tc := tls.Client(c, conf)
	_ = c.SetDeadline(time.Now().Add(tlsHandshakeTimeout))
	if err := tc.Handshake(); err != nil {
		c.Close()
		return nil, &connectError{err}
	}
	_ = c.SetDeadline(time.Time{})
	return newProbedConn(tc, c, watch), nil
}
