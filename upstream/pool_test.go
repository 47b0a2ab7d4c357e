package upstream_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"go.uber.org/goleak"

	"sluice/upstream"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// probes lets a test answer each health probe itself, so that the probe
// loops' timing does not matter: a probe blocks until answered.
type probes struct {
	calls   chan string
	answers chan bool
}

func newProbes() *probes { return &probes{calls: make(chan string), answers: make(chan bool)} }

func (p *probes) probe(ctx context.Context, pr upstream.Probe) bool {
	select {
	case p.calls <- pr.URL:
	case <-ctx.Done():
		return false
	}
	select {
	case a := <-p.answers:
		return a
	case <-ctx.Done():
		return false
	}
}

// answer waits for the next probe of url (others are answered good) and
// answers it.
func (p *probes) answer(t *testing.T, url string, good bool) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		select {
		case got := <-p.calls:
			if got != url {
				p.answers <- true
				continue
			}
			p.answers <- good
			return
		case <-deadline:
			t.Fatalf("no probe of %s", url)
		}
	}
}

func healthSpec(ts []upstream.Target) upstream.Spec {
	return upstream.Spec{Targets: ts, HealthCheck: &upstream.HealthCheck{
		Path: "/healthz", Interval: time.Millisecond, Timeout: time.Second, HealthyThreshold: 2, UnhealthyThreshold: 3}}
}

// TestProbesAndReload: probes take a target down and up; a reload that
// keeps the target keeps its health and its probe; a reload that drops a
// target stops its probe; Close stops the rest.
func TestProbesAndReload(t *testing.T) {
	pr := newProbes()
	p := upstream.NewPool(upstream.Options{Now: func() int64 { return 0 }, Probe: pr.probe})
	defer p.Close()
	ts := targets(2)
	a, b := ts[0].URL+"/healthz", ts[1].URL+"/healthz"
	u, err := p.Build("orders", healthSpec(ts))
	if err != nil {
		t.Fatal(err)
	}
	p.Commit([]*upstream.Upstream{u})
	if n := p.Probing(); n != 2 {
		t.Fatalf("%d probes running, want 2", n)
	}
	for range 3 {
		pr.answer(t, a, false)
	}
	pr.answer(t, a, true) // the 4th probe started: the 3rd was recorded
	if st := byTarget(p, 0)[ts[0].URL]; st.Healthy || st.Available {
		t.Fatalf("after 3 bad probes: %+v, want down", st)
	}
	for range 20 {
		var tried upstream.Tries
		i := u.Pick(0, 0, false, &tried)
		u.Done(0, &tried, 200, upstream.Success)
		if i == 0 {
			t.Fatal("request sent to a target its health checks took down")
		}
	}

	// Reload with the same target (and another weight): still down.
	u2, err := p.Build("orders", healthSpec([]upstream.Target{{URL: ts[0].URL, Weight: 5}, ts[1]}))
	if err != nil {
		t.Fatal(err)
	}
	p.Commit([]*upstream.Upstream{u2})
	if st := byTarget(p, 0)[ts[0].URL]; st.Healthy || st.Weight != 5 {
		t.Fatalf("after a reload: %+v, want still down, weight 5", st)
	}
	pr.answer(t, a, true) // 2nd good in a row, counting the one before the reload
	pr.answer(t, a, true)
	if st := byTarget(p, 0)[ts[0].URL]; !st.Healthy {
		t.Fatalf("after 2 good probes: %+v, want up", st)
	}

	// Reload without target b: its probe stops.
	u3, err := p.Build("orders", healthSpec(ts[:1]))
	if err != nil {
		t.Fatal(err)
	}
	p.Commit([]*upstream.Upstream{u3})
	if n := p.Probing(); n != 1 {
		t.Fatalf("%d probes running after dropping a target, want 1", n)
	}
	for range 5 {
		select {
		case got := <-pr.calls:
			if got == b {
				t.Fatalf("dropped target %s still probed", b)
			}
			pr.answers <- true
		case <-time.After(10 * time.Second):
			t.Fatal("the remaining target is not probed")
		}
	}
	p.Close()
	if n := p.Probing(); n != 0 {
		t.Fatalf("%d probes running after Close", n)
	}
	goleak.VerifyNone(t)
}

