package proxy

import (
	"fmt"
	"slices"
	"time"

	"github.com/rs/zerolog"

	"sluice/config"
	"sluice/hotparam"
	"sluice/internal/match"
	"sluice/limiter"
	"sluice/limiter/circuit"
	"sluice/limiter/system"
)

// Snapshot is one complete, immutable compilation of a rules file: the
// router and every guard. A request uses the snapshot it started with.
type Snapshot struct {
	Config   *config.Config
	Flow     *limiter.Flow
	Params   *hotparam.Set
	Breakers *circuit.Set
	System   *system.Guard

	authority   map[string]*authorityGuard // by resource
	router      *hostRouter
	groups      []*apiGroup // the API groups, in file order
	upstreams   map[string]*upstream
	sources     *sources
	originSrc   config.Source
	target      targetRules             // how a request's target is read (readTarget)
	rateLimit   *rateLimitHeaders       // the values RateLimit fields share
	policies    map[string]*policyNames // each resource's RateLimit policy names
	pkKey       *[32]byte               // the gateway's partition key secret
	accessLog   bool
	sendTimeout time.Duration // server.sendTimeout (see send.go)
	tunnelIdle  time.Duration // server.tunnelIdleTimeout (tunnelEnd.watchIdle)
	upgrades    []string      // server.upgrades: the Upgrade tokens forwarded (keepUpgrades)
	connLimits  connLimits    // server.maxConnections, maxConnectionsPerIP (conncap.go)
	headTimeout time.Duration // server.readHeaderTimeout: how long an h2 request declared empty may take to end (h2EmptyBody)
	clock       Clock
	pool        *exchangePool
	tunnels     *tunnels // the gateway's WebSockets, for the drain
	log         zerolog.Logger
}

// Load compiles cfg into a new snapshot, carrying over the state of every
// unchanged rule from the snapshot in force, and swaps it in. On error the
// snapshot in force stays.
func (g *Gateway) Load(cfg *config.Config) error {
	if g.forwarderErr != nil {
		return g.forwarderErr
	}
	// One Load at a time, so the fast clients kept are those of the
	// snapshot that is stored last.
	g.loadMu.Lock()
	defer g.loadMu.Unlock()
	prev := g.cur.Load()
	s, err := g.build(cfg, prev)
	if err != nil {
		return err
	}
	// Built whole: the breakers may take over their resources from the
	// snapshot in force (a failed build leaves them to it), and the flow
	// statistics of resources no route, group or rule names any more are
	// let go.
	s.Breakers.Install()
	s.Flow.Seal()
	g.cur.Store(s)
	g.upstreams.Commit(committed(s.upstreams))
	g.fastClients.retain(s.fastHosts())
	g.transports.retain(s.transportKeys(), prev.longestTimeout()+time.Second)
	return nil
}

