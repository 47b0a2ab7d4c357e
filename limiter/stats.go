package limiter

import (
	"slices"
	"strings"
)

// ResourceStats are one resource's statistics now.
type ResourceStats struct {
	Resource  string
	Node      NodeStats
	Origins   []NamedStats // per (resource, origin), most recently used first within each LRU shard
	Entrances []NamedStats // per (entrance, resource), by entrance
}

// NamedStats are the statistics of one origin or entrance.
type NamedStats struct {
	Name string
	NodeStats
}

// NodeStats are a node's rates over the last second (in tokens) and its calls
// in flight now.
type NodeStats struct {
	PassQps, BlockQps, SuccessQps, ErrorQps, AvgRtMs float64
	Concurrency                                      int64
}

// Stats returns every known resource's statistics at now, by resource name.
// It locks and allocates: it is for the admin API, not the hot path.
func (f *Flow) Stats(now int64) []ResourceStats {
	f.mu.Lock()
	names := make([]string, 0, len(f.nodes))
	for k := range f.nodes {
		names = append(names, k)
	}
	ents := make(map[string][]NamedStats)
	for k, n := range f.ents {
		ents[k.resource] = append(ents[k.resource], NamedStats{Name: k.entrance, NodeStats: n.stats(now)})
	}
	nodes := make([]*resNode, 0, len(names))
	slices.Sort(names)
	for _, k := range names {
		nodes = append(nodes, f.nodes[k])
	}
	f.mu.Unlock()
	out := make([]ResourceStats, 0, len(names))
	for i, name := range names {
		n := nodes[i]
		rs := ResourceStats{Resource: name, Node: n.all.stats(now), Entrances: ents[name]}
		slices.SortFunc(rs.Entrances, func(a, b NamedStats) int { return strings.Compare(a.Name, b.Name) })
		n.origins.Each(func(o string, _ bool, sn **statNode) {
			rs.Origins = append(rs.Origins, NamedStats{Name: o, NodeStats: (*sn).stats(now)})
		})
		out = append(out, rs)
	}
	return out
}
