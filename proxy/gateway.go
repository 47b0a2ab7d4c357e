// Package proxy serves traffic: a chi router built from the routes turns each
// request into (resource, origin, entrance, parameters), runs the guards in
// the order of docs/rules.md#combining-rules and forwards what passes. A reload builds a complete new
// Snapshot and swaps it in with one atomic store.
//
// Layer 5 of docs/architecture.md: it imports the guards (limiter, hotparam,
// limiter/circuit, limiter/system), upstream and config; not admin, and not
// lifecycle or package main.
package proxy

import (
	"context"
	"crypto/rand"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"sluice/hotparam"
	"sluice/limiter"
	"sluice/limiter/circuit"
	"sluice/limiter/system"
	ups "sluice/upstream"
)

// Observer receives one resource's request outcomes (Prometheus in
// production). Implementations must be safe for concurrent use and should
// not allocate.
type Observer interface {
	Pass(elapsed time.Duration)
	Block(reason string, elapsed time.Duration)
	DryRun()
	Error(elapsed time.Duration)
	// TooLarge counts a request answered 413: its body passed the
	// route's maxBodyBytes.
	TooLarge()
}

// prioritizedObserver is an Observer that counts prioritized calls'
// waits (sluice_prioritized_waits_total).
type prioritizedObserver interface {
	PrioritizedWait()
}

type nopObserver struct{}

func (nopObserver) Pass(time.Duration)          {}
func (nopObserver) Block(string, time.Duration) {}
func (nopObserver) DryRun()                     {}
func (nopObserver) Error(time.Duration)         {}
func (nopObserver) TooLarge()                   {}

// TokenService decides clusterMode rules across gateways: flow rules'
// windows and param rules' values (sluice/cluster on Redis).
type TokenService interface {
	limiter.TokenService
	hotparam.TokenService
}

// Deps are what the gateway needs from outside; zero values are usable.
type Deps struct {
	Log zerolog.Logger
	// Observer returns the observer of a resource; nil: nothing observed.
	Observer func(resource string) Observer
	// Cluster decides clusterMode flow and param rules; nil: they apply locally.
	Cluster TokenService
	// CPU feeds system.maxCpuUsage; nil: CPU is never over the limit.
	CPU system.CPUUsage
	// OnCircuit is told of every circuit breaker state change.
	OnCircuit func(resource string, from, to circuit.State)
	// Transport overrides the standard forwarder's upstream transport (tests).
	Transport http.RoundTripper
	// Clock is the time every guard is given and throttle waits are spent
	// on; nil: the monotonic clock (Now is ns since New) and real waits.
	// Tests pass a synthetic one, to drive windows, queues and breakers
	// through HTTP without sleeping.
	Clock Clock
	// Upstreams receives the upstreams' events (requests per target and
	// code, retries, ejections, panic mode); nil: none.
	Upstreams ups.Observer
	// OnConnRefused is told of every client connection the gateway closed,
	// with why (the Refused* reasons): at accept, past server.maxConnections
	// or maxConnectionsPerIP or from a penalized peer; later, for its
	// streams' premature resets or a flood. nil: none.
	OnConnRefused func(reason string)
	// Forwarder, when set (auto | standard | fast, see CheckForwarder),
	// overrides every route's `forwarder:` (main passes SLUICE_FORWARDER).
	// Empty: each route's own setting.
	Forwarder string
	// StrictSNI is tls.strictSni as the gateway started (the TLS listener
	// reads it once, and so is it read here): a request over TLS whose
	// Host is not its connection's SNI is 421.
	StrictSNI bool
}

// Clock is the gateway's time. Now is ns on a monotonic timeline of any
// origin; Sleep waits d (a throttle rule's queue) unless ctx ends first,
// and reports whether d passed. Implementations must be safe for concurrent
// use and should not allocate.
type Clock interface {
	Now() int64
	Sleep(ctx context.Context, d time.Duration) bool
}

// monotonic is the production Clock: time since base on the monotonic
// clock, and real waits.
type monotonic struct{ base time.Time }

func (m monotonic) Now() int64 { return int64(time.Since(m.base)) }

func (monotonic) Sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// Gateway is the http.Handler of the traffic listener. Safe for concurrent
// use; its zero value is not usable, build it with New.
type Gateway struct {
	deps  Deps
	cur   atomic.Pointer[Snapshot]
	pool  exchangePool
	clock Clock
	// upstreams holds the targets' health and counts across snapshots, and
	// runs their probes; transports their connections.
	upstreams  *ups.Pool
	transports transports

	loadMu        sync.Mutex
	forwarder     string // the override in force ("" = none)
	forwarderMode forwarderMode
	forwarderErr  error // a bad override fails every Load
	fastClients   fastClients
	fastPool      fastCallPool
	copyBuffers   bufferPool
	stdCalls      *stdCalls // the standard transport's ReverseProxies
	tunnels       tunnels   // the WebSockets open, across snapshots
	// conns counts the client connections open, across snapshots, against
	// the caps (conncap.go); autoMaxConns is server.maxConnections' default.
	conns        connCounts
	autoMaxConns int
	refusedLog   zerolog.Logger // Deps.Log, at most one refusal a second
	// pkKey keys the hash of a param value in a RateLimit partition key
	// (pk): random per gateway process, so that pk cannot be turned back
	// into the value by hashing guesses.
	pkKey [32]byte
}

