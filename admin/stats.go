package admin

import (
	"cmp"
	"slices"
	"strings"
)

// NodeStats are one statistics node's numbers now, as the limiter's windows
// see them.
type NodeStats struct {
	PassQps     float64 `json:"passQps"`
	BlockQps    float64 `json:"blockQps"`
	SuccessQps  float64 `json:"successQps"`
	ErrorQps    float64 `json:"errorQps"`
	AvgRtMs     float64 `json:"avgRtMs"`
	Concurrency int64   `json:"concurrency"`
}

// NamedStats are the numbers of one origin or entrance of a resource.
type NamedStats struct {
	Name string `json:"name"`
	NodeStats
}

// ResourceStats are a resource's numbers now, in total and per origin and
// entrance. Served as JSON by /api/resources with NodeStats' fields inline.
type ResourceStats struct {
	Resource string `json:"resource"`
	NodeStats
	Origins   []NamedStats `json:"origins"`
	Entrances []NamedStats `json:"entrances"`
	// OriginsTotal is how many origins the limiter tracks for the resource;
	// /api/resources sets it and lists only the most active of them in
	// Origins (Stats callers may leave it 0).
	OriginsTotal int `json:"originsTotal"`
}

// defaultOriginsShown is how many origins per resource /api/resources lists
// unless ?origins= asks otherwise: the limiter tracks up to 10,000, and the
// dashboard polls every second, so a flood of distinct origins must not turn
// each poll into megabytes and a 10,000-row table.
const defaultOriginsShown = 50

// topOrigins sorts origins by activity (mostActive) and keeps the first n;
// n < 0 keeps all. It sorts in place.
func topOrigins(origins []NamedStats, n int) []NamedStats {
	return mostActive(origins, n, func(o *NamedStats) (*NodeStats, string) { return &o.NodeStats, o.Name })
}

// topResources is topOrigins for resources; n < 0 keeps all, in the order
// given.
func topResources(stats []ResourceStats, n int) []ResourceStats {
	if n < 0 || len(stats) <= n {
		return stats
	}
	return mostActive(stats, n, func(r *ResourceStats) (*NodeStats, string) { return &r.NodeStats, r.Resource })
}

// mostActive sorts xs by activity (pass+block, then in flight, then name)
// and keeps the first n (n < 0: all). It sorts in place.
func mostActive[T any](xs []T, n int, of func(*T) (*NodeStats, string)) []T {
	slices.SortStableFunc(xs, func(a, b T) int {
		sa, na := of(&a)
		sb, nb := of(&b)
		if c := cmp.Compare(sb.PassQps+sb.BlockQps, sa.PassQps+sa.BlockQps); c != 0 {
			return c
		}
		if c := cmp.Compare(sb.Concurrency, sa.Concurrency); c != 0 {
			return c
		}
		return strings.Compare(na, nb)
	})
	if n >= 0 && len(xs) > n {
		xs = xs[:n]
	}
	return xs
}
