package proxy

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/valyala/fasthttp"

	"sluice/config"
)

// transports are the standard forwarder's upstream transports: one per
// protocol and connectTimeout, kept for the gateway's lifetime so that
// connections outlive snapshots. Safe for concurrent use.
type transports struct {
	mu sync.Mutex
	m  map[transportKey]*http.Transport
}

type transportKey struct {
	protocol      string
	connect, idle time.Duration
}

// transportFor is the upstream transport for protocol with connect as its
// dial timeout: HTTP/1.1, or HTTP/2 (h2c with prior knowledge, or h2 over
// TLS). A test's Deps.Transport serves every upstream.
func (g *Gateway) transportFor(protocol string, connect, idle time.Duration) http.RoundTripper {
	if g.deps.Transport != nil {
		return g.deps.Transport
	}
	k := transportKey{protocol, connect, idle}
	g.transports.mu.Lock()
	defer g.transports.mu.Unlock()
	if t := g.transports.m[k]; t != nil {
		return t
	}
	if g.transports.m == nil {
		g.transports.m = map[transportKey]*http.Transport{}
	}
	var t *http.Transport
	switch protocol {
	case config.ProtocolH2C:
		t = newH2Transport(true, connect, idle)
	case config.ProtocolH2:
		t = newH2Transport(false, connect, idle)
	default:
		t = newTransport(connect, idle)
	}
	g.transports.m[k] = t
	return t
}

// retain closes the idle connections of, and forgets, every transport
// whose key is not in keep, as fastClients.retain does for the fast path:
// a reload that changes an upstream's connectTimeout leaves no pool of
// idle connections behind it for the 90 s of IdleConnTimeout. Requests
// still running on an older snapshot hold their transport and finish;
// the connections they leave idle are closed after drain (the longest
// route timeout of that snapshot): an h2 connection with a stream open is
// not closed by CloseIdleConnections, nor marked to close once idle, and
// a retry on the transport pools an HTTP/1 connection again.
func (ts *transports) retain(keep map[transportKey]bool, drain time.Duration) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	for k, t := range ts.m {
		if !keep[k] {
			time.AfterFunc(drain, t.CloseIdleConnections)
		}
	}
	retainPools(ts.m, keep)
}

// newTransport is tuned for a gateway: many idle keep-alive connections per
// upstream (the default of 2 makes every burst dial anew), dials bounded by
// the upstream's connectTimeout, and no transparent compression: without
// DisableCompression the Transport asks the upstream for gzip on behalf of
// clients that did not, and decompresses in the gateway — a proxy passes
// encodings through (as the fast path does).
func newTransport(connect, idle time.Duration) *http.Transport {
	d := &net.Dialer{Timeout: connect, KeepAlive: 30 * time.Second}
	return &http.Transport{
		Proxy: nil,
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			c, err := d.DialContext(ctx, network, addr)
			if err != nil {
				return nil, &connectError{err}
			}
			return c, nil
		},
		MaxIdleConns:          4096,
		MaxIdleConnsPerHost:   1024,
		IdleConnTimeout:       idle, // upstreams.*.idleTimeout
		TLSHandshakeTimeout:   tlsHandshakeTimeout,
		ExpectContinueTimeout: 1 * time.Second,
		ForceAttemptHTTP2:     false,
		DisableCompression:    true,
		// The fast path's limit (its read buffer, fastClients); net/http's
		// default of 10 MB let an upstream make the gateway hold about
		// 13 MB a request (9,000 fields of 1 KB: 40 slow clients, 526 MB).
		// A 1xx answer's fields count against it too.
		MaxResponseHeaderBytes: maxUpstreamHeaderBytes,
	}
}

// newH2Transport is newTransport speaking only HTTP/2: with prior
// knowledge over plain TCP (h2c), or over TLS (h2).
func newH2Transport(h2c bool, connect, idle time.Duration) *http.Transport {
	t := newTransport(connect, idle)
	var p http.Protocols
	if h2c {
		p.SetUnencryptedHTTP2(true)
	} else {
		p.SetHTTP2(true)
	}
	t.Protocols = &p
	t.ForceAttemptHTTP2 = true
	return t
}

// connectError marks a failed dial: nothing was sent, so any request may be
// sent to another target.
type connectError struct{ err error }

func (e *connectError) Error() string { return e.err.Error() }
func (e *connectError) Unwrap() error { return e.err }

// classify tells how an attempt's transport error failed (see failKind),
// for both forwarders' clients.
func classify(err error) failKind {
	var ce *connectError
	var op *net.OpError
	// A certificate that does not verify fails the TLS handshake, before
	// anything is sent (other handshake errors, like a TLS 1.3 alert, may
	// come after the request was written).
	var cv *tls.CertificateVerificationError
	switch {
	case errors.As(err, &ce), errors.As(err, &op) && op.Op == "dial", errors.As(err, &cv),
		// Every pooled connection fasthttp tried was found closed before
		// anything was written to it (a target that went away).
		errors.Is(err, errStaleConn):
		return failConnect
	case isTimeout(err), answerBegan(err):
		return failOther
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE), errors.Is(err, fasthttp.ErrConnectionClosed),
		errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return failReset
	}
	return streamReset(err)
}

// answerBegan reports a fast-path failure after part of the answer's
// head came: fasthttp wraps the reset or EOF that cut it in this text (and
// a cut before any byte is a bare io.EOF or ErrConnectionClosed). Such a
// target answered, so the request is not sent again, whatever its method
// (SPEC section 9: a reset "before any byte of the answer"); net/http's
// Transport reports the same case as no reset. TestRetrySafety's "reset in
// the head" pins the text.
func answerBegan(err error) bool {
	return strings.Contains(err.Error(), "error when reading response headers: ")
}

// streamReset classifies an HTTP/2 upstream's RST_STREAM, HTTP/2's reset of
// one request, as a reset: sent again only when the method is idempotent
// and its body is kept (even REFUSED_STREAM, which says the target did not
// process it, may come after part of a streamed body was read). net/http's
// stream error is of an unexported type, so it is told by its text
// ("stream error: stream ID 1; INTERNAL_ERROR; received from peer"), which
// TestH2StreamResetIsRetried pins.
func streamReset(err error) failKind {
	msg := err.Error()
	if strings.Contains(msg, "stream error: ") && strings.HasSuffix(msg, "; received from peer") {
		return failReset
	}
	return failOther
}
