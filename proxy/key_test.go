package proxy_test

import (
	"strings"
	"testing"
)

// TestCompositeKeys: a composite key (SPEC §3 Sources: Composite keys)
// gives each combination of its sources' values its own bucket; a request
// lacking one of the sources is not limited by the rule; several values
// are checked as every combination (a combination cannot hide behind
// decoys), and more than 16 combinations is 400; parts holding "+" cannot
// be confused with other parts.
func TestCompositeKeys(t *testing.T) {
	tenants := func(n int) string {
		var b []string
		for i := range n {
			b = append(b, "t"+string(rune('a'+i)))
		}
		return strings.Join(b, ", ")
	}
	for _, tc := range []struct {
		name, param string
		steps       []step
	}{
		{"ip+header", "ip+header:X-Tenant", []step{
			{target: "/item/x", lines: []string{"X-Tenant", "acme"}, status: 200},
			{target: "/item/x", lines: []string{"X-Tenant", "acme"}, status: 429, reason: "param"},
			{target: "/item/x", lines: []string{"X-Tenant", "beta"}, status: 200},
			{target: "/item/x", lines: []string{"X-Tenant", "beta"}, status: 429, reason: "param"},
			// No tenant: no value, not limited.
			{target: "/item/x", status: 200}, {target: "/item/x", status: 200},
			{target: "/item/x", lines: []string{"X-Tenant", ""}, status: 200},
		}},
		{"header+query, several values", "header:X-Tenant+query:u", []step{
			{target: "/item/x?u=1", lines: []string{"X-Tenant", "a"}, status: 200},
			{target: "/item/x?u=1", lines: []string{"X-Tenant", "a"}, status: 429, reason: "param"},
			{target: "/item/x?u=2", lines: []string{"X-Tenant", "a"}, status: 200},
			{target: "/item/x?u=1", lines: []string{"X-Tenant", "b"}, status: 200},
			// a+1 is among the combinations: blocked, whatever beside it.
			{target: "/item/x?u=3&u=1", lines: []string{"X-Tenant", "c, a"}, status: 429, reason: "param"},
			// ...and the fresh ones (c+3, c+1, a+3) were given their tokens back.
			{target: "/item/x?u=3&u=4", lines: []string{"X-Tenant", "c"}, status: 200},
			{target: "/item/x?u=1", lines: []string{"X-Tenant", "c"}, status: 200},
			{target: "/item/x?u=3", lines: []string{"X-Tenant", "a"}, status: 200},
			// 4 tenants x 4 users is 16: checked; 17 or more cannot be.
			{target: "/item/x?u=5&u=6&u=7&u=8", lines: []string{"X-Tenant", tenants(4)}, status: 200},
			{target: "/item/x?u=5&u=6&u=7&u=8", lines: []string{"X-Tenant", tenants(5)}, status: 400},
			{target: "/item/x?u=1&u=5&u=6&u=7&u=8", lines: []string{"X-Tenant", "a, " + tenants(3)}, status: 400},
			{target: "/item/x?u=5&u=6&u=7&u=8", lines: []string{"X-Tenant", tenants(4)}, status: 429, reason: "param"},
			// A lacking part: no value.
			{target: "/item/x", lines: []string{"X-Tenant", "a"}, status: 200},
			{target: "/item/x?u=1", status: 200},
		}},
		{"a + inside a part", "header:X-Tenant+query:u", []step{
			{target: "/item/x?u=z", lines: []string{"X-Tenant", "x+y"}, status: 200},
			{target: "/item/x?u=y%2Bz", lines: []string{"X-Tenant", "x"}, status: 200},
			{target: "/item/x?u=z", lines: []string{"X-Tenant", "x+y"}, status: 429, reason: "param"},
			{target: "/item/x?u=y%2Bz", lines: []string{"X-Tenant", "x"}, status: 429, reason: "param"},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g, _, up := clockedGateway(t, `
paramRules:
  - resource: item
    param: "`+tc.param+`"
    count: 1
    durationSec: 3600
`)
			forwarded := int32(0)
			for i, st := range tc.steps {
				status, blocked := sendLines(g, st.target, st.lines...)
				if status != st.status || blocked != st.reason {
					t.Fatalf("step %d (%s %q): %d %q, want %d %q", i, st.target, st.lines, status, blocked, st.status, st.reason)
				}
				if status == 200 {
					forwarded++
				}
				if n := up.calls.Load(); n != forwarded {
					t.Fatalf("step %d: upstream has %d requests, want %d", i, n, forwarded)
				}
			}
		})
	}
}
