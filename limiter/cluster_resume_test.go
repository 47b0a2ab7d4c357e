package limiter_test

import (
	"errors"
	"fmt"
	"math"
	"testing"
	"time"

	"sluice/config"
	"sluice/internal/passcheck"
	"sluice/limiter"
	"sluice/limiter/window"
)

// exactCluster is a token service with one exact window, as Redis keeps a
// cluster rule's, on the test's synthetic clock (Redis's own). While down
// it fails every call, as an unreachable Redis does.
type exactCluster struct {
	now      *int64
	win      *window.Exact
	count    float64
	down     bool
	gateways int
	skew     time.Duration // ResumeSkew
}

var errRedisDown = errors.New("redis down")

func (e *exactCluster) Gateways() int { return e.gateways }

func (e *exactCluster) ResumeSkew() time.Duration { return e.skew }

func (e *exactCluster) AcquireFlow(_ *config.FlowRule, _ string, n int64, _ bool) (bool, time.Duration, int64, time.Duration, error) {
	if e.down {
		return false, 0, -1, 0, errRedisDown
	}
	var r window.Result
	return e.win.TryAdd(*e.now, n, e.count, false, &r), 0, -1, 0, nil
}

// gatewayView is one gateway's view of a shared exactCluster: Redis is
// down for it until its own probe sees it answer again.
type gatewayView struct {
	*exactCluster
	down bool
}

func (g *gatewayView) AcquireFlow(r *config.FlowRule, key string, n int64, report bool) (bool, time.Duration, int64, time.Duration, error) {
	if g.down {
		return false, 0, -1, 0, errRedisDown
	}
	return g.exactCluster.AcquireFlow(r, key, n, report)
}

// TestClusterResumeAddsNoBurst: a fleet of gateways loses Redis together
// and falls back to local shares, then Redis answers again. In the
// interval in which cluster limiting resumes, each gateway's local window
// still holds the passes it made alone, which Redis never saw; a cluster
// pass must fit that window too. Before, the fleet could pass its local
// shares plus the whole count in that interval: twice the count.
//
// Swept over gateways, counts, overloads, the outage's start phase and
// its length (long enough that every gateway decides alone at least once,
// as in a failover; a gateway that never saw Redis fail can still pass on
// top of what the others passed alone), the property is differential: no real interval passes more
// than the count, or than the worst interval of the same fleet losing
// Redis for good (going down, a gateway's fallback sees the cluster passes
// it made, not those of the others; that is not the resume's to fix). One
// gateway is exact throughout. And once the passes made alone have left
// the window, the fleet passes the whole count again: the guard does not
// starve it.
//
// Gateways notice Redis answer again at different moments, each when its
// own probe, backing off to a second, gets through: swept too, gateway i
// resuming i staggers after the first, up to the ResumeSkew the service
// states. A gateway still deciding alone passes its share, which Redis
// never sees; one that resumed before it must keep to its share until those
// passes have left the window, or the fleet passes the count plus them
// (an audit measured 14 of 10 in 850 ms with two real gateways).
func TestClusterResumeAddsNoBurst(t *testing.T) {
	const skew = time.Second
	for _, gws := range []int{1, 2, 3} {
		for _, count := range []float64{4, 10, 40} {
			for _, over := range []float64{1.5, 4} {
				t.Run(fmt.Sprintf("gateways=%d/count=%g/%gx", gws, count, over), func(t *testing.T) {
					t.Parallel()
					for ph := int64(0); ph < sec; ph += sweepStep {
						down := t0 - t0%sec + 2*sec + ph
						for _, outage := range []int64{600 * ms, 1500 * ms} {
							for _, stagger := range []int64{0, 300 * ms, int64(skew) / int64(max(gws-1, 1))} {
								lost, _ := resumeRun(gws, count, over, down, math.MaxInt64, stagger, skew)
								got, last := resumeRun(gws, count, over, down, down+outage, stagger, skew)
								if bound := max(int(count), lost); got > bound {
									t.Fatalf("outage from %d ms for %d ms, gateways resuming %d ms apart: a real interval passed %d, want at most the count %g or the %d of losing Redis for good",
										(down%sec)/ms, outage/ms, stagger/ms, got, count, lost)
								}
								if gws == 1 && float64(lost) > count {
									t.Fatalf("outage from %d ms: one gateway passed %d in a real interval going down, count %g", (down%sec)/ms, lost, count)
								}
								if float64(last) != count {
									t.Fatalf("outage from %d ms for %d ms, gateways resuming %d ms apart: once every gateway's passes made alone left the window, a real second passed at most %d, want the count %g",
										(down%sec)/ms, outage/ms, stagger/ms, last, count)
								}
							}
						}
					}
				})
			}
		}
	}
}

