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

// TestSharedRateLimitValues: the snapshot's shared RateLimit values are
// the ones setRateLimit formats, for quotas inside and past the shared
// table (BenchmarkRateLimitHeaders and TestFastPathAllocations show that
// they cost no allocation).
func TestSharedRateLimitValues(t *testing.T) {
	var c rateLimitHeaders
	for _, q := range []limiter.Quota{
		{Policy: "item", Limit: 10, Window: time.Second, Remaining: 9, Reset: time.Second},
		{Policy: "item", Limit: 10, Window: time.Second, Remaining: 0, Reset: 300 * time.Millisecond},
		{Policy: "item", Limit: 10, Window: time.Second, Remaining: -1, Reset: 0},
		{Policy: `say "hi"`, Limit: 0.5, Window: time.Second, Remaining: 0, Reset: 2 * time.Second},
		{Policy: "big", Limit: 1e6, Window: time.Second, Remaining: 999999, Reset: time.Second},
		{Policy: "slow", Limit: 100, Window: time.Hour, Remaining: 50, Reset: 30 * time.Minute},
		{Policy: "a-resource-named-at-length-" + "0123456789012345678901234567890123456789", Limit: 1e9, Window: time.Second, Remaining: 5e8, Reset: time.Second},
	} {
		want, got := http.Header{}, http.Header{}
		setRateLimit(want, &q)
		for range 2 {
			c.set(got, &q, false)
			for _, f := range []string{"Ratelimit-Policy", "Ratelimit"} {
				if got.Get(f) != want.Get(f) {
					t.Errorf("%+v: %s %q, want %q", q, f, got.Get(f), want.Get(f))
				}
			}
		}
	}
}

// BenchmarkRateLimitHeaders: setting both fields from the snapshot's
// shared values, against formatting them per response.
func BenchmarkRateLimitHeaders(b *testing.B) {
	q := limiter.Quota{Policy: "item", Limit: 1000, Window: time.Second, Reset: time.Second}
	h := http.Header{}
	b.Run("shared", func(b *testing.B) {
		var c rateLimitHeaders
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			q.Remaining = float64(i % 1000)
			c.set(h, &q, false)
		}
	})
	b.Run("formatted", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			q.Remaining = float64(i % 1000)
			setRateLimit(h, &q)
		}
	})
}
