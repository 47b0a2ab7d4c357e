package lifecycle_test

import (
	"bytes"
	"strings"
	"testing"

	"sluice/lifecycle"
)

// A negative -base would have stood for "not given" (the flag's default)
// and skipped the version check it asks for: push replaced whatever was
// stored (the cluster audit of 2026-12-07). It is a usage error, before
// any file is read or Redis asked.
func TestRulesPushRefusesNegativeBase(t *testing.T) {
	for _, base := range []string{"-5", "-1"} {
		var stdout, stderr bytes.Buffer
		code := lifecycle.Rules([]string{"push", "-base", base, "-config", "/nonexistent/rules.yaml", "doc.yaml"}, &stdout, &stderr)
		if code != 2 || !strings.Contains(stderr.String(), "-base must be a version (0 or more), got "+base) {
			t.Errorf("push -base %s: exit %d, %q; want 2 and the usage error", base, code, stderr.String())
		}
	}
}
