package cluster

import (
	"encoding/binary"
	"hash/fnv"
	"math"
	"strconv"
	"sync"

	"sluice/config"
	"sluice/internal/redisconn"
)

// ruleIdent is the part of a FlowRule that defines what is counted and how
// much: the fields config.RuleIdentity marks Cluster (TestRedisWindowFollowsRuleIdentity
// checks that it reads exactly those). Two rules with equal idents share a
// Redis window, in this gateway and in every other one; Line and local-only
// behaviour fields are not part of it, so moving a rule in the file or
// editing dryRun keeps its window. The fields are written out here, in a
// fixed order, so that the hash (the Redis keys) stays what every gateway
// of the fleet computes, whatever version it runs.
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
	// prefix is "{namespace:w:<rule hash>}:", the origin follows: the hash
	// tag is the rule's, so all of a rule's windows share one Redis Cluster
	// slot and different rules spread over the shards.
	prefix string
	slot   int  // the prefix's hash slot: calls of one slot share a script run
	avg    bool // thresholdType avgLocal
	// argv is the rule's script arguments besides n and demand, boxed once so
	// that a call does not box them again: count, statIntervalMs, avgLocal flag.
	argv [3]any
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

func newSpec(ns string, id ruleIdent) *ruleSpec {
	avg := "0"
	if id.threshold == config.ThresholdAvgLocal {
		avg = "1"
	}
	// "w:" rather than the bucketed window's "f:", and the rule's own hash
	// tag rather than the namespace's: a gateway of an old layout meeting
	// a new one counts apart instead of failing on a key of another type.
	prefix := "{" + ns + ":w:" + strconv.FormatUint(id.hash(), 16) + "}:"
	return &ruleSpec{
		prefix: prefix,
		slot:   redisconn.Slot(prefix),
		avg:    id.threshold == config.ThresholdAvgLocal,
		argv: [3]any{
			strconv.FormatFloat(id.count, 'g', -1, 64),
			strconv.FormatInt(id.statIntervalMs, 10),
			avg,
		},
	}
}

// specCache maps rule identities to prepared specs. Identities come from
// config, not requests, so it stays small; it is cleared when it reaches
// maxSpecs so that years of reloads cannot grow it.
type specCache struct {
	ns string // the namespace
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
