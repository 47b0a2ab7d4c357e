package upstream_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"sluice/upstream"
)

const sec = int64(time.Second)

// targets returns n target URLs with the given weights (1 when absent).
func targets(n int, weights ...int) []upstream.Target {
	ts := make([]upstream.Target, n)
	for i := range ts {
		ts[i] = upstream.Target{URL: fmt.Sprintf("http://10.0.0.%d:80", i+1), Weight: 1}
		if i < len(weights) {
			ts[i].Weight = weights[i]
		}
	}
	return ts
}

// build makes and commits one upstream in a fresh pool.
func build(t testing.TB, s upstream.Spec, obs upstream.Observer) (*upstream.Pool, *upstream.Upstream) {
	t.Helper()
	p := upstream.NewPool(upstream.Options{Now: func() int64 { return 0 }, Observer: obs})
	u, err := p.Build("orders", s)
	if err != nil {
		t.Fatal(err)
	}
	p.Commit([]*upstream.Upstream{u})
	t.Cleanup(p.Close)
	return p, u
}

// counting is an Observer that counts every event.
type counting struct {
	mu       sync.Mutex
	retries  int
	panics   int
	ejected  map[string]int
	answered map[string]map[int]int
}

func newCounting() *counting {
	return &counting{ejected: map[string]int{}, answered: map[string]map[int]int{}}
}

func (c *counting) Upstream(string) upstream.UpstreamObserver { return countingUp{c} }
func (c *counting) Target(_, target string) upstream.TargetObserver {
	return countingTarget{c, target}
}

type countingUp struct{ c *counting }

func (o countingUp) Retried()  { o.c.mu.Lock(); o.c.retries++; o.c.mu.Unlock() }
func (o countingUp) Panicked() { o.c.mu.Lock(); o.c.panics++; o.c.mu.Unlock() }

type countingTarget struct {
	c      *counting
	target string
}

func (o countingTarget) Answered(code int) {
	o.c.mu.Lock()
	defer o.c.mu.Unlock()
	if o.c.answered[o.target] == nil {
		o.c.answered[o.target] = map[int]int{}
	}
	o.c.answered[o.target][code]++
}

func (o countingTarget) Ejected() { o.c.mu.Lock(); o.c.ejected[o.target]++; o.c.mu.Unlock() }

// pick makes one request's first attempt and settles it with code.
func pick(u *upstream.Upstream, now int64, code int) int {
	var tried upstream.Tries
	i := u.Pick(now, 0, false, &tried)
	o := upstream.Success
	if code == 0 || upstream.FailureStatus(code) {
		o = upstream.Failure
	}
	u.Done(now, &tried, code, o)
	return i
}

// byTarget returns the status of each target at now, by URL.
func byTarget(p *upstream.Pool, now int64) map[string]upstream.TargetStatus {
	m := map[string]upstream.TargetStatus{}
	for _, us := range p.Status(now) {
		for _, ts := range us.Targets {
			m[ts.URL] = ts
		}
	}
	return m
}
