package lifecycle

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/rs/zerolog"
	"gopkg.in/yaml.v3"

	"sluice/config"
	"sluice/limiter"
)

// buildErr builds cfg as serve does (metrics, the Redis client when a rule
// needs it, the gateway with cfg loaded) and returns build's error.
func buildErr(t *testing.T, cfg *config.Config) error {
	t.Helper()
	g, err := build(Options{Config: cfg.Path, Admin: "off"}, cfg, nil, zerolog.Nop())
	if err == nil {
		g.close()
	}
	return err
}

// TestBuildAcceptsEveryValidRulesFile: every rules file in the repository
// that `sluice validate` accepts (the shipped rules, the docs' and tests'
// fixtures, limits_ok.yaml with every limit at its most) is one the gateway
// builds.
func TestBuildAcceptsEveryValidRulesFile(t *testing.T) {
	var valid []string
	err := filepath.WalkDir("..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && d.Name() == ".git" {
			return filepath.SkipDir
		}
		if d.IsDir() || !(strings.HasSuffix(path, ".yaml") || strings.HasSuffix(path, ".yml")) {
			return nil
		}
		cfg, err := config.Load(path)
		if err != nil {
			return nil // validate refuses it: nothing to build
		}
		valid = append(valid, path)
		if err := buildErr(t, cfg); err != nil {
			t.Errorf("%s: sluice validate accepts it, the gateway refuses it: %v", path, err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"rules.yaml", "config/testdata/full.yaml", "config/testdata/limits_ok.yaml"} {
		if !slices.Contains(valid, filepath.Join("..", want)) {
			t.Errorf("%s was not found valid; valid files: %v", want, valid)
		}
	}
}

// sweepBase has one rule of every kind; the sweep sets one field at a time.
const sweepBase = `
upstreams:
  app: {targets: ["http://127.0.0.1:9001"]}
routes:
  - {path: "/r/{id}", upstream: app, resource: r}
  - {path: /s, upstream: app, resource: s}
flowRules:
  - {resource: r, count: 10}
  - {resource: r, count: 10, controlBehavior: warmUp}
  - {resource: r, count: 10, controlBehavior: throttle, maxQueueingTimeMs: 10}
  - {resource: r, count: 10, controlBehavior: warmUpThrottle}
  - {resource: r, count: 10, grade: concurrency}
  - {resource: r, count: 10, strategy: relate, refResource: s}
paramRules:
  - {resource: r, param: "path:id", count: 2, items: [{value: "1", count: 3}]}
  - {resource: r, param: "path:id", count: 2, controlBehavior: throttle}
  - {resource: r, param: "path:id", count: 2, grade: concurrency}
degradeRules:
  - {resource: r, strategy: slowRatio, maxAllowedRtMs: 100, threshold: 0.5}
  - {resource: r, strategy: errorRatio, threshold: 0.5}
  - {resource: r, strategy: errorCount, threshold: 3}
system: {maxQps: 100, maxConcurrency: 10, maxAvgRtMs: 100, maxCpuUsage: 0.5}
`

// TestBuildAcceptsWhatValidateAccepts sets every numeric field of every kind
// of rule, one at a time, to values around the limits and past them: each
// value validation accepts, the gateway builds. Values at the limits must be
// accepted, so validation cannot pass this test by refusing too much.
func TestBuildAcceptsWhatValidateAccepts(t *testing.T) {
	values := []any{0, -1, 0.5, 1, 1.5, 2147483647, 2147483648, 2147483649, 4294967296, 1e15, 1e19, 1e300,
		int64(9223372036854775807), 31536000, 31536001, 31536000000, 31536000001, 9223372037, 3600000, 3600001}
	var fields []string
	add := func(base string, n int, names ...string) {
		for i := range n {
			for _, f := range names {
				fields = append(fields, fmt.Sprintf("%s[%d].%s", base, i, f))
			}
		}
	}
	add("flowRules", 6, "count", "warmUpPeriodSec", "coldFactor", "maxQueueingTimeMs", "statIntervalMs")
	add("paramRules", 3, "count", "durationSec", "burstCount", "maxQueueingTimeMs", "maxTrackedValues")
	add("paramRules[0].items", 1, "count")
	add("degradeRules", 3, "threshold", "maxAllowedRtMs", "statIntervalMs", "minRequestAmount", "retryTimeoutMs")
	add("routes", 1, "acquireCount")
	fields = append(fields, "system.maxQps", "system.maxConcurrency", "system.maxAvgRtMs", "system.maxCpuUsage")

	// Two halves of the fields at once: each value is a build of its own,
	// and one at a time took 8 s of CI under -race on one of two cores.
	var mu sync.Mutex
	accepted := map[string]bool{}
	sweep := func(t *testing.T, fields []string) {
		for _, f := range fields {
			for _, v := range values {
				var doc map[string]any
				if err := yaml.Unmarshal([]byte(sweepBase), &doc); err != nil {
					t.Fatal(err)
				}
				setField(t, doc, f, v)
				data, err := yaml.Marshal(doc)
				if err != nil {
					t.Fatal(err)
				}
				cfg, err := config.Parse("sweep.yaml", data)
				if err != nil {
					continue
				}
				name := fmt.Sprintf("%s=%v", f, v)
				mu.Lock()
				accepted[name] = true
				mu.Unlock()
				if err := buildErr(t, cfg); err != nil {
					t.Errorf("%s: validation accepts it, the gateway refuses it: %v", name, err)
				}
			}
		}
	}
	t.Run("sweep", func(t *testing.T) {
		half := len(fields) / 2
		for i, part := range [][]string{fields[:half], fields[half:]} {
			t.Run(fmt.Sprint(i), func(t *testing.T) {
				t.Parallel()
				sweep(t, part)
			})
		}
	})
	for _, want := range []string{
		"flowRules[0].count=2147483648", "flowRules[4].count=2147483648", "flowRules[5].count=2147483648",
		"paramRules[2].count=2147483648", "paramRules[0].items[0].count=2147483648", "routes[0].acquireCount=2147483648",
		"paramRules[0].durationSec=31536000", "flowRules[2].maxQueueingTimeMs=31536000000",
		"degradeRules[0].retryTimeoutMs=31536000000", "system.maxAvgRtMs=31536000000", "flowRules[0].statIntervalMs=3600000",
		"paramRules[0].items[0].count=0",
	} {
		if !accepted[want] {
			t.Errorf("validation refuses %s, which the gateway can hold", want)
		}
	}
	if len(accepted) < 200 {
		t.Errorf("only %d values accepted: the sweep is not testing much", len(accepted))
	}
}

// setField sets a dotted path ("flowRules[2].count", "system.maxQps") in a
// decoded YAML document.
func setField(t *testing.T, doc map[string]any, path string, v any) {
	t.Helper()
	var cur any = doc
	parts := strings.Split(path, ".")
	for i, p := range parts {
		last := i == len(parts)-1
		name, index, isIndex := strings.Cut(p, "[")
		m, ok := cur.(map[string]any)
		if !ok {
			t.Fatalf("%s: %s is not a mapping", path, name)
		}
		if !isIndex {
			if last {
				m[name] = v
				return
			}
			cur = m[name]
			continue
		}
		var n int
		if _, err := fmt.Sscanf(index, "%d]", &n); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		list, ok := m[name].([]any)
		if !ok || n >= len(list) {
			t.Fatalf("%s: no %s[%d]", path, name, n)
		}
		if last {
			list[n] = v
			return
		}
		cur = list[n]
	}
}

// TestBlockBodyRenderedForEveryReason: the gateway renders the block body
// for every reason the limiter names; a body that fails for one of them
// only is refused by validation.
func TestBlockBodyRenderedForEveryReason(t *testing.T) {
	for r := limiter.ReasonNone; r <= limiter.ReasonDryRun; r++ {
		body := fmt.Sprintf(`{{if eq .Reason %q}}{{index .Resource 99}}{{end}}`, r.String())
		data := "upstreams: {app: {targets: [\"http://127.0.0.1:9001\"]}}\nroutes: [{path: /a, upstream: app}]\n" +
			"blockResponse: {body: '" + body + "'}\n"
		_, err := config.Parse("r.yaml", []byte(data))
		if want := fmt.Sprintf("and reason %q: ", r.String()); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("reason %q: Parse error %v, want it to contain %q", r.String(), err, want)
		}
	}
}

// FuzzBuildAcceptsWhatValidateAccepts: whatever the bytes, a file that
// validation accepts is one the gateway builds.
func FuzzBuildAcceptsWhatValidateAccepts(f *testing.F) {
	for _, glob := range []string{"*.yaml", "config/testdata/*.yaml", "admin/testdata/*.yaml", "deploy/*.yaml"} {
		files, _ := filepath.Glob(filepath.Join("..", glob))
		for _, name := range files {
			if data, err := os.ReadFile(name); err == nil && len(data) < 64<<10 {
				f.Add(data)
			}
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := config.Parse("f.yaml", data)
		if err != nil {
			return
		}
		if err := buildErr(t, cfg); err != nil {
			t.Fatalf("validation accepts it, the gateway refuses it: %v\n%s", err, data)
		}
	})
}
