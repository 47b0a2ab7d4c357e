package upstream

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/url"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"sluice/internal/match"
)

// Options are what a Pool needs from outside.
type Options struct {
	Log zerolog.Logger
	// Now is the clock the callers of Pick and Done read (ns, monotonic,
	// any origin); health probes read it to stamp their results. Required.
	Now func() int64
	// Observer receives events; nil: none.
	Observer Observer
	// Probe sends one health probe; nil: an HTTP GET (HTTPProbe).
	Probe ProbeFunc
}

// Pool holds the live state of every upstream target across reloads, keyed
// by upstream name and target URL, and runs their health probes: one
// goroutine per probed target. A reload builds the new snapshot's upstreams
// with Build (which starts nothing) and, once the snapshot is in force,
// hands them to Commit, which starts the probes of new targets and stops
// those of targets that left. Build and Commit must not run concurrently
// with each other (the gateway's load lock serialises them); everything
// else is safe for concurrent use. Close stops every probe.
type Pool struct {
	opts Options

	mu      sync.Mutex
	states  map[key]*state     // committed
	shareds map[string]*shared // committed, by upstream name
	current []*Upstream        // committed
	probes  map[*state]*prober
	closed  bool
}

type key struct{ upstream, target string } // target: match.TargetKey of its URL

// NewPool returns an empty pool.
func NewPool(o Options) *Pool {
	if o.Observer == nil {
		o.Observer = nopObserver{}
	}
	if o.Probe == nil {
		o.Probe = HTTPProbe()
	}
	return &Pool{opts: o, states: map[key]*state{}, shareds: map[string]*shared{}, probes: map[*state]*prober{}}
}

// Build makes upstream name of a new snapshot from s. Targets that the
// committed snapshot's upstream of the same name has too keep their state
// (health, ejection, in-flight and counts); new ones start available.
func (p *Pool) Build(name string, s Spec) (*Upstream, error) {
	if err := s.check(); err != nil {
		return nil, fmt.Errorf("upstream %s: %w", name, err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	u := &Upstream{
		name:    name,
		balance: s.Balance,
		passive: clonePtr(s.Passive),
		hc:      clonePtr(s.HealthCheck),
		retries: s.Retries,
		share:   s.RetryBudget,
		sh:      p.shareds[name],
		obs:     p.opts.Observer.Upstream(name),
		log:     p.opts.Log,
	}
	if u.sh == nil {
		u.sh = newShared()
	}
	// A target keeps its state across a reload that writes its URL another
	// way (match.TargetKey: case, a default port, a trailing dot or "/"),
	// and with it the spelling it was first written in, which names it in
	// metrics, logs and the hash ring and which its health probes use: one
	// server, one series and one place in the ring. Requests go to the URL
	// as the file now writes it (the Host an upstream is sent follows it).
	kept := make([]Target, len(s.Targets))
	for i, t := range s.Targets {
		pu, err := url.Parse(t.URL)
		if err != nil {
			return nil, fmt.Errorf("upstream %s: target %q: %w", name, t.URL, err)
		}
		st := p.states[key{name, match.TargetKey(t.URL)}]
		if st == nil {
			st = newState(name, t.URL, pu)
		}
		kept[i] = t
		kept[i].URL = st.url
		u.members = append(u.members, &member{st: st, weight: int64(weightOf(t)), obs: p.opts.Observer.Target(name, st.url), u: pu})
	}
	u.rr.current = make([]int64, len(u.members))
	if s.Balance == Hash {
		u.hash = newRendezvous(kept)
	}
	return u, nil
}

func clonePtr[T any](p *T) *T {
	if p == nil {
		return nil
	}
	c := *p
	return &c
}

// Commit makes ups (built by Build) the upstreams in force: probes start
// for targets with a health check and none running, restart where the
// check changed (keeping the target's up or down), and stop for targets
// that left or lost their check (which are then up). A target whose
// upstream lost its passive ejection is back in at once. An Observer that
// is a Forgetter is told of the targets and upstreams that left. It returns
// once every stopped probe has ended.
func (p *Pool) Commit(ups []*Upstream) {
	p.mu.Lock()
	defer p.mu.Unlock()
	states, shareds := map[key]*state{}, map[string]*shared{}
	want := map[*state]*HealthCheck{}
	for _, u := range ups {
		shareds[u.name] = u.sh
		for _, m := range u.members {
			states[key{u.name, match.TargetKey(m.st.url)}] = m.st
			if u.hc != nil {
				want[m.st] = u.hc
			}
			if u.passive == nil {
				m.st.forgetEjections() // as a target that loses its checks is up
			}
		}
	}
	for st, pr := range p.probes {
		hc, ok := want[st]
		if ok && *hc == pr.hc {
			continue
		}
		pr.stop()
		delete(p.probes, st)
		if !ok {
			st.mu.Lock()
			st.health = health{}
			st.mu.Unlock()
			st.down.Store(false)
		}
	}
	if !p.closed {
		for st, hc := range want {
			if p.probes[st] == nil {
				p.probes[st] = p.startProbe(st, *hc)
			}
		}
	}
	if f, ok := p.opts.Observer.(Forgetter); ok {
		for k, st := range p.states {
			if states[k] == nil {
				f.ForgetTarget(k.upstream, st.url)
			}
		}
		for name := range p.shareds {
			if shareds[name] == nil {
				f.ForgetUpstream(name)
			}
		}
	}
	p.states, p.shareds, p.current = states, shareds, ups
}

// Close stops every probe and waits for them to end. The pool's upstreams
// keep serving (with the health they last had); Commit starts no probe
// after Close.
func (p *Pool) Close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	for st, pr := range p.probes {
		pr.stop()
		delete(p.probes, st)
	}
}

// probing reports how many probes run (tests).
func (p *Pool) probing() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.probes)
}