// TestHealthCheckRemoved: a reload that drops the health check stops the
// probes and brings a target they had taken down back.
func TestHealthCheckRemoved(t *testing.T) {
	pr := newProbes()
	p := upstream.NewPool(upstream.Options{Now: func() int64 { return 0 }, Probe: pr.probe})
	defer p.Close()
	ts := targets(1)
	u, _ := p.Build("orders", healthSpec(ts))
	p.Commit([]*upstream.Upstream{u})
	for range 3 {
		pr.answer(t, ts[0].URL+"/healthz", false)
	}
	pr.answer(t, ts[0].URL+"/healthz", false)
	if byTarget(p, 0)[ts[0].URL].Healthy {
		t.Fatal("not down after 3 bad probes")
	}
	u2, _ := p.Build("orders", upstream.Spec{Targets: ts})
	p.Commit([]*upstream.Upstream{u2})
	if st := byTarget(p, 0)[ts[0].URL]; !st.Healthy || p.Probing() != 0 {
		t.Fatalf("health check removed: %+v, %d probes; want healthy, none", st, p.Probing())
	}
}

// TestStateKeyedByUpstream: the same URL in two upstreams has two states.
func TestStateKeyedByUpstream(t *testing.T) {
	p := upstream.NewPool(upstream.Options{Now: func() int64 { return 0 }})
	defer p.Close()
	pass := &upstream.Passive{ConsecutiveFailures: 1, EjectFor: time.Second, MaxEjectedPercent: 100}
	a, _ := p.Build("a", upstream.Spec{Targets: targets(1), Passive: pass})
	b, _ := p.Build("b", upstream.Spec{Targets: targets(1), Passive: pass})
	p.Commit([]*upstream.Upstream{a, b})
	pick(a, 0, 0)
	st := p.Status(0)
	if !st[0].Targets[0].Ejected || st[1].Targets[0].Ejected {
		t.Fatalf("ejected in a: %v, in b: %v; want only in a", st[0].Targets[0].Ejected, st[1].Targets[0].Ejected)
	}
}

// TestPassiveRemoved: a reload that drops passive ejection brings back a
// target it had ejected, as dropping the health check does for one the
// probes took down; a later passive block starts its backoff from 1x.
func TestPassiveRemoved(t *testing.T) {
	p := upstream.NewPool(upstream.Options{Now: func() int64 { return 0 }})
	defer p.Close()
	ts := targets(2)
	pass := &upstream.Passive{ConsecutiveFailures: 1, EjectFor: time.Minute, MaxEjectedPercent: 50}
	u, _ := p.Build("orders", upstream.Spec{Targets: ts, Passive: pass})
	p.Commit([]*upstream.Upstream{u})
	if pick(u, 0, 0) != 0 {
		t.Fatal("round robin did not start with the first target")
	}
	if st := byTarget(p, sec)[ts[0].URL]; !st.Ejected {
		t.Fatalf("not ejected after a failure: %+v", st)
	}
	u2, _ := p.Build("orders", upstream.Spec{Targets: ts})
	p.Commit([]*upstream.Upstream{u2})
	if st := byTarget(p, sec)[ts[0].URL]; st.Ejected || !st.Available {
		t.Fatalf("passive ejection removed, yet the target stays out: %+v", st)
	}
	u3, _ := p.Build("orders", upstream.Spec{Targets: ts, Passive: pass})
	p.Commit([]*upstream.Upstream{u3})
	if pick(u3, 2*sec, 0) != 0 {
		t.Fatal("round robin did not start with the first target")
	}
	if st := byTarget(p, 2*sec)[ts[0].URL]; !st.Ejected || st.EjectedUntil != 2*sec+int64(time.Minute) {
		t.Fatalf("ejected again: %+v; want for 1x ejectFor (until %d)", st, 2*sec+int64(time.Minute))
	}
}

