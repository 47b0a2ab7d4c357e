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
}

var errRedisDown = errors.New("redis down")

func (e *exactCluster) Gateways() int { return e.gateways }

func (e *exactCluster) AcquireFlow(_ *config.FlowRule, _ string, n int64, _ bool) (bool, time.Duration, int64, time.Duration, error) {
	if e.down {
		return false, 0, -1, 0, errRedisDown
	}
	var r window.Result
	return e.win.TryAdd(*e.now, n, e.count, false, &r), 0, -1, 0, nil
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
func TestClusterResumeAddsNoBurst(t *testing.T) {
	for _, gws := range []int{1, 2, 3} {
		for _, count := range []float64{4, 10, 40} {
			for _, over := range []float64{1.5, 4} {
				t.Run(fmt.Sprintf("gateways=%d/count=%g/%gx", gws, count, over), func(t *testing.T) {
					t.Parallel()
					for ph := int64(0); ph < sec; ph += sweepStep {
						down := t0 - t0%sec + 2*sec + ph
						for _, outage := range []int64{600 * ms, 1500 * ms} {
							lost, _ := resumeRun(gws, count, over, down, math.MaxInt64)
							got, last := resumeRun(gws, count, over, down, down+outage)
							if bound := max(int(count), lost); got > bound {
								t.Fatalf("outage from %d ms for %d ms: a real interval passed %d, want at most the count %g or the %d of losing Redis for good",
									(down%sec)/ms, outage/ms, got, count, lost)
							}
							if gws == 1 && float64(lost) > count {
								t.Fatalf("outage from %d ms: one gateway passed %d in a real interval going down, count %g", (down%sec)/ms, lost, count)
							}
							if float64(last) != count {
								t.Fatalf("outage from %d ms for %d ms: the last interval, 2 s after Redis answered again, passed %d, want the count %g",
									(down%sec)/ms, outage/ms, last, count)
							}
						}
					}
				})
			}
		}
	}
}

// resumeRun has gws gateways offer over x count a second in turn, from
// two seconds before down to three after up (Redis fails in [down, up)),
// and returns the most passes in a real second and the passes of the last
// second.
func resumeRun(gws int, count, over float64, down, up int64) (most, last int) {
	start := down - down%sec - 2*sec
	end := min(up, down+2*sec) + 3*sec
	var now int64
	svc := &exactCluster{now: &now, win: window.NewExact(sec, count), count: count, gateways: gws}
	r := qps("r", count)
	r.ClusterMode = true
	checkers := make([]*limiter.Checker, gws)
	for i := range checkers {
		checkers[i] = limiter.Compile(defaulted(r), nil, limiter.Options{Cluster: svc}).Checker("r", "default")
	}
	passed := passcheck.Offer(start, end, float64(sec)/(count*over), func(i, at int64) bool {
		now, svc.down = at, at >= down && at < up
		tok, v := checkers[i%int64(gws)].Enter(now, "", 1)
		if v.Blocked {
			return false
		}
		tok.Exit(now, false)
		if now >= end-sec {
			last++
		}
		return true
	})
	return passcheck.MostInInterval(passed, sec), last
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
