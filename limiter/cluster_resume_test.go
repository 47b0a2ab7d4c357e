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
