package proxy_test

import (
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// throttleAndReject is a throttle queue spacing calls 200 ms apart (or
// 500 ms, spacing) and a reject rule passing one call per 400 ms, both on
// every call to item.
func throttleAndReject(spacing string) string {
	return `
flowRules:
  - resource: item
    count: ` + spacing + `
    controlBehavior: throttle
    maxQueueingTimeMs: 1000
  - resource: item
    count: 1
    statIntervalMs: 400
`
}

// The reject rule counts a queued call when the queue forwards it: a call
// arriving 1 ms after a pass waits for its slot 500 ms later, when the
// 400 ms window has room again, and is forwarded. (Before, the window
// counted the pass at the call's arrival, found the first pass still
// there, and refused it.)
func TestThrottleRejectCountsAtForward(t *testing.T) {
	g, clock, up := clockedGateway(t, throttleAndReject("2"))
	if status, _, _ := get(g, "1", ""); status != 200 {
		t.Fatalf("first call: %d", status)
	}
	clock.advance(time.Millisecond)
	if status, blocked, _ := get(g, "1", ""); status != 200 {
		t.Fatalf("second call: %d (%s), want forwarded at its slot", status, blocked)
	}
	if w := clock.waits(); len(w) != 1 || w[0] != 499*time.Millisecond || up.calls.Load() != 2 {
		t.Fatalf("waits %v, upstream calls %d: want one wait of 499ms, 2 calls", w, up.calls.Load())
	}
}

// With a faster queue the window has no room at the slot: the call is
// refused at once, as the reject rule refuses, with its RateLimit fields,
// and is never queued.
func TestThrottleRejectRefusedAtForward(t *testing.T) {
	g, clock, up := clockedGateway(t, throttleAndReject("5"))
	if status, _, _ := get(g, "1", ""); status != 200 {
		t.Fatalf("first call: %d", status)
	}
	clock.advance(time.Millisecond)
	req := httptest.NewRequest("GET", "/item/1", nil)
	w := httptest.NewRecorder()
	g.ServeHTTP(w, req)
	h := w.Header()
	if w.Code != 429 || h.Get("X-Sluice-Blocked") != "flow" {
		t.Fatalf("second call: %d %q, want 429 flow", w.Code, h.Get("X-Sluice-Blocked"))
	}
	// RateLimit names the reject rule (the resource's second flow rule),
	// as its own refusal would.
	if rl := h.Get("RateLimit"); !strings.Contains(rl, `"item#flow2";r=0`) {
		t.Errorf("RateLimit %q, want the reject rule's (item#flow2) with none left", rl)
	}
	if len(clock.waits()) != 0 || up.calls.Load() != 1 {
		t.Fatalf("waits %v, upstream calls %d: want none queued, 1 call", clock.waits(), up.calls.Load())
	}
}