// prober is one target's running health probe.
type prober struct {
	hc     HealthCheck
	cancel context.CancelFunc
	done   chan struct{}
}

func (pr *prober) stop() {
	pr.cancel()
	<-pr.done
}

func (p *Pool) startProbe(st *state, hc HealthCheck) *prober {
	ctx, cancel := context.WithCancel(context.Background())
	pr := &prober{hc: hc, cancel: cancel, done: make(chan struct{})}
	probe := Probe{URL: probeURL(st.u, hc.Path), Protocol: hc.Protocol, Timeout: hc.Timeout}
	go func() {
		defer close(pr.done)
		p.probeLoop(ctx, st, probe, &pr.hc)
	}()
	return pr
}

// probeLoop probes one target until ctx ends: the first probe within a
// fifth of the interval, then every 0.8 to 1 interval (a random spread
// within each target, so that targets, and gateways started together, do
// not probe in step; never longer than interval, so a target that fails
// is down within interval x unhealthyThreshold plus one probe's timeout).
func (p *Pool) probeLoop(ctx context.Context, st *state, probe Probe, hc *HealthCheck) {
	t := time.NewTimer(firstProbe(hc.Interval, rand.Float64()))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		good := p.opts.Probe(ctx, probe)
		if ctx.Err() != nil {
			return
		}
		p.observe(st, p.opts.Now(), good, hc)
		t.Reset(nextProbe(hc.Interval, rand.Float64()))
	}
}

// observe records one probe result on st at now.
func (p *Pool) observe(st *state, now int64, good bool, hc *HealthCheck) {
	st.mu.Lock()
	changed := st.health.observe(now, good, hc)
	down := st.health.down
	st.mu.Unlock()
	if !changed {
		return
	}
	st.down.Store(down)
	if down {
		p.opts.Log.Warn().Str("upstream", st.upstream).Str("target", st.url).Int("unhealthyThreshold", hc.UnhealthyThreshold).
			Msg("upstream target down: health checks failed")
	} else {
		p.opts.Log.Info().Str("upstream", st.upstream).Str("target", st.url).Int("healthyThreshold", hc.HealthyThreshold).
			Msg("upstream target up: health checks pass")
	}
}

// firstProbe and nextProbe are the waits before a target's probes; r is
// uniform in [0, 1).
func firstProbe(interval time.Duration, r float64) time.Duration {
	return time.Duration(float64(interval) * 0.2 * r)
}

func nextProbe(interval time.Duration, r float64) time.Duration {
	return time.Duration(float64(interval) * (0.8 + 0.2*r))
}
