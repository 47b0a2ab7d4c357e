package config_test

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"sluice/config"
)

// upstreamDefaults is an upstream as a file that names only its targets
// (and timeout) gets it.
func upstreamDefaults(timeout config.Duration, urls ...string) config.Upstream {
	u := config.Upstream{Timeout: timeout, ConnectTimeout: config.Duration(config.DefaultConnectTimeout),
		IdleTimeout: config.Duration(config.DefaultUpstreamIdleTimeout),
		Protocol:    config.ProtocolHTTP1, Balance: config.BalanceRoundRobin, RetryBudget: config.DefaultRetryBudget,
		Passive: &config.Passive{ConsecutiveFailures: config.DefaultConsecutiveFailures,
			EjectFor: config.Duration(config.DefaultEjectFor), MaxEjectedPercent: config.DefaultMaxEjectedPercent}}
	for _, s := range urls {
		u.Targets = append(u.Targets, config.Target{URL: s, Weight: 1})
	}
	return u
}

// TestLoadUpstreams reads every upstream field, both forms of a target, the
// defaults of healthCheck and passive when given as empty sections, and
// passive's when left out (on, as Envoy's outlier detection).
func TestLoadUpstreams(t *testing.T) {
	cfg, err := config.Load("testdata/upstreams/full.yaml")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]config.Upstream{
		"orders": {
			Targets: []config.Target{{URL: "http://127.0.0.1:9001", Weight: 1}, {URL: "http://127.0.0.1:9002", Weight: 3},
				{URL: "http://127.0.0.1:9003", Weight: 1}},
			Timeout: config.Duration(10 * time.Second), ConnectTimeout: config.Duration(500 * time.Millisecond),
			IdleTimeout: config.Duration(4 * time.Second),
			Balance:     "hash", HashOn: config.Source{Kind: config.SourceHeader, Name: "X-User"}, Protocol: "http1",
			HealthCheck: &config.HealthCheck{Path: "/healthz?deep=1", Interval: config.Duration(2 * time.Second),
				Timeout: config.Duration(500 * time.Millisecond), HealthyThreshold: 1, UnhealthyThreshold: 4},
			Passive:     &config.Passive{ConsecutiveFailures: 2, EjectFor: config.Duration(10 * time.Second), MaxEjectedPercent: 100},
			Retries:     2,
			RetryBudget: 0.5,
		},
		"defaults": func() config.Upstream {
			u := upstreamDefaults(config.Duration(config.DefaultUpstreamTimeout), "http://127.0.0.1:9004")
			u.HealthCheck = &config.HealthCheck{Path: "/ready", Interval: config.Duration(5 * time.Second),
				Timeout: config.Duration(time.Second), HealthyThreshold: 2, UnhealthyThreshold: 3}
			return u
		}(),
		// More retries than other targets; passive ejection off.
		"again": func() config.Upstream {
			u := upstreamDefaults(config.Duration(config.DefaultUpstreamTimeout), "http://127.0.0.1:9006", "http://127.0.0.1:9007")
			u.Retries = 2
			u.Passive.ConsecutiveFailures = 0
			return u
		}(),
		// The default connectTimeout is no longer than timeout, and the
		// health check's timeout no longer than its interval.
		"short": func() config.Upstream {
			u := upstreamDefaults(config.Duration(300*time.Millisecond), "http://127.0.0.1:9005")
			u.ConnectTimeout = u.Timeout
			u.HealthCheck = &config.HealthCheck{Path: "/ready", Interval: config.Duration(400 * time.Millisecond),
				Timeout: config.Duration(400 * time.Millisecond), HealthyThreshold: 2, UnhealthyThreshold: 3}
			return u
		}(),
	}
	if !reflect.DeepEqual(cfg.Upstreams, want) {
		g, _ := json.MarshalIndent(cfg.Upstreams, "", " ")
		w, _ := json.MarshalIndent(want, "", " ")
		t.Errorf("upstreams:\n got %s\nwant %s", g, w)
	}
	// JSON (the admin API) writes targets as {url, weight} and reads both forms.
	b, _ := json.Marshal(cfg.Upstreams["orders"].Targets[:2])
	if string(b) != `[{"url":"http://127.0.0.1:9001","weight":1},{"url":"http://127.0.0.1:9002","weight":3}]` {
		t.Errorf("targets as JSON: %s", b)
	}
	var ts []config.Target
	if err := json.Unmarshal([]byte(`["http://a:1", {"url": "http://b:2", "weight": 2}]`), &ts); err != nil ||
		!reflect.DeepEqual(ts, []config.Target{{URL: "http://a:1"}, {URL: "http://b:2", Weight: 2}}) {
		t.Errorf("targets from JSON: %+v, %v", ts, err)
	}
}

