package proxy

import (
	"fmt"
	"net/url"
	"sync/atomic"
	"time"

	"sluice/config"
)

// upstream is a named set of targets served round robin. It lives in one
// snapshot; connections live in the Transport, which outlives snapshots.
type upstream struct {
	name    string
	targets []*url.URL
	fast    []*fastTarget // parallel to targets; nil until the fast path is built
	timeout time.Duration
	// protocol is config's: http1, h2c or h2. Only http1 can take the
	// fast path (fasthttp speaks HTTP/1.1).
	protocol string
	next     atomic.Uint32
}

func newUpstream(name string, u config.Upstream) (*upstream, error) {
	up := &upstream{name: name, timeout: u.Timeout.D(), protocol: u.Proto()}
	if up.timeout <= 0 {
		up.timeout = 30 * time.Second
	}
	for _, t := range u.Targets {
		p, err := url.Parse(t.URL)
		if err != nil {
			return nil, fmt.Errorf("proxy: upstream %s: target %q: %w", name, t.URL, err)
		}
		up.targets = append(up.targets, p)
	}
	if len(up.targets) == 0 {
		return nil, fmt.Errorf("proxy: upstream %s has no targets", name)
	}
	return up, nil
}

// pick returns the next target, round robin.
func (u *upstream) pick() *url.URL { return u.targets[u.pickIndex()] }

// pickIndex is the index of the next target, round robin; both forwarders
// share the counter, so a route's traffic is spread the same whichever
// path each request takes.
func (u *upstream) pickIndex() int {
	if len(u.targets) == 1 {
		return 0
	}
	return int((u.next.Add(1) - 1) % uint32(len(u.targets)))
}
