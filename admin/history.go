package admin

import (
	"sort"
	"sync"
	"time"
)

// historyLen is how many one-second samples a resource keeps: 5 minutes.
const historyLen = 300

// sample is one second of one resource.
type sample struct {
	at                               int64 // Unix milliseconds
	pass, block, success, fail, rtMs float64
}

// ring holds the last historyLen samples of one resource, oldest first from
// next once full.
type ring struct {
	buf    [historyLen]sample
	next   int // where the next sample goes
	n      int // samples held, up to historyLen
	missed int // consecutive samplings the resource was absent from Stats
}

func (r *ring) add(s sample) {
	r.buf[r.next] = s
	r.next = (r.next + 1) % historyLen
	if r.n < historyLen {
		r.n++
	}
}

// history is the per-resource rings. A resource absent from Stats for a full
// window is dropped, so the map is bounded by the configured resources.
type history struct {
	mu    sync.Mutex // guards rings and every ring in it
	rings map[string]*ring
}

func newHistory() *history { return &history{rings: make(map[string]*ring)} }

// record adds one sample per resource in stats, taken at now.
func (h *history) record(now time.Time, stats []ResourceStats) {
	at := now.UnixMilli()
	h.mu.Lock()
	defer h.mu.Unlock()
	seen := make(map[string]bool, len(stats))
	for _, s := range stats {
		seen[s.Resource] = true
		r := h.rings[s.Resource]
		if r == nil {
			r = new(ring)
			h.rings[s.Resource] = r
		}
		r.missed = 0
		r.add(sample{at: at, pass: s.PassQps, block: s.BlockQps, success: s.SuccessQps, fail: s.ErrorQps, rtMs: s.AvgRtMs})
	}
	for name, r := range h.rings {
		if seen[name] {
			continue
		}
		if r.missed++; r.missed >= historyLen {
			delete(h.rings, name)
		}
	}
}

// seriesJSON is one resource's history, column-wise so the page can plot it
// without reshaping.
type seriesJSON struct {
	Resource   string    `json:"resource"`
	T          []int64   `json:"t"` // Unix milliseconds
	PassQps    []float64 `json:"passQps"`
	BlockQps   []float64 `json:"blockQps"`
	SuccessQps []float64 `json:"successQps"`
	ErrorQps   []float64 `json:"errorQps"`
	AvgRtMs    []float64 `json:"avgRtMs"`
}

// snapshotOf returns every resource's samples taken after since (Unix ms; 0 =
// all), oldest first, sorted by resource; only the resources in only, if
// it is not nil. A resource with no newer sample is listed with empty
// series, so a client polling with since still sees it.
func (h *history) snapshotOf(since int64, only map[string]bool) []seriesJSON {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := len(h.rings)
	if only != nil {
		n = min(n, len(only))
	}
	out := make([]seriesJSON, 0, n)
	for name, r := range h.rings {
		if only != nil && !only[name] {
			continue
		}
		start := (r.next - r.n + historyLen) % historyLen
		skip := 0
		for skip < r.n && r.buf[(start+skip)%historyLen].at <= since {
			skip++
		}
		n := r.n - skip
		s := seriesJSON{
			Resource: name, T: make([]int64, n),
			PassQps: make([]float64, n), BlockQps: make([]float64, n),
			SuccessQps: make([]float64, n), ErrorQps: make([]float64, n), AvgRtMs: make([]float64, n),
		}
		for i := 0; i < n; i++ {
			p := r.buf[(start+skip+i)%historyLen]
			s.T[i], s.PassQps[i], s.BlockQps[i], s.SuccessQps[i], s.ErrorQps[i], s.AvgRtMs[i] =
				p.at, p.pass, p.block, p.success, p.fail, p.rtMs
		}
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Resource < out[j].Resource })
	return out
}

// snapshot is snapshotOf every resource.
func (h *history) snapshot(since int64) []seriesJSON { return h.snapshotOf(since, nil) }