// forgetting is an Observer that also records what a Commit forgets.
type forgetting struct {
	*counting
	targets, upstreams []string
}

func (f *forgetting) ForgetTarget(upstream, target string) {
	f.targets = append(f.targets, upstream+" "+target)
}

func (f *forgetting) ForgetUpstream(name string) { f.upstreams = append(f.upstreams, name) }

// TestCommitForgetsWhatLeft: the observer is told of every target and
// upstream a reload dropped (so their metric series go: target URLs change
// with each deployment, and series of targets long gone would pile up),
// and of nothing that stays.
func TestCommitForgetsWhatLeft(t *testing.T) {
	obs := &forgetting{counting: newCounting()}
	p := upstream.NewPool(upstream.Options{Now: func() int64 { return 0 }, Observer: obs})
	defer p.Close()
	ts := targets(2)
	orders, _ := p.Build("orders", upstream.Spec{Targets: ts})
	users, _ := p.Build("users", upstream.Spec{Targets: ts[:1]})
	p.Commit([]*upstream.Upstream{orders, users})
	if len(obs.targets)+len(obs.upstreams) != 0 {
		t.Fatalf("forgot %v %v at the first commit", obs.targets, obs.upstreams)
	}
	orders2, _ := p.Build("orders", upstream.Spec{Targets: ts[:1]})
	p.Commit([]*upstream.Upstream{orders2})
	slices.Sort(obs.targets)
	if want := []string{"orders " + ts[1].URL, "users " + ts[0].URL}; !slices.Equal(obs.targets, want) {
		t.Errorf("forgot targets %v, want %v", obs.targets, want)
	}
	if !slices.Equal(obs.upstreams, []string{"users"}) {
		t.Errorf("forgot upstreams %v, want [users]", obs.upstreams)
	}
}

// TestRespelledTargetKeepsItsState: a reload that writes a target's URL
// another way (case, no default port, a trailing "/": the same server, as
// validation reads it) keeps its ejection, and its metric series under the
// spelling it was first written in (the upstreams audit: the ejected target
// was back at once and its series started again at 0).
func TestRespelledTargetKeepsItsState(t *testing.T) {
	obs := &forgetting{counting: newCounting()}
	p := upstream.NewPool(upstream.Options{Now: func() int64 { return 0 }, Observer: obs})
	defer p.Close()
	ts := targets(2) // http://10.0.0.1:80, http://10.0.0.2:80
	pass := &upstream.Passive{ConsecutiveFailures: 1, EjectFor: time.Minute, MaxEjectedPercent: 50}
	u, _ := p.Build("orders", upstream.Spec{Targets: ts, Passive: pass})
	p.Commit([]*upstream.Upstream{u})
	if pick(u, 0, 0) != 0 {
		t.Fatal("round robin did not start with the first target")
	}
	respelled := []upstream.Target{{URL: "HTTP://10.0.0.1/", Weight: 1}, ts[1]}
	u2, err := p.Build("orders", upstream.Spec{Targets: respelled, Passive: pass})
	if err != nil {
		t.Fatal(err)
	}
	p.Commit([]*upstream.Upstream{u2})
	st, ok := byTarget(p, sec)[ts[0].URL]
	if !ok || !st.Ejected || st.Available {
		t.Fatalf("after the respelling reload: %+v (listed %v), want still ejected under %s", st, ok, ts[0].URL)
	}
	if len(obs.targets) != 0 {
		t.Errorf("the reload forgot %v, a target that stayed", obs.targets)
	}
	for range 10 {
		if pick(u2, sec, 200) == 0 {
			t.Fatal("a request went to the target ejected before the reload")
		}
	}
	// Requests go where the file now says, as it writes it.
	if got := u2.URL(0).String(); got != "http://10.0.0.1/" {
		t.Errorf("the respelled target is forwarded to %s, want http://10.0.0.1/ as now written", got)
	}
}
