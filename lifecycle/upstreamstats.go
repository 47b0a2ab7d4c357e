package lifecycle

import (
	"time"

	"sluice/admin"
	"sluice/proxy"
	ups "sluice/upstream"
)

// upstreamObserver counts the upstreams' events in the admin metrics.
type upstreamObserver struct{ m *admin.Metrics }

func (o upstreamObserver) Upstream(name string) ups.UpstreamObserver { return o.m.Upstream(name) }

func (o upstreamObserver) Target(upstream, target string) ups.TargetObserver {
	return o.m.Target(upstream, target)
}

// ForgetTarget and ForgetUpstream drop the series of what a reload removed.
func (o upstreamObserver) ForgetTarget(upstream, target string) { o.m.ForgetTarget(upstream, target) }

func (o upstreamObserver) ForgetUpstream(name string) { o.m.ForgetUpstream(name) }

var (
	_ ups.Observer  = upstreamObserver{}
	_ ups.Forgetter = upstreamObserver{}
)

// adminUpstreams is the upstreams' state for the admin API, an ejection's
// end as a wall-clock time.
func adminUpstreams(gw *proxy.Gateway) []admin.UpstreamStats {
	now, wall := gw.Now(), time.Now()
	in := gw.Upstreams(now)
	out := make([]admin.UpstreamStats, len(in))
	for i, u := range in {
		o := admin.UpstreamStats{Name: u.Name, Balance: u.Balance.String(), Panic: u.Panic,
			RequestsPerSecond: u.RequestsPerSecond, RetriesPerSecond: u.RetriesPerSecond}
		for _, t := range u.Targets {
			ts := admin.TargetStats{URL: t.URL, Weight: t.Weight, Healthy: t.Healthy, Available: t.Available,
				InFlight: t.InFlight, RequestsPerSecond: t.RequestsPerSecond, ErrorsPerSecond: t.ErrorsPerSecond,
				RetriesPerSecond: t.RetriesPerSecond}
			if t.Ejected {
				until := wall.Add(time.Duration(t.EjectedUntil - now))
				ts.EjectedUntil = &until
			}
			o.Targets = append(o.Targets, ts)
		}
		out[i] = o
	}
	return out
}
