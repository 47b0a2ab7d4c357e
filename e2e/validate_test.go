package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestValidateAgreesWithTheGateway: what `sluice validate` refuses, the
// gateway refuses to start with, with the same FILE:LINE message; what it
// accepts at the very limit, the gateway starts with.
func TestValidateAgreesWithTheGateway(t *testing.T) {
	t.Parallel()
	up := startUpstream(t, nil)
	degrade := func(n int) string {
		var b strings.Builder
		b.WriteString("degradeRules:\n")
		for i := range n {
			fmt.Fprintf(&b, "  - {resource: r, strategy: errorCount, threshold: %d}\n", i+1)
		}
		return b.String()
	}
	rules := func(rest string) string {
		return rulesFor(up.URL, "routes:\n  - path: /r\n    upstream: up\n    resource: r\n"+rest)
	}
	cases := []struct {
		name, refused, want, limit string
	}{
		{"qps count", rules("flowRules:\n  - resource: r\n    count: 3000000000\n"),
			":11: flowRules[0].count: must be <= 2147483648 (2^31), got 3000000000",
			rules("flowRules:\n  - resource: r\n    count: 2147483648\n")},
		{"degrade rules per resource", rules(degrade(65)),
			`:74: degradeRules[64].resource: resource "r" has more than 64 degrade rules (the most one resource may have)`,
			rules(degrade(64))},
		{"degrade errorStatuses", rules("degradeRules:\n  - resource: r\n    strategy: errorCount\n    threshold: 1\n    errorStatuses: [\"5xx\", 600]\n"),
			`:13: degradeRules[0].errorStatuses[1]: must be a status code in 100..599 (429) or a class ("5xx"), got "600"`,
			rules("degradeRules:\n  - resource: r\n    strategy: errorCount\n    threshold: 1\n    errorStatuses: [\"5xx\", 599, 429, 1XX]\n    probeNum: 2147483648\n")},
		{"flow burstCount", rules("flowRules:\n  - resource: r\n    count: 10\n    burstCount: 5\n"),
			`:12: flowRules[0].burstCount: is only used with controlBehavior throttle, got controlBehavior "reject"`,
			rules("flowRules:\n  - resource: r\n    count: 10\n    burstCount: 2147483648\n    controlBehavior: throttle\n")},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "rules.yaml")
			if err := os.WriteFile(path, []byte(c.refused), 0o644); err != nil {
				t.Fatal(err)
			}
			want := path + c.want
			out, err := exec.Command(binary, "validate", path).CombinedOutput()
			if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 || strings.TrimSpace(string(out)) != want {
				t.Errorf("sluice validate: %v, output:\n%s\nwant exit 1 and:\n%s", err, out, want)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, binary, "-config", path, "-listen", "127.0.0.1:0", "-admin", "off", "-log-format", "json")
			out, err = cmd.CombinedOutput()
			if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 || !strings.Contains(string(out), "not starting") ||
				!strings.Contains(string(out), strings.ReplaceAll(want, `"`, `\"`)) {
				t.Errorf("the gateway with the refused file: %v, output:\n%s\nwant exit 1 and %s", err, out, want)
			}

			// At the limit: valid, and the gateway starts and serves.
			if err := os.WriteFile(path, []byte(c.limit), 0o644); err != nil {
				t.Fatal(err)
			}
			if out, err := exec.Command(binary, "validate", path).CombinedOutput(); err != nil {
				t.Errorf("sluice validate at the limit: %v\n%s", err, out)
			}
			g := startGatewayFile(t, path)
			if resp, _ := get(t, g.URL+"/r"); resp.StatusCode != 200 {
				t.Errorf("at the limit: GET /r = %d, want 200", resp.StatusCode)
			}
		})
	}
}
