package limiter

import (
	"strconv"
	"testing"
	"time"

	"sluice/config"
)

// askedNever is a TokenService for calls that must not reach it.
type askedNever struct{ t *testing.T }

func (a askedNever) AcquireFlow(*config.FlowRule, string, int64, bool) (bool, time.Duration, int64, time.Duration, error) {
	a.t.Error("Redis asked about a call no window holds")
	return false, 0, -1, 0, nil
}

func (askedNever) Gateways() int { return 1 }

// A call of more tokens than a cluster rule's window holds, refused before
// Redis is asked, lets go of a limitApp other rule's origin state as every
// other refusal does: held, the state could never be evicted, and each new
// origin grew the rule's table past its cap (the review of 2026-12-07:
// 300 origins, a table of 300 at a cap of 100).
func TestClusterNeverPassesUnpinsOrigin(t *testing.T) {
	for _, dry := range []bool{false, true} {
		cfg := config.Config{FlowRules: []config.FlowRule{{Resource: "r", LimitApp: config.LimitAppOther, Count: 10,
			ClusterMode: true, DryRun: dry}}}
		config.Defaults(&cfg)
		f := Compile(cfg.FlowRules, nil, Options{Cluster: askedNever{t}, MaxOrigins: 100})
		c := f.Checker("r", "default")
		for i := range 300 {
			tok, _ := c.Enter(int64(i)*int64(time.Millisecond), "client-"+strconv.Itoa(i), 12)
			tok.Exit(int64(i)*int64(time.Millisecond), false)
		}
		if n := f.byRes["r"][0].st.others.Len(); n > 100 {
			t.Errorf("dryRun %v: 300 origins left %d states at a cap of 100: refused calls kept them", dry, n)
		}
	}
}
