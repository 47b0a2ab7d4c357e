package cluster

import (
	"context"
	"errors"
	"slices"

	"sluice/config"
	"sluice/internal/redisconn"
)

// Status is what a Service knows of its Redis, for metrics and the admin
// API. It never holds a password.
type Status struct {
	Form  string `json:"form"`  // config.RedisFormSingle, RedisFormSentinel or RedisFormCluster
	Redis string `json:"redis"` // the Redis as configured, passwords masked
	Up    bool   `json:"up"`    // cluster rules are counted in Redis (the breaker is closed)
	// Masters are the master nodes in use, sorted by address: the one
	// master (for Sentinel, the one the newest connection went to; "" before
	// the first), or every shard's master of a Redis Cluster.
	Masters []Master `json:"masters"`
}

// Master is one master node and whether it answered the last heartbeat.
type Master struct {
	Addr string `json:"addr"`
	Up   bool   `json:"up"`
}

func (a Status) equal(b Status) bool {
	return a.Form == b.Form && a.Redis == b.Redis && a.Up == b.Up && slices.Equal(a.Masters, b.Masters)
}

// Status returns the Service's view of its Redis now.
func (s *Service) Status() Status {
	s.statusMu.Lock()
	defer s.statusMu.Unlock()
	return s.statusLocked()
}

func (s *Service) statusLocked() Status {
	st := s.status
	st.Masters = slices.Clone(st.Masters)
	return st
}

// probeMasters is the heartbeat's check of the masters besides the
// namespace's own: a Redis Cluster's every shard must answer, or rules on
// the silent one would fail call after call while the heartbeat, on
// another shard, closed the breaker again. PingMasters reads the slot map
// anew each time, so a shard's promoted replica is found by the next beat.
// Other forms have one master, which the heartbeat itself reached; ms
// lists it.
func (s *Service) probeMasters(ctx context.Context, beatErr error) (ms []redisconn.Master, err error) {
	if s.rdb.Form() != config.RedisFormCluster {
		return s.rdb.Masters(ctx), beatErr
	}
	ms, err = s.rdb.PingMasters(ctx)
	if err == nil && len(ms) == 0 {
		err = errors.New("cluster: the Redis Cluster has no master serving slots yet")
	}
	for _, m := range ms {
		if m.Err != nil && err == nil {
			err = errors.New("cluster: master " + m.Addr + ": " + m.Err.Error())
		}
	}
	return ms, errors.Join(beatErr, err)
}

// noteStatus records the masters found (nil: keep the last ones) and the
// breaker's state, and tells OnStatus when either changed.
func (s *Service) noteStatus(ms []redisconn.Master) {
	s.statusMu.Lock()
	defer s.statusMu.Unlock()
	if ms != nil {
		s.masters = ms
	}
	up := s.up.Load()
	st := Status{Form: s.rdb.Form(), Redis: s.rdb.String(), Up: up, Masters: make([]Master, len(s.masters))}
	for i, m := range s.masters {
		st.Masters[i] = Master{Addr: m.Addr, Up: up}
		if st.Form == config.RedisFormCluster {
			st.Masters[i].Up = m.Err == nil
		}
	}
	if len(st.Masters) == 0 {
		// No master found yet (no Redis Cluster node answered): one unnamed
		// entry, so that a gauge fed by OnStatus shows the state at all.
		st.Masters = []Master{{Up: up}}
	}
	if st.equal(s.status) {
		return
	}
	s.status = st
	if s.opts.OnStatus != nil {
		s.opts.OnStatus(s.statusLocked())
	}
}