// resumeRun has gws gateways offer over x count a second in turn, from
// two seconds before down to well after up (Redis fails in [down, up),
// for gateway i until up + i*stagger), and returns the most passes in a
// real second, overall and in the last two seconds, which start once every
// gateway's guard (a window and skew after it resumed) has ended.
func resumeRun(gws int, count, over float64, down, up, stagger int64, skew time.Duration) (most, last int) {
	start := down - down%sec - 2*sec
	// The last gateway's guard ends a window and skew after it resumed;
	// the Redis tokens its refusals took while guarded leave a window
	// later; a second more of margin, and the last second.
	end := min(up, down+2*sec) + int64(gws-1)*stagger + int64(skew) + 4*sec
	var now int64
	svc := &exactCluster{now: &now, win: window.NewExact(sec, count), count: count, gateways: gws, skew: skew}
	r := qps("r", count)
	r.ClusterMode = true
	checkers := make([]*limiter.Checker, gws)
	views := make([]*gatewayView, gws)
	for i := range checkers {
		views[i] = &gatewayView{exactCluster: svc}
		checkers[i] = limiter.Compile(defaulted(r), nil, limiter.Options{Cluster: views[i]}).Checker("r", "default")
	}
	var tail []int64 // the passes of the last two seconds
	passed := passcheck.Offer(start, end, float64(sec)/(count*over), func(i, at int64) bool {
		g := i % int64(gws)
		now = at
		views[g].down = at >= down && (up == math.MaxInt64 || at < up+g*stagger)
		tok, v := checkers[g].Enter(now, "", 1)
		if v.Blocked {
			return false
		}
		tok.Exit(now, false)
		if now >= end-2*sec {
			tail = append(tail, now)
		}
		return true
	})
	// The most in a real second of the last two, not the last aligned
	// second: offers 1/6 s apart in floating point fall a nanosecond
	// either side of the moment a pass leaves the exact window.
	return passcheck.MostInInterval(passed, sec), passcheck.MostInInterval(tail, sec)
}

// TestPrioritizedClusterFallbackKeepsShare: while Redis is down, each of N
// gateways limits a global clusterMode rule at its share, count/N, so the
// fleet still passes about count in total; a prioritized call (occupy)
// waits at that share like a plain one. A user would notice the bug this
// pins as a route of prioritized calls passing the whole count on every
// gateway during a Redis outage (N times the count for the fleet), and
// again, when Redis answered, while the passes a gateway made alone were
// still in its window: the pass was reserved against the whole count.
//
// Swept over gateways, counts, occupy timeouts, start phases and whether
// Redis comes back, with every call prioritized and each gateway offered
// three times its share: on each gateway, the passes it decided locally
// (Redis down, or back with its passes made alone still in the window),
// counted when they go upstream (enter + Wait), never number more than
// its share in a real interval; and while Redis stays down each gateway
// passes its whole share in some interval (it is not starved).
func TestPrioritizedClusterFallbackKeepsShare(t *testing.T) {
	for _, gws := range []int{1, 2, 3, 4, 5} {
		for _, count := range []float64{1, 3, 12, 40} {
			t.Run(fmt.Sprintf("gateways=%d/count=%g", gws, count), func(t *testing.T) {
				t.Parallel()
				share := max(math.Floor(count/float64(gws)), 1) // as plain calls pass
				for _, ph := range []int64{0, 250*ms + 7, 700*ms + 3} {
					down := t0 - t0%sec + 2*sec + ph
					for _, wait := range []int64{0, 300 * ms, sec} {
						for _, outage := range []int64{600 * ms, math.MaxInt64 - down} {
							local := prioFallbackRun(gws, count, share, wait, down, down+outage)
							for g, passed := range local {
								got := passcheck.MostInInterval(passed, sec)
								if float64(got) > share {
									t.Fatalf("Redis down from %d ms for %d ms, occupy timeout %d ms: gateway %d of %d passed %d prioritized calls alone in a real interval, want at most its share %g of count %g",
										(down%sec)/ms, outage/ms, wait/ms, g, gws, got, share, count)
								}
								if outage > 2*sec && float64(got) != share {
									t.Fatalf("Redis down for good from %d ms, occupy timeout %d ms: gateway %d of %d passed at most %d in a real interval, want its share %g",
										(down%sec)/ms, wait/ms, g, gws, got, share)
								}
							}
						}
					}
				}
			})
		}
	}
}

// prioFallbackRun has gws gateways offered prioritized calls (occupy
// timeout wait) in turn, three times share a second each, from a second
// before down to three after (Redis fails in [down, up)); it returns, per
// gateway, the upstream instants (enter + Wait) of the passes it decided
// locally: entered while Redis was down or within a window of its last
// call that found Redis down.
func prioFallbackRun(gws int, count, share float64, wait, down, up int64) [][]int64 {
	start := down - down%sec - sec
	end := min(up, down+2*sec) + 3*sec
	var now int64
	svc := &exactCluster{now: &now, win: window.NewExact(sec, count), count: count, gateways: gws}
	r := qps("r", count)
	r.ClusterMode = true // thresholdType global, fallbackToLocalWhenFail
	checkers := make([]*limiter.Checker, gws)
	alone := make([]int64, gws) // the end of each gateway's local decisions
	local := make([][]int64, gws)
	for i := range checkers {
		checkers[i] = limiter.Compile(defaulted(r), nil, limiter.Options{Cluster: svc}).Checker("r", "default")
		alone[i] = math.MinInt64
	}
	passcheck.Offer(start, end, float64(sec)/(3*share*float64(gws)), func(i, at int64) bool {
		g := i % int64(gws)
		now, svc.down = at, at >= down && at < up
		if svc.down {
			alone[g] = at + sec
		}
		tok, v := checkers[g].EnterPrioritized(now, "", 1, wait)
		if v.Blocked {
			return false
		}
		tok.Exit(now, false)
		if at < alone[g] {
			local[g] = append(local[g], at+int64(v.Wait))
		}
		return true
	})
	return local
}
