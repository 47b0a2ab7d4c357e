package rulesource

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/redis/go-redis/v9"
)

// Heartbeats: each gateway writes its Beat every BeatEvery; Fleet lists
// the gateways heard from within BeatTTL.
const (
	BeatEvery = time.Second
	BeatTTL   = 3 * time.Second
	// beatForget drops a gateway's entry once it has been silent this long,
	// so that the fleet's keys stay as small as the fleet.
	beatForget = time.Minute
)

// Beat is what one gateway says of itself. LastSeen is Redis's clock at the
// write (set by Fleet; ignored by Beat).
type Beat struct {
	ID       string    `json:"id"`
	Listen   string    `json:"listen"`
	Version  int64     `json:"version"` // the document version in force
	PassQps  float64   `json:"passQps"`
	BlockQps float64   `json:"blockQps"`
	LastSeen time.Time `json:"lastSeen"`
}

// beatScript records ARGV[1] (id) with ARGV[2] (its JSON) at Redis's time,
// forgets entries silent for ARGV[3] ms, and lets both keys expire with the
// fleet. KEYS: the sorted set of last beats, the hash of their bodies.
const beatScript = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local forget = tonumber(ARGV[3])
local old = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now - forget)
if #old > 0 then
  redis.call('ZREM', KEYS[1], unpack(old))
  redis.call('HDEL', KEYS[2], unpack(old))
end
redis.call('ZADD', KEYS[1], now, ARGV[1])
redis.call('HSET', KEYS[2], ARGV[1], ARGV[2])
redis.call('PEXPIRE', KEYS[1], forget)
redis.call('PEXPIRE', KEYS[2], forget)
return now
`

// fleetScript returns {now, id, ms, body, id, ms, body, ...} for the
// entries newer than ARGV[1] ms.
const fleetScript = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local ids = redis.call('ZRANGEBYSCORE', KEYS[1], now - tonumber(ARGV[1]), '+inf', 'WITHSCORES')
local out = {now}
for i = 1, #ids, 2 do
  out[#out + 1] = ids[i]
  out[#out + 1] = tonumber(ids[i + 1])
  out[#out + 1] = redis.call('HGET', KEYS[2], ids[i]) or ''
end
return out
`

var (
	beatLua  = redis.NewScript(beatScript)
	fleetLua = redis.NewScript(fleetScript)
)

// fleetKeys share the key's hash tag, so one script may touch both on a
// Redis Cluster.
func (s *Store) fleetKeys() []string {
	tag := "{" + s.key + "}"
	return []string{tag + ":fleet:seen", tag + ":fleet:beats"}
}

// Beat records b as b.ID's latest heartbeat.
func (s *Store) Beat(ctx context.Context, b Beat) error {
	b.LastSeen = time.Time{}
	body, err := json.Marshal(b)
	if err != nil {
		return fmt.Errorf("rulesource: heartbeat: %w", err)
	}
	err = beatLua.Run(ctx, s.rdb, s.fleetKeys(), b.ID, body, beatForget.Milliseconds()).Err()
	s.seen(err)
	if err != nil {
		return fmt.Errorf("rulesource: heartbeat: %w", err)
	}
	return nil
}

// Leave removes id from the fleet at once (a gateway shutting down).
func (s *Store) Leave(ctx context.Context, id string) error {
	k := s.fleetKeys()
	_, err := s.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.ZRem(ctx, k[0], id)
		p.HDel(ctx, k[1], id)
		return nil
	})
	s.seen(err)
	if err != nil {
		return fmt.Errorf("rulesource: leaving the fleet: %w", err)
	}
	return nil
}

// Fleet lists the gateways heard from within BeatTTL, by ID, with the time
// of their last beat.
func (s *Store) Fleet(ctx context.Context) ([]Beat, error) {
	res, err := fleetLua.Run(ctx, s.rdb, s.fleetKeys(), BeatTTL.Milliseconds()).Slice()
	s.seen(err)
	if err != nil {
		return nil, fmt.Errorf("rulesource: reading the fleet: %w", err)
	}
	out := []Beat{}
	for i := 1; i+2 < len(res); i += 3 {
		id, _ := res[i].(string)
		ms, _ := res[i+1].(int64)
		body, _ := res[i+2].(string)
		var b Beat
		if json.Unmarshal([]byte(body), &b) != nil {
			b = Beat{} // an entry written by something else: listed by its id only
		}
		b.ID, b.LastSeen = id, time.UnixMilli(ms)
		out = append(out, b)
	}
	slices.SortFunc(out, func(a, b Beat) int {
		switch {
		case a.ID < b.ID:
			return -1
		case a.ID > b.ID:
			return 1
		}
		return 0
	})
	return out, nil
}
