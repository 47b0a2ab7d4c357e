package cluster

import (
	"encoding/binary"
	"hash/fnv"
	"math"
	"strconv"
	"sync"

	"sluice/config"
)

// Window shape: a rule's statIntervalMs is cut into at most maxBuckets buckets
// and a pass is remembered until its whole bucket is older than the interval,
// i.e. the window spans buckets b-nb..b. So no real interval of that length
// ever holds more than count passes, at the price of a steady-overload rate of
// count*nb/(nb+1) per interval (97.6% with 40 buckets).
const maxBuckets = 40

// ruleIdent is the part of a FlowRule that defines what is counted and how
// much. Two rules with equal idents share a Redis window, in this gateway and
// in every other one; Line and local-only behaviour fields are not part of it,
// so moving a rule in the file or editing dryRun keeps its window.
type ruleIdent struct {
	resource, limitApp, refResource string
	grade                           config.Grade
	strategy                        config.Strategy
	threshold                       config.ThresholdType
	count                           float64
	statIntervalMs                  int64
}

func identOf(r *config.FlowRule) ruleIdent {
	return ruleIdent{
		resource: r.Resource, limitApp: r.LimitApp, refResource: r.RefResource,
		grade: r.Grade, strategy: r.Strategy, threshold: r.ClusterConfig.ThresholdType,
		count: r.Count, statIntervalMs: r.StatIntervalMs,
	}
}

// ruleSpec is what the acquire script needs about a rule, prepared once.
type ruleSpec struct {
	prefix string // namespace + rule hash + ":"; the origin follows
	// argv is the rule's script arguments except n, boxed once so that a call
	// does not box them again: count, bucket ms, bucket count, avgLocal flag.
	argv [4]any
}

// hash is a stable 64-bit FNV-1a of the identity: equal on every gateway and
// across restarts (unlike maphash), so all gateways meet on the same key.
func (id ruleIdent) hash() uint64 {
	h := fnv.New64a()
	var num [8]byte
	for _, s := range []string{id.resource, id.limitApp, string(id.grade), string(id.strategy), id.refResource, string(id.threshold)} {
		binary.LittleEndian.PutUint64(num[:], uint64(len(s)))
		h.Write(num[:]) // length prefixes keep ("ab","c") apart from ("a","bc")
		h.Write([]byte(s))
	}
	binary.LittleEndian.PutUint64(num[:], math.Float64bits(id.count))
	h.Write(num[:])
	binary.LittleEndian.PutUint64(num[:], uint64(id.statIntervalMs))
	h.Write(num[:])
	return h.Sum64()
}

func windowShape(statIntervalMs int64) (bucketMs, buckets int64) {
	w := statIntervalMs
	if w <= 0 {
		w = 1000
	}
	buckets = min(maxBuckets, w)
	bucketMs = (w + buckets - 1) / buckets  // ceil: buckets*bucketMs >= w keeps the bound
	buckets = (w + bucketMs - 1) / bucketMs // and no bucket more than that needs
	return bucketMs, buckets
}

func newSpec(ns string, id ruleIdent) *ruleSpec {
	bucketMs, buckets := windowShape(id.statIntervalMs)
	avg := "0"
	if id.threshold == config.ThresholdAvgLocal {
		avg = "1"
	}
	return &ruleSpec{
		prefix: ns + "f:" + strconv.FormatUint(id.hash(), 16) + ":",
		argv: [4]any{
			strconv.FormatFloat(id.count, 'g', -1, 64),
			strconv.FormatInt(bucketMs, 10),
			strconv.FormatInt(buckets, 10),
			avg,
		},
	}
}

// specCache maps rule identities to prepared specs. Identities come from
// config, not requests, so it stays small; it is cleared when it reaches
// maxSpecs so that years of reloads cannot grow it.
type specCache struct {
	ns string
	mu sync.Mutex
	m  map[ruleIdent]*ruleSpec // guarded by mu
}

const maxSpecs = 4096

func (c *specCache) get(r *config.FlowRule) *ruleSpec {
	id := identOf(r)
	c.mu.Lock()
	defer c.mu.Unlock()
	if s, ok := c.m[id]; ok {
		return s
	}
	if c.m == nil || len(c.m) >= maxSpecs {
		c.m = make(map[ruleIdent]*ruleSpec)
	}
	s := newSpec(c.ns, id)
	c.m[id] = s
	return s
}
