package proxy

import (
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"sluice/config"
	"sluice/internal/ring"
)

// Connection caps (server.maxConnections, server.maxConnectionsPerIP). A
// client connection costs a descriptor and about 46 KB while it idles, and
// no rule counts it until it sends a request: without a cap, clients that
// open connections and send nothing take the descriptors the upstream
// dials and Redis need (the gateway then answers 502 to everyone) and the
// memory with them. A connection past a cap is closed as it is accepted,
// as Envoy's overload manager does, rather than left in the kernel's
// backlog (nginx's way at worker_connections), where it would wait
// unanswered and hold a place in the queue its peers need.

// connCounts counts the open client connections of the traffic listeners,
// in all and per peer address. Shared by every listener of a gateway and
// kept across snapshots, so that a reload that changes a cap compares it
// with what is open. Safe for concurrent use.
type connCounts struct {
	open atomic.Int64
	mu   sync.Mutex
	// perIP counts each peer's open connections; an address leaves it when
	// its last connection closes, so its size is the number of peers with
	// a connection open (which the caps bound).
	perIP map[netip.Addr]int32
	// resets counts each peer's premature stream ends over the sliding
	// prematureWindow, and penalized holds until when a peer's new connections are
	// refused (resets.go). Both hold only peers that reset streams, and
	// are swept of what is over when they grow past sweepAt.
	resets    map[netip.Addr]ring.Coarse
	penalized map[netip.Addr]time.Time
	// sweepResets and sweepPenalized are the sizes at which each is swept
	// next: twice what a sweep left, at least sweepAt, so that a table
	// of many peers still within their window is not walked at every
	// insert.
	sweepResets, sweepPenalized int
}

// sweepAt is the least size at which resets and penalized are swept.
const sweepAt = 4096

// connLimits are the caps in force, from a snapshot: 0 is none.
type connLimits struct{ total, perIP int }

// Why a connection was refused (Deps.OnConnRefused): closed at accept,
// past a cap or while its peer is penalized, or later, for its streams'
// resets (resets.go) or a flood (floods.go).
const (
	RefusedMaxConnections      = "maxConnections"
	RefusedMaxConnectionsPerIP = "maxConnectionsPerIP"
	RefusedPenalized           = "penalized"
	RefusedPrematureResets     = "prematureResets"
	RefusedFlood               = "flood"
)

// RefusedReasons are the Refused* reasons, each a series of its own from
// the start (sluice_connections_refused_total).
func RefusedReasons() []string {
	return []string{RefusedMaxConnections, RefusedMaxConnectionsPerIP, RefusedPenalized, RefusedPrematureResets, RefusedFlood}
}

// admit counts a connection from ip in, or reports which cap it would pass
// ("" when admitted). A connection admitted must be given back with leave.
func (cc *connCounts) admit(ip netip.Addr, lim connLimits) string {
	if n := cc.open.Add(1); lim.total > 0 && n > int64(lim.total) {
		cc.open.Add(-1)
		return RefusedMaxConnections
	}
	cc.mu.Lock()
	if len(cc.penalized) > 0 && time.Now().Before(cc.penalized[penaltyKey(ip)]) {
		cc.mu.Unlock()
		cc.open.Add(-1)
		return RefusedPenalized
	}
	n := cc.perIP[ip]
	if lim.perIP > 0 && int(n) >= lim.perIP {
		cc.mu.Unlock()
		cc.open.Add(-1)
		return RefusedMaxConnectionsPerIP
	}
	if cc.perIP == nil {
		cc.perIP = make(map[netip.Addr]int32)
	}
	cc.perIP[ip] = n + 1
	cc.mu.Unlock()
	return ""
}

// leave gives back a connection admit counted in.
func (cc *connCounts) leave(ip netip.Addr) {
	cc.open.Add(-1)
	cc.mu.Lock()
	if n := cc.perIP[ip] - 1; n > 0 {
		cc.perIP[ip] = n
	} else {
		delete(cc.perIP, ip)
	}
	cc.mu.Unlock()
}

// premature counts a premature stream end of ip at now and reports
// whether ip is, or now becomes, penalized: its connections are then
// closed as they end a stream prematurely, and its new ones refused. A
// trusted peer is counted by connection only (endStream).
func (cc *connCounts) premature(ip netip.Addr, now time.Time, trusted bool) bool {
	if trusted {
		return false
	}
	ip = penaltyKey(ip)
	cc.mu.Lock()
	defer cc.mu.Unlock()
	if now.Before(cc.penalized[ip]) {
		return true
	}
	// The premature ends of the sliding window that ends now, as
	// hotparam counts a value's passes and blocks of the last minute.
	t, w := monoOf(now), int64(prematureWindow)
	r := cc.resets[ip]
	r.Add(t, w, 0, 1)
	if n, _ := r.Sum(t, w); n < prematurePeerStreams {
		if cc.resets == nil {
			cc.resets = make(map[netip.Addr]ring.Coarse)
		}
		cc.sweep(now)
		cc.resets[ip] = r
		return false
	}
	delete(cc.resets, ip)
	cc.penalize(ip, now)
	return true
}

// penaltyKey is the address a penalty and a peer's resets are kept under:
// an IPv4 address, or an IPv6 address's /64, which one host is given
// whole (RFC 6177) and could otherwise step through for a fresh address
// at each penalty.
func penaltyKey(ip netip.Addr) netip.Addr {
	if ip.Is4() {
		return ip
	}
	p, _ := ip.Prefix(64)
	return p.Addr()
}