// TestUpstreamLoadErrors: one file per kind of upstream mistake, every
// message exact with file, line and field.
func TestUpstreamLoadErrors(t *testing.T) {
	tests := []struct {
		file string
		want []string
	}{
		{"targets.yaml", []string{
			"testdata/upstreams/targets.yaml:5: upstreams.app.targets[1].weight: must be in 1..1000, got 0",
			"testdata/upstreams/targets.yaml:7: upstreams.app.targets[2].weight: must be in 1..1000, got 1001",
			"testdata/upstreams/targets.yaml:8: upstreams.app.targets[3].weigth: unknown field; did you mean \"weight\"?",
			"testdata/upstreams/targets.yaml:9: upstreams.app.targets[4]: duplicate target \"http://127.0.0.1:9001\" (also targets[0], \"http://127.0.0.1:9001\")",
			"testdata/upstreams/targets.yaml:10: upstreams.app.targets[5].url: must be an absolute http:// or https:// URL with a host, got \"127.0.0.1:9005\"",
			"testdata/upstreams/targets.yaml:11: upstreams.app.targets[6]: needs a url (a target is a URL, or {url, weight})",
			"testdata/upstreams/targets.yaml:12: upstreams.app.targets[7]: expected a mapping, got a list",
			"testdata/upstreams/targets.yaml:13: upstreams.app.targets[8]: must not hold a user or password: sluice does not send them, and target URLs show in metrics, logs and the admin API",
			// The same server written another way is the same target.
			"testdata/upstreams/targets.yaml:14: upstreams.app.targets[9]: duplicate target \"HTTP://127.0.0.1:9001/\" (also targets[0], \"http://127.0.0.1:9001\")",
			"testdata/upstreams/targets.yaml:16: upstreams.app.targets[11]: duplicate target \"http://localhost/\" (also targets[10], \"http://Localhost:80\")",
			"testdata/upstreams/targets.yaml:19: upstreams.app.targets[14]: duplicate target \"http://LOCALHOST.:080/api\" (also targets[12], \"http://localhost/api\")",
		}},
		{"balance.yaml", []string{
			"testdata/upstreams/balance.yaml:4: upstreams.odd.balance: must be one of roundRobin, leastRequest, hash, got \"random\"",
			"testdata/upstreams/balance.yaml:5: upstreams.nokey.hashOn: is required with balance: hash (want header:NAME, query:NAME, path:NAME, cookie:NAME, host or ip)",
			"testdata/upstreams/balance.yaml:10: upstreams.rr.hashOn: is only used with balance: hash (balance is roundRobin)",
			"testdata/upstreams/balance.yaml:14: upstreams.bykey.hashOn: routes[1] (/users) sends to this upstream but has no path parameter {userId}",
			"testdata/upstreams/balance.yaml:18: upstreams.badkey.hashOn: invalid source \"header\": missing name after \"header:\" (want header:NAME, query:NAME, path:NAME, cookie:NAME, host or ip)",
		}},
		{"health.yaml", []string{
			"testdata/upstreams/health.yaml:4: upstreams.nopath.healthCheck.path: is required (the path probed on each target, like /healthz)",
			"testdata/upstreams/health.yaml:8: upstreams.app.healthCheck.path: must start with \"/\", got \"healthz\"",
			"testdata/upstreams/health.yaml:9: upstreams.app.healthCheck.interval: must be > 0 and <= 1h, got 0s",
			"testdata/upstreams/health.yaml:11: upstreams.app.healthCheck.healthyThreshold: must be >= 1, got 0",
			"testdata/upstreams/health.yaml:12: upstreams.app.healthCheck.unhealthyThreshold: must be >= 1, got -1",
			"testdata/upstreams/health.yaml:13: upstreams.app.healthCheck.method: unknown field",
			"testdata/upstreams/health.yaml:17: upstreams.slow.healthCheck.path: must be a URL path (and query), without spaces or a fragment, got \"/health check\"",
			"testdata/upstreams/health.yaml:19: upstreams.slow.healthCheck.timeout: must be <= interval (1s), got 2s",
		}},
		{"passive.yaml", []string{
			"testdata/upstreams/passive.yaml:5: upstreams.app.passive.consecutiveFailures: must be >= 0 (0 turns ejection off), got -1",
			"testdata/upstreams/passive.yaml:6: upstreams.app.passive.ejectFor: must be > 0 and <= 1h, got 2h0m0s",
			"testdata/upstreams/passive.yaml:7: upstreams.app.passive.maxEjectedPercent: must be in 0..100, got 101",
			"testdata/upstreams/passive.yaml:11: upstreams.typo.passive.ejectFor: expected a duration like \"30s\" or \"500ms\", got \"30\"",
		}},
		{"retries.yaml", []string{
			"testdata/upstreams/retries.yaml:5: upstreams.app.connectTimeout: must be <= timeout (1s), got 2s",
			"testdata/upstreams/retries.yaml:6: upstreams.app.retries: must be at most 256, got 257",
			"testdata/upstreams/retries.yaml:7: upstreams.app.retryBudget: must be a share in 0..1 of the requests (0.2 is a fifth), got 1.5",
			"testdata/upstreams/retries.yaml:10: upstreams.one.connectTimeout: must be > 0 and <= 1h, got 0s",
			"testdata/upstreams/retries.yaml:11: upstreams.one.retries: must be >= 0, got -1",
			"testdata/upstreams/retries.yaml:12: upstreams.one.retryBudget: must be a share in 0..1 of the requests (0.2 is a fifth), got -0.1",
			"testdata/upstreams/retries.yaml:13: upstreams.one.idleTimeout: must be > 0 and <= 1h, got 2h0m0s",
		}},
	}
	seen := map[string]bool{}
	for _, tt := range tests {
		seen[tt.file] = true
		cfg, err := config.Load("testdata/upstreams/" + tt.file)
		if cfg != nil {
			t.Errorf("%s: Load returned a Config along with errors", tt.file)
		}
		assertErrors(t, err, tt.want)
	}
	// Every file here is either valid or listed above.
	files, _ := filepath.Glob("testdata/upstreams/*.yaml")
	for _, f := range files {
		if _, err := config.Load(f); err != nil && !seen[filepath.Base(f)] {
			t.Errorf("%s fails but has no expected messages:\n%v", f, err)
		}
	}
}

// TestTooManyTargets: an upstream holds at most MaxTargets targets.
func TestTooManyTargets(t *testing.T) {
	var b strings.Builder
	b.WriteString("upstreams:\n  big:\n    targets:\n")
	for i := range config.MaxTargets + 1 {
		fmt.Fprintf(&b, "      - http://10.0.%d.%d:80\n", i/250, i%250+1)
	}
	b.WriteString("routes:\n  - path: /\n    upstream: big\n")
	_, err := config.Parse("big.yaml", []byte(b.String()))
	if want := "big.yaml:3: upstreams.big.targets: at most 256 targets, got 257"; err == nil || err.Error() != want {
		t.Fatalf("err = %v, want %s", err, want)
	}
}