func (g *Gateway) build(cfg *config.Config, prev *Snapshot) (s *Snapshot, err error) {
	var (
		pFlow   *limiter.Flow
		pParams *hotparam.Set
		pCB     *circuit.Set
		pSys    *system.Guard
	)
	if prev != nil {
		pFlow, pParams, pCB, pSys = prev.Flow, prev.Params, prev.Breakers, prev.System
	}
	s = &Snapshot{
		Config:    cfg,
		originSrc: cfg.Origin.From,
		target: targetRules{
			mergeSlashes:  cfg.Server.MergesSlashes(),
			keepParams:    cfg.Server.PathParametersKept(),
			refuseSlashes: cfg.Server.EncodedSlashesRefused(),
			strictSNI:     g.deps.StrictSNI,
		},
		rateLimit:   &rateLimitHeaders{},
		policies:    buildPolicyNames(cfg),
		pkKey:       &g.pkKey,
		accessLog:   cfg.Log.Access,
		sendTimeout: cfg.Server.SendTimeout.D(),
		tunnelIdle:  cfg.Server.TunnelIdleTimeout.D(),
		upgrades:    cfg.Server.Upgrades,
		connLimits:  g.connLimitsOf(cfg.Server),
		headTimeout: cfg.Server.ReadHeaderTimeout.D(),
		clock:       g.clock,
		pool:        &g.pool,
		tunnels:     &g.tunnels,
		log:         g.deps.Log,
	}
	var fc limiter.TokenService
	var pc hotparam.TokenService
	if g.deps.Cluster != nil {
		fc, pc = g.deps.Cluster, g.deps.Cluster
	}
	s.Flow = limiter.Compile(cfg.FlowRules, pFlow, limiter.Options{Cluster: fc, Resources: resourceCount(cfg), OriginFrom: cfg.Origin.From.String()})
	s.Params = hotparam.CompileWith(cfg.ParamRules, pParams, hotparam.Options{Cluster: pc, Now: g.clock.Now()})
	s.Breakers = circuit.Compile(cfg.DegradeRules, pCB, g.deps.OnCircuit)
	s.System = system.New(cfg.System, pSys, g.deps.CPU)
	if s.authority, err = compileAuthority(cfg.AuthorityRules); err != nil {
		return nil, err
	}
	if s.sources, err = newSources(cfg.TrustedProxies); err != nil {
		return nil, fmt.Errorf("proxy: trustedProxies: %w", err)
	}

	ups := make(map[string]*upstream, len(cfg.Upstreams))
	for name, u := range cfg.Upstreams {
		if ups[name], err = g.newUpstream(name, u); err != nil {
			return nil, err
		}
	}
	// chi panics on a pattern it cannot take; config validation should have
	// caught it, but a reload must never take the gateway down.
	defer func() {
		if p := recover(); p != nil {
			s, err = nil, fmt.Errorf("proxy: building routes: %v", p)
		}
	}()
	// Block bodies parsed once per distinct body: most routes take the
	// top-level one.
	bodies := map[string]*config.BlockBody{}
	if err := s.compileGroups(g); err != nil {
		return nil, err
	}
	groups := newGroupCache(s.groups)
	slots := newSlotRules(cfg)
	routes := make([]hostRoute, len(cfg.Routes))
	for i := range cfg.Routes {
		rc := &cfg.Routes[i]
		br := rc.BlockResponse // config merged the top-level one into it
		body := bodies[br.Body]
		if body == nil {
			if body, err = br.BlockBody(); err != nil {
				return nil, fmt.Errorf("proxy: route %s: blockResponse.body: %w", rc.Path, err)
			}
			bodies[br.Body] = body
		}
		rt, err := s.newRoute(g, rc, ups[rc.Upstream], br, body)
		if err != nil {
			return nil, err
		}
		rt.holdsSlot = slots.held(rt.resource)
		gg, err := s.groupsFor(match.NormalizePattern(rc.Path, s.target.mergeSlashes), rt.entrance, br, body, groups)
		if err != nil {
			return nil, err
		}
		if gg != nil {
			rt.guards.add(gg)
		}
		if auth := s.routeAuthority(rt.resource, gg); auth != nil {
			rt.guards.first(auth)
			rt.clientAddr = auth.addr
		}
		routes[i] = hostRoute{rc, rt}
	}
	s.router = newHostRouter(routes, s.target.mergeSlashes)
	s.upstreams = ups
	return s, nil
}

// Resources returns the names the snapshot asked Deps.Observer for, sorted
// and each once: its routes' resources and its API groups. After a reload,
// the observers of any other name are no longer used (but by calls still
// in flight on an older snapshot), so their series can go.
func (s *Snapshot) Resources() []string {
	names := make([]string, 0, len(s.Config.Routes)+len(s.groups))
	for i := range s.Config.Routes {
		names = append(names, s.Config.Routes[i].Resource)
	}
	for _, g := range s.groups {
		names = append(names, g.name)
	}
	slices.Sort(names)
	return slices.Compact(names)
}

// fastTargets builds the fast path's targets of up, sharing the gateway's
// connection pools.
func (g *Gateway) fastTargets(up *upstream) ([]*fastTarget, error) {
	out := make([]*fastTarget, len(up.targets))
	for i, u := range up.targets {
		t, err := g.fastClients.target(u, up.connect, up.idle)
		if err != nil {
			return nil, fmt.Errorf("upstream %s: %w", up.name, err)
		}
		out[i] = t
	}
	return out, nil
}

