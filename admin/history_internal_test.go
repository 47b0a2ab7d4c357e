package admin

import (
	"context"
	"fmt"
	"testing"
	"time"
	"unsafe"
)

func TestHistoryKeepsFiveMinutesOldestFirst(t *testing.T) {
	h := newHistory()
	t0 := time.Unix(1_800_000_000, 0)
	for i := 0; i < historyLen+5; i++ {
		h.record(t0.Add(time.Duration(i)*time.Second), []ResourceStats{{Resource: "a", NodeStats: NodeStats{PassQps: float64(i), BlockQps: 1}}})
	}
	s := h.snapshot(0)
	if len(s) != 1 || len(s[0].T) != historyLen {
		t.Fatalf("snapshot: %d resources, %d samples; want 1, %d", len(s), len(s[0].T), historyLen)
	}
	if s[0].PassQps[0] != 5 || s[0].PassQps[historyLen-1] != historyLen+4 {
		t.Errorf("pass oldest %v newest %v, want 5 and %d", s[0].PassQps[0], s[0].PassQps[historyLen-1], historyLen+4)
	}
	if s[0].T[0] != t0.Add(5*time.Second).UnixMilli() {
		t.Errorf("oldest t %d", s[0].T[0])
	}
}

func TestHistoryDropsResourcesGoneForAWindow(t *testing.T) {
	h := newHistory()
	t0 := time.Unix(1_800_000_000, 0)
	h.record(t0, []ResourceStats{{Resource: "old"}, {Resource: "b"}})
	for i := 1; i < historyLen; i++ {
		h.record(t0.Add(time.Duration(i)*time.Second), []ResourceStats{{Resource: "b"}})
	}
	if n := len(h.snapshot(0)); n != 2 {
		t.Fatalf("%d resources after %d s, want 2 (old kept while in window)", n, historyLen-1)
	}
	h.record(t0.Add(historyLen*time.Second), []ResourceStats{{Resource: "b"}})
	if s := h.snapshot(0); len(s) != 1 || s[0].Resource != "b" {
		t.Fatalf("resources %v, want only b", s)
	}
}

func TestRunSamplesAtOnceAndStopsWithContext(t *testing.T) {
	at := time.Unix(1_800_000_000, 0)
	s := New(Options{
		Now: func() time.Time { return at },
		Stats: func() []ResourceStats {
			return []ResourceStats{{Resource: "orders", NodeStats: NodeStats{PassQps: 3, BlockQps: 1}}}
		},
	})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	s.Run(ctx) // returns: ctx is done
	h := s.hist.snapshot(0)
	if len(h) != 1 || len(h[0].T) != 1 || h[0].T[0] != at.UnixMilli() || h[0].PassQps[0] != 3 || h[0].BlockQps[0] != 1 {
		t.Fatalf("history after Run = %+v, want one sample of orders at %d", h, at.UnixMilli())
	}
}

func TestHistorySinceReturnsOnlyNewerSamples(t *testing.T) {
	h := newHistory()
	t0 := time.Unix(1_800_000_000, 0)
	for i := 0; i < historyLen+10; i++ {
		h.record(t0.Add(time.Duration(i)*time.Second), []ResourceStats{{Resource: "a", NodeStats: NodeStats{PassQps: float64(i)}}})
	}
	h.record(t0.Add(time.Duration(historyLen+10)*time.Second), []ResourceStats{{Resource: "b"}})
	last := t0.Add(time.Duration(historyLen+7) * time.Second).UnixMilli()
	s := h.snapshot(last)
	if len(s) != 2 || len(s[0].T) != 2 || s[0].PassQps[0] != historyLen+8 || s[0].PassQps[1] != historyLen+9 {
		t.Fatalf("since %d: %+v, want a's last two samples", last, s[0])
	}
	if len(s[1].T) != 1 {
		t.Fatalf("b: %+v, want its one sample", s[1])
	}
	if s := h.snapshot(t0.Add(time.Hour).UnixMilli()); len(s) != 2 || len(s[0].T) != 0 {
		t.Fatalf("since the future: %+v, want both resources with no samples", s)
	}
}

// A resource without traffic holds no samples' buffer: 10,000 routes of a
// large rule set, most of them idle, kept 300 full samples each (158 MB of
// a gateway's heap at 10,000 resources). Its zeros still read back as
// zeros, at the samplings it was present in.
func TestHistoryOfIdleResourcesIsSmall(t *testing.T) {
	h := newHistory()
	t0 := time.Unix(1_800_000_000, 0)
	stats := make([]ResourceStats, 10000)
	for i := range stats {
		stats[i].Resource = fmt.Sprintf("r%d", i)
	}
	stats[7].PassQps = 2
	for i := range 20 {
		h.record(t0.Add(time.Duration(i)*time.Second), stats)
	}
	buffers := 0
	for _, r := range h.rings {
		if r.vals != nil {
			buffers++
		}
	}
	if buffers != 1 {
		t.Errorf("%d resources hold a samples' buffer, want 1 (the one with traffic)", buffers)
	}
	if size := unsafe.Sizeof(ring{}); size > 64 {
		t.Errorf("an idle resource's ring is %d bytes, want at most 64", size)
	}
	s := h.snapshotOf(0, map[string]bool{"r7": true, "r8": true})
	if len(s) != 2 || len(s[0].T) != 20 || s[0].PassQps[19] != 2 || len(s[1].T) != 20 || s[1].PassQps[19] != 0 {
		t.Errorf("snapshot of r7 and r8: %+v", s)
	}
}
