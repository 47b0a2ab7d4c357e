package proxy

import (
	"net/http"
	"testing"
	"time"

	"sluice/limiter"
)

// The RateLimit fields name the resource as a structured-field string:
// printable ASCII with '"' and '\' escaped, so a conforming parser reads
// them whatever the resource is called.
func TestRateLimitFieldsNameAnyResource(t *testing.T) {
	for _, c := range []struct{ resource, policy, limit string }{
		{"get-order", `"get-order";q=10;w=1`, `"get-order";r=9;t=1`},
		{`say "hi"`, `"say \"hi\"";q=10;w=1`, `"say \"hi\"";r=9;t=1`},
		{`a\b`, `"a\\b";q=10;w=1`, `"a\\b";r=9;t=1`},
		{"订单", `"%E8%AE%A2%E5%8D%95";q=10;w=1`, `"%E8%AE%A2%E5%8D%95";r=9;t=1`},
		{"50%", `"50%25";q=10;w=1`, `"50%25";r=9;t=1`},
		{"tab\there", `"tab%09here";q=10;w=1`, `"tab%09here";r=9;t=1`},
	} {
		h := http.Header{}
		setRateLimit(h, &limiter.Quota{Policy: c.resource, Limit: 10, Window: time.Second, Remaining: 9, Reset: time.Second})
		if got := h.Get("RateLimit-Policy"); got != c.policy {
			t.Errorf("%q: RateLimit-Policy %s, want %s", c.resource, got, c.policy)
		}
		if got := h.Get("RateLimit"); got != c.limit {
			t.Errorf("%q: RateLimit %s, want %s", c.resource, got, c.limit)
		}
	}
}