// New returns a gateway with no rules loaded: it answers 503 until Load.
func New(deps Deps) *Gateway {
	g := &Gateway{deps: deps, clock: deps.Clock}
	_, _ = rand.Read(g.pkKey[:]) // never fails (crypto/rand)
	if g.clock == nil {
		g.clock = monotonic{base: time.Now()}
	}
	if g.deps.Observer == nil {
		g.deps.Observer = func(string) Observer { return nopObserver{} }
	}
	g.stdCalls = newStdCalls(&g.copyBuffers, deps.Log)
	g.autoMaxConns = autoMaxConnections()
	g.refusedLog = deps.Log.Sample(&zerolog.BurstSampler{Burst: 1, Period: time.Second})
	g.upstreams = ups.NewPool(ups.Options{Log: deps.Log, Now: g.Now, Observer: deps.Upstreams})
	g.forwarder = deps.Forwarder
	if g.forwarder != "" {
		if g.forwarderMode, g.forwarderErr = parseForwarderMode(g.forwarder); g.forwarderErr != nil {
			g.forwarderErr = fmt.Errorf("%w (the forwarder override for every route)", g.forwarderErr)
		}
	}
	return g
}

// Now is the time every guard is given (Deps.Clock; by default ns since
// New). Callers reading statistics (Flow.Stats) must use this clock.
func (g *Gateway) Now() int64 { return g.clock.Now() }

// Close stops the upstreams' health probes. The gateway still serves, with
// the health its targets last had.
func (g *Gateway) Close() { g.upstreams.Close() }

// Upstreams describes every upstream and target of the snapshot in force,
// at now (Now's clock).
func (g *Gateway) Upstreams(now int64) []ups.UpstreamStatus { return g.upstreams.Status(now) }

// Current returns the snapshot in force (nil before the first Load).
func (g *Gateway) Current() *Snapshot { return g.cur.Load() }

// ServeHTTP serves one request with the snapshot in force when it arrived.
func (g *Gateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s := g.cur.Load()
	if s == nil {
		writeJSON(w, http.StatusServiceUnavailable, bodyUnavailable)
		return
	}
	var start int64
	c := serveConn(r)
	if c != nil {
		defer c.served()
	}
	if r.ProtoMajor == 2 {
		defer boundStreamFlush(w, r, s.sendTimeout)
		if c != nil {
			start = s.clock.Now()
			defer g.endStream(c, r, start)
		}
	}
	if s.accessLog && start == 0 {
		start = s.clock.Now()
	}
	v, bad := readTarget(r, s.target)
	if bad != badNone {
		s.refuse(w, r, badTargetStatus(bad), badTargetBodies[bad], start)
		return
	}
	if status := h2EmptyBody(w, r, s.headTimeout); status != 0 {
		body := badTargetBodies[badLength]
		if status == http.StatusRequestTimeout {
			body = bodyClientTimeout
		}
		s.refuse(w, r, status, body, start)
		return
	}
	dropH2CUpgrade(r)
	ignoreOldExpect(r)
	joinCookieLines(r)
	var b *clientBody
	if r.Body != nil && r.Body != http.NoBody && r.ContentLength != 0 {
		b = &clientBody{rc: r.Body, rw: w, length: r.ContentLength}
		r.Body = b
	}
	if missed := s.router.serve(w, r, v); missed != 0 && s.accessLog {
		s.accessMiss(r, v.path, missed, nil, start)
	}
	if b == nil {
		return
	}
	switch {
	case b.eof.Load():
	case b.tooLarge.Load():
		// A 413 for a body past maxBodyBytes: the client is most likely
		// still writing it. net/http reads up to 256 KiB more before it
		// answers (clientBody.Close leaves the body to it); for at most
		// tooLargeLinger, as nginx's lingering close does, so that a client
		// that sent a little too much reads its 413 on a connection kept
		// open instead of meeting a reset while it writes.
		_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(tooLargeLinger))
	default:
		// The answer went out with the body unread (blocked, 404, upstream
		// failed or answered early). net/http would now read up to 256 KiB
		// more at the client's pace before sending it, so a client dribbling
		// its body ("slow POST") could hold the answer and the connection.
		// An expired read deadline makes that read fail at once; net/http
		// then answers and closes the connection.
		_ = http.NewResponseController(w).SetReadDeadline(time.Now())
	}
}

// refuse answers a request refused before routing, status with its JSON
// body, and writes its access line.
func (s *Snapshot) refuse(w http.ResponseWriter, r *http.Request, status int, body []byte, start int64) {
	writeJSON(w, status, body)
	if s.accessLog {
		s.accessMiss(r, r.RequestURI, status, body, start)
	}
}

// accessMiss writes the access line of a request no route served: its
// target refused before routing (400, with the reason's body as error) or
// routed nowhere (404, 405). nginx and Traefik log these too, and they are
// most of what a scanner sends. path is the target as it came when it was
// refused (at most maxLoggedTarget bytes of it), else the path routed.
func (s *Snapshot) accessMiss(r *http.Request, path string, status int, refused []byte, start int64) {
	method := r.Method
	if len(path) > maxLoggedTarget {
		path = path[:maxLoggedTarget]
	}
	if len(method) > maxLoggedTarget {
		method = method[:maxLoggedTarget]
	}
	e := s.log.Info().Str("method", method).Str("host", r.Host).Str("path", path).Int("status", status).
		Dur("latency", time.Duration(s.clock.Now()-start))
	if refused != nil {
		e = e.Str("decision", "badRequest").Str("error", strings.TrimSuffix(string(refused), "\n"))
	} else {
		e = e.Str("decision", "noRoute")
	}
	e.Msg("access")
}

// maxLoggedTarget caps the target (and method) an access line quotes from
// a refused request: net/http takes request lines up to its 1 MB header limit.
const maxLoggedTarget = 2048

// tooLargeLinger bounds how long a 413 waits for net/http to drain the
// rest of a body sent past maxBodyBytes (at most 256 KiB of it).
const tooLargeLinger = time.Second
