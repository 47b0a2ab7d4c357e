package admin

import (
	"sort"
	"sync"
	"time"
)

// historyLen is how many one-second samples a resource keeps: 5 minutes.
const historyLen = 300

// values are one second of one resource.
type values struct{ pass, block, success, fail, rtMs float64 }

// ring holds one resource's samples of the history's last historyLen
// samplings, at the samplings' places (tick % historyLen): present says at
// which places it was sampled, vals what it had, nil while every sample
// held is zero. A resource without traffic, most of the 10,000 a large rule
// set may have, so costs a few dozen bytes, not historyLen full samples.
type ring struct {
	present [(historyLen + 63) / 64]uint64
	vals    *[historyLen]values
	missed  int // consecutive samplings the resource was absent from Stats
}

func (r *ring) has(i int) bool { return r.present[i/64]&(1<<(i%64)) != 0 }

// history is the per-resource rings and when each of the last historyLen
// samplings was taken. A resource absent from Stats for a full window is
// dropped, so the map is bounded by the configured resources.
type history struct {
	mu    sync.Mutex // guards everything below and every ring
	rings map[string]*ring
	at    [historyLen]int64 // Unix ms of the sampling at each place
	tick  int               // samplings taken
}

func newHistory() *history { return &history{rings: make(map[string]*ring)} }

// record adds one sample per resource in stats, taken at now.
func (h *history) record(now time.Time, stats []ResourceStats) {
	h.mu.Lock()
	defer h.mu.Unlock()
	i := h.tick % historyLen
	h.tick++
	h.at[i] = now.UnixMilli()
	// The place is the oldest sampling's: every ring forgets it.
	for _, r := range h.rings {
		r.present[i/64] &^= 1 << (i % 64)
		if r.vals != nil {
			r.vals[i] = values{}
		}
	}
	seen := make(map[string]bool, len(stats))
	for _, s := range stats {
		seen[s.Resource] = true
		r := h.rings[s.Resource]
		if r == nil {
			r = new(ring)
			h.rings[s.Resource] = r
		}
		r.missed = 0
		r.present[i/64] |= 1 << (i % 64)
		v := values{pass: s.PassQps, block: s.BlockQps, success: s.SuccessQps, fail: s.ErrorQps, rtMs: s.AvgRtMs}
		if v != (values{}) {
			if r.vals == nil {
				r.vals = new([historyLen]values)
			}
			r.vals[i] = v
		}
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
	held := min(h.tick, historyLen)
	first := h.tick - held // the oldest sampling held
	for name, r := range h.rings {
		if only != nil && !only[name] {
			continue
		}
		var places []int
		for k := first; k < h.tick; k++ {
			if i := k % historyLen; r.has(i) && h.at[i] > since {
				places = append(places, i)
			}
		}
		n := len(places)
		s := seriesJSON{
			Resource: name, T: make([]int64, n),
			PassQps: make([]float64, n), BlockQps: make([]float64, n),
			SuccessQps: make([]float64, n), ErrorQps: make([]float64, n), AvgRtMs: make([]float64, n),
		}
		for j, i := range places {
			s.T[j] = h.at[i]
			if r.vals != nil {
				v := r.vals[i]
				s.PassQps[j], s.BlockQps[j], s.SuccessQps[j], s.ErrorQps[j], s.AvgRtMs[j] = v.pass, v.block, v.success, v.fail, v.rtMs
			}
		}
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Resource < out[j].Resource })
	return out
}

// snapshot is snapshotOf every resource.
func (h *history) snapshot(since int64) []seriesJSON { return h.snapshotOf(since, nil) }