// penalize refuses ip's new connections until penaltyFor after now. The
// caller holds cc.mu.
func (cc *connCounts) penalize(ip netip.Addr, now time.Time) {
	if cc.penalized == nil {
		cc.penalized = make(map[netip.Addr]time.Time)
	}
	cc.sweep(now)
	cc.penalized[penaltyKey(ip)] = now.Add(penaltyFor)
}

// sweep drops the windows and penalties that are over, once a map has
// grown to its sweep size: peers that stopped resetting leave no trace,
// and each entry is walked a bounded number of times on average. The
// caller holds cc.mu.
func (cc *connCounts) sweep(now time.Time) {
	if len(cc.resets) >= max(sweepAt, cc.sweepResets) {
		for ip, r := range cc.resets {
			if n, _ := r.Sum(monoOf(now), int64(prematureWindow)); n == 0 {
				delete(cc.resets, ip)
			}
		}
		cc.sweepResets = 2 * len(cc.resets)
	}
	if len(cc.penalized) >= max(sweepAt, cc.sweepPenalized) {
		for ip, until := range cc.penalized {
			if !now.Before(until) {
				delete(cc.penalized, ip)
			}
		}
		cc.sweepPenalized = 2 * len(cc.penalized)
	}
}

// peerIP is the TCP peer's address, IPv4-mapped IPv6 unmapped so that one
// client counts as one whichever way it is written; the zero Addr for a
// connection that is not TCP (tests' pipes), which all count as one peer.
func peerIP(c net.Conn) netip.Addr {
	if a, ok := c.RemoteAddr().(*net.TCPAddr); ok {
		if ip, ok := netip.AddrFromSlice(a.IP); ok {
			return ip.Unmap()
		}
	}
	return netip.Addr{}
}

// OpenConnections is the number of client connections open on the
// traffic listeners (sluice_connections_open).
func (g *Gateway) OpenConnections() int64 { return g.conns.open.Load() }

// connLimits are the caps of the snapshot in force; before the first Load,
// the automatic total alone.
func (g *Gateway) connLimits() connLimits {
	if s := g.cur.Load(); s != nil {
		return s.connLimits
	}
	return connLimits{total: g.autoMaxConns}
}

// connLimitsOf reads the caps of a server section: its maxConnections 0
// is the automatic cap.
func (g *Gateway) connLimitsOf(s config.Server) connLimits {
	lim := connLimits{total: s.MaxConnections, perIP: s.MaxConnectionsPerIP}
	if lim.total == 0 {
		lim.total = g.autoMaxConns
	}
	return lim
}

// refusedConn reports a connection closed for why (a Refused* reason): to
// Deps.OnConnRefused each time, and in the log at most once a second (a
// flood of them would otherwise be a flood of lines), at warn level, as an
// operator must know that clients are being turned away.
func (g *Gateway) refusedConn(why string, ip netip.Addr) {
	if g.deps.OnConnRefused != nil {
		g.deps.OnConnRefused(why)
	}
	msg := "connection refused: past the server's connection cap (at most one such line a second)"
	switch why {
	case RefusedPenalized:
		msg = "connection refused: its peer's connections were closed for resets or a flood in the last 10 s (at most one such line a second)"
	case RefusedPrematureResets:
		msg = "connection closed: most of its HTTP/2 streams were reset before their answer (at most one such line a second)"
	case RefusedFlood:
		msg = "connection closed: it sent over 8 MiB while none of its requests was being served, frames no request is made of (at most one such line a second)"
	}
	g.refusedLog.Warn().Str("reason", why).Str("peer", ip.String()).Int64("open", g.conns.open.Load()).Msg(msg)
}

// cut closes c for why (a client's resets or flood) and reports it, once;
// unless its peer is one of trustedProxies, the peer is penalized too (see
// resets.go). g may be nil (a connection not accepted by Gateway.Listener).
func (g *Gateway) cut(c *sendConn, why string) {
	if !c.cut.CompareAndSwap(false, true) {
		return
	}
	// Counted first: whoever sees the connection close finds it counted.
	if g != nil {
		g.refusedConn(why, c.ip)
		if !c.trusted(g) {
			g.conns.mu.Lock()
			g.conns.penalize(c.ip, time.Now())
			g.conns.mu.Unlock()
		}
	}
	_ = c.Close()
}

// autoMaxConnections is server.maxConnections' default: half of the
// process's open-file limit less fdReserve, as HAProxy derives its maxconn,
// since a proxied client connection needs a second descriptor for its
// upstream; 0 (no cap) where the limit cannot be read or is unlimited.
func autoMaxConnections() int {
	return autoMaxConnectionsOf(openFileLimit())
}

func autoMaxConnectionsOf(limit uint64) int {
	if limit == 0 || limit > 1<<32 {
		return 0
	}
	if limit <= 2*fdReserve {
		return int(limit / 4) // a limit this low has little to spare for the reserve
	}
	return int(limit-fdReserve) / 2
}

// fdReserve are the descriptors kept for what is not a client connection
// or its upstream's: the listeners, the admin listener's clients, Redis's
// pools, health probes, files read at a reload.
const fdReserve = 128