// fastHosts is the set of fast clients the snapshot's fast paths use.
func (s *Snapshot) fastHosts() map[string]bool {
	m := map[string]bool{}
	for _, u := range s.upstreams {
		for _, t := range u.fast {
			m[t.key] = true
		}
	}
	return m
}

// longestTimeout is the longest route timeout of s's upstreams (0 for a
// nil s): no request of s runs longer, an upgrade's tunnel aside.
func (s *Snapshot) longestTimeout() time.Duration {
	var d time.Duration
	if s != nil {
		for _, u := range s.upstreams {
			d = max(d, u.timeout)
		}
	}
	return d
}

// transportKeys are the standard forwarder's transports s's upstreams use.
func (s *Snapshot) transportKeys() map[transportKey]bool {
	m := map[transportKey]bool{}
	for _, u := range s.upstreams {
		m[transportKey{u.protocol, u.connect, u.idle}] = true
	}
	return m
}

func (s *Snapshot) newRoute(g *Gateway, rc *config.Route, up *upstream, br config.BlockResponse, body *config.BlockBody) (*route, error) {
	if up == nil {
		return nil, fmt.Errorf("proxy: route %s: unknown upstream %q", rc.Path, rc.Upstream)
	}
	res := rc.Resource
	// stripPrefix is spelled like a route's path, and strips the view's
	// normalized path: it is normalized as route patterns are (/café and
	// /caf%c3%a9 strip /caf%C3%A9).
	strip := rc.StripPrefix
	if p, ok := match.NormalizePath(strip, s.target.mergeSlashes); ok && strip != "" {
		strip = p
	}
	rt := &route{
		snap:        s,
		resource:    res,
		entrance:    rc.Entrance,
		n:           rc.AcquireCount,
		upstream:    up,
		stripPrefix: strip,
		maxBody:     rc.MaxBodyBytes,
		keepCost:    rc.KeepCostHeaders,
		policies:    s.policies[res],
		guards:      newGuards(s.System, s.Flow.Checker(res, rc.Entrance), s.Params.For(res), s.Breakers.For(res)),
		obs:         g.deps.Observer(res),
		prio:        rc.Prioritized,
		occupy:      rc.OccupyTimeoutMs * int64(time.Millisecond),
		// A route's API groups may have breakers of their own: any
		// breaker in the snapshot has the writes timed.
		timeWrites: len(s.Config.DegradeRules) > 0,
	}
	rt.waits, _ = rt.obs.(prioritizedObserver)
	if s.Config.Origin.Strip && s.originSrc.Kind == config.SourceHeader {
		rt.stripOrigin = s.originSrc.Name
	}
	var err error
	if rt.blocked, err = renderBlock(br, body, res); err != nil {
		return nil, err
	}
	rt.std = newStandardForwarder(rt, g.transportFor(up.protocol, up.connect, up.idle), up.protocol == config.ProtocolHTTP1, g.stdCalls, g.deps.Log)
	rt.mode = modeOf(rc.Forwarder)
	if g.forwarder != "" {
		rt.mode = g.forwarderMode
	}
	if rt.mode != modeStandard && up.protocol == config.ProtocolHTTP1 {
		if up.fast == nil {
			if up.fast, err = g.fastTargets(up); err != nil {
				return nil, fmt.Errorf("proxy: route %s: %w", rc.Path, err)
			}
		}
		rt.fast = &fastForwarder{rt: rt, pool: &g.fastPool, log: g.deps.Log}
	}
	return rt, nil
}

// resourceCount is how many resources cfg's routes and API groups name:
// the limiter shares its per-origin statistics among them.
func resourceCount(cfg *config.Config) int {
	names := make(map[string]bool, len(cfg.Routes)+len(cfg.APIGroups))
	for _, r := range cfg.Routes {
		names[r.Resource] = true
	}
	for _, ag := range cfg.APIGroups {
		names[ag.Name] = true
	}
	return len(names)
}
