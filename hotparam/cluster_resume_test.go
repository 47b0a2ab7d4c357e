package hotparam_test

import (
	"errors"
	"fmt"
	"math"
	"testing"
	"time"

	"sluice/config"
	"sluice/hotparam"
	"sluice/internal/passcheck"
	"sluice/limiter/window"
)

// exactParams is a token service with one exact window per value, as Redis
// keeps a clusterMode param rule's, on the test's synthetic clock. While
// down it fails every call, as an unreachable Redis does.
type exactParams struct {
	now      *int64
	wins     map[string]*window.Exact
	down     bool
	gateways int
	skew     time.Duration // ResumeSkew
}

func (e *exactParams) ResumeSkew() time.Duration { return e.skew }

// paramView is one gateway's view of a shared exactParams: Redis is down
// for it until its own probe sees it answer again.
type paramView struct {
	*exactParams
	down bool
}

func (g *paramView) AcquireParamLeft(r *config.ParamRule, count float64, value string, n int64, report bool) (bool, time.Duration, int64, time.Duration, error) {
	if g.down {
		return false, 0, -1, 0, errParamsDown
	}
	return g.exactParams.AcquireParamLeft(r, count, value, n, report)
}

var errParamsDown = errors.New("redis down")

func (e *exactParams) AcquireParamLeft(r *config.ParamRule, count float64, value string, n int64, _ bool) (bool, time.Duration, int64, time.Duration, error) {
	if e.down {
		return false, 0, -1, 0, errParamsDown
	}
	w := e.wins[value]
	if w == nil {
		w = window.NewExact(r.DurationSec*int64(time.Second), count)
		e.wins[value] = w
	}
	var res window.Result
	return w.TryAdd(*e.now, n, count, false, &res), 0, -1, 0, nil
}

func (e *exactParams) PeekParamLeft(*config.ParamRule, float64, string, int64, bool) (bool, time.Duration, int64, time.Duration, error) {
	return false, 0, -1, 0, errors.New("not used")
}

func (e *exactParams) ChargeParam(*config.ParamRule, float64, string, int64) error {
	return errors.New("not used")
}

func (e *exactParams) AcquireQuota(*config.ParamRule, float64, string, int64) (bool, int64, time.Duration, time.Duration, error) {
	return false, 0, 0, 0, errors.New("not used")
}

func (e *exactParams) CheckQuota(*config.ParamRule, float64, string, int64) (bool, int64, time.Duration, time.Duration, error) {
	return false, 0, 0, 0, errors.New("not used")
}

func (e *exactParams) ChargeQuota(*config.ParamRule, float64, string, int64) error {
	return errors.New("not used")
}

func (e *exactParams) Gateways() int { return e.gateways }

// TestClusterParamResumeAddsNoBurst is limiter's
// TestClusterResumeAddsNoBurst for a clusterMode param rule: a fleet loses
// Redis together (every gateway decides a value alone at least once) and
// falls back to its local shares, then Redis answers again. While the
// passes a gateway made alone are in the window, a cluster pass must fit
// its local bucket too. No real second passes more of the value than the
// count, or than the worst second of the same fleet losing Redis for good
// (the local buckets are Sentinel's token buckets, not exact windows); and
// two seconds after Redis is back the fleet passes the whole count again.
// Before, the second in which Redis came back could pass the shares plus
// the count.
//
// Gateways resuming apart, up to the service's ResumeSkew, are swept as in
// limiter's test. Unlike a flow rule, a param rule needs no longer guard for
// them: this sweep passed before limiter's guard grew by the skew, as
// its bound, the worst second of going down, is above the count for a
// param rule's local bucket.
func TestClusterParamResumeAddsNoBurst(t *testing.T) {
	const skew = time.Second
	for _, gws := range []int{1, 2, 3} {
		for _, count := range []float64{4, 10, 40} {
			for _, over := range []float64{1.5, 4} {
				t.Run(fmt.Sprintf("gateways=%d/count=%g/%gx", gws, count, over), func(t *testing.T) {
					t.Parallel()
					for ph := int64(0); ph < sec(1); ph += sec(0.037) {
						down := sec(100) + ph
						for _, outage := range []int64{sec(0.6), sec(1.5)} {
							for _, stagger := range []int64{0, sec(0.3), int64(skew) / int64(max(gws-1, 1))} {
								lost, _ := paramResumeRun(t, gws, count, over, down, math.MaxInt64, stagger, skew)
								got, last := paramResumeRun(t, gws, count, over, down, down+outage, stagger, skew)
								if bound := max(int(count), lost); got > bound {
									t.Fatalf("outage from %d ms for %d ms, gateways resuming %d ms apart: a real second passed %d, want at most the count %g or the %d of losing Redis for good",
										(down%sec(1))/sec(0.001), outage/sec(0.001), stagger/sec(0.001), got, count, lost)
								}
								if float64(last) != count {
									t.Fatalf("outage from %d ms for %d ms, gateways resuming %d ms apart: once every gateway's passes made alone left the window, a real second passed at most %d, want the count %g",
										(down%sec(1))/sec(0.001), outage/sec(0.001), stagger/sec(0.001), last, count)
								}
							}
						}
					}
				})
			}
		}
	}
}

// paramResumeRun has gws gateways offer over x count a second of one
// value in turn, from two seconds before down to well after up (Redis
// fails in [down, up), for gateway i until up + i*stagger), and returns the
// most passes in a real second, overall and in the last two seconds.
func paramResumeRun(t *testing.T, gws int, count, over float64, down, up, stagger int64, skew time.Duration) (most, last int) {
	start := down - down%sec(1) - sec(2)
	end := min(up, down+sec(2)) + int64(gws-1)*stagger + int64(skew) + sec(4)
	var now int64
	svc := &exactParams{now: &now, wins: map[string]*window.Exact{}, gateways: gws, skew: skew}
	r := clusterRule(count, config.ThresholdGlobal, nil)
	checkers := make([]*hotparam.Checker, gws)
	views := make([]*paramView, gws)
	for i := range checkers {
		views[i] = &paramView{exactParams: svc}
		checkers[i] = compileCluster(t, views[i], r)
	}
	var tail []int64
	passed := passcheck.Offer(start, end, float64(sec(1))/(count*over), func(i, at int64) bool {
		g := i % int64(gws)
		now = at
		views[g].down = at >= down && (up == math.MaxInt64 || at < up+g*stagger)
		tok, v := checkers[g].Enter(now, order("7"), 1)
		if v.Blocked {
			return false
		}
		tok.Exit(now, 200)
		if now >= end-sec(2) {
			tail = append(tail, now)
		}
		return true
	})
	return passcheck.MostInInterval(passed, sec(1)), passcheck.MostInInterval(tail, sec(1))
}
