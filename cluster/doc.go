// Package cluster is sluice's cluster flow control (docs/cluster.md): a token
// service on Redis that counts a clusterMode flow rule across every gateway
// sharing a namespace. It knows nothing of HTTP and does not import
// sluice/limiter; its Service satisfies limiter.TokenService.
//
// # Decisions
//
// Each decision is made atomically by one Lua script in Redis, on Redis's
// clock (TIME), so gateways' clocks never matter. A rule's count is kept in
// an exact sliding window: a call of n tokens passes iff the passes of the
// last statIntervalMs (ending now) plus n are at most K = floor(limit). So no
// real interval of statIntervalMs ever holds more than count passes (the
// first one included), a client whose calls are at least statIntervalMs/count
// apart is never refused, and a steady overload passes exactly count per
// interval.
//
// The window is a Redis string: an 80-byte header and a ring of up to 1024
// slots, each the time of one passed token in insertion order, with times
// never decreasing along the ring; so "does the window hold room for n" is
// one look at the slot n places from the oldest, and a call costs O(1). If
// Redis's clock steps back (a failover to a replica), passes are stamped no
// earlier than the newest one, so they count longer, never shorter; a
// newest stamp further ahead of now than a lease reaches moves every stamp
// back with it, so that a full window waits one interval, not the step.
// Above 1024 tokens a slot stands for a group of g = ceil(K/1024) tokens and
// holds the time of its newest, so it counts until that one leaves: the
// window may count up to g-1 passes that have left (under 0.1%), so it
// passes at most that much less than K and never more, and a client at
// count-(g-1) per interval is never refused. A window takes at most
// 80+8*1024 bytes (8 KB) whatever the count, and expires one interval after
// its newest pass. When an avgLocal window's limit changes, the ring is
// rebuilt with its newest passes, up to the new limit: a dropped pass is
// older than every kept one, so no real interval gets more than the new limit.
//
// Keys are "{namespace:w:<rule hash>}:<origin>". The rule hash is a stable
// FNV-1a of the fields that define the limit (resource, limitApp, grade,
// count, strategy, refResource, statIntervalMs, thresholdType), so equal rules
// on different gateways, or a rule moved to another line, share one window and
// a changed count starts a new one. The hash tag is the rule's: on a Redis
// Cluster all of a rule's windows (one per origin) sit in one slot, and
// different rules spread over the shards, so shards add capacity. A script
// run touches one slot only: on a Redis Cluster a batch is split by slot and
// the runs go out in one pipeline, which go-redis sends to the shards at
// once; a shard that fails fails only its own calls. The gateway set is
// "{namespace}:gw"; the lift counter (ForgetParam), read with it by each
// heartbeat, "{namespace}:lifts".
//
// Only qps rules are counted in the cluster, with reject behaviour (as in
// Sentinel's cluster mode); Acquire returns ErrUnsupported for concurrency
// rules, which the limiter then treats as Redis being unavailable.
//
// # avgLocal
//
// thresholdType avgLocal multiplies count by the live gateways of the
// namespace: Run puts the gateway in a sorted set every Heartbeat with Redis's
// time as score, entries older than 3 heartbeats are dropped, so a dead
// gateway stops counting within about 3s by default, and Close removes the
// gateway at once. The set sits in another slot than the windows on a Redis
// Cluster, so a script cannot read it: each heartbeat (and, while an avgLocal
// rule is in use, a read four times a heartbeat) returns the count with
// Redis's time, the gateway passes that reading with its calls, and a window
// keeps the newest reading it was given. Gateways' readings a beat apart do
// not make the limit flap (each change rebuilds the ring); a gateway that
// joins counts from its first call, one that leaves within a quarter
// heartbeat. The same holds on a single Redis and under Sentinel.
//
// # Round trips
//
// A call made while no other is in flight runs its script itself: one round
// trip. Calls arriving while others are in flight are queued to two batcher
// goroutines; each takes whatever is queued (up to 128 calls) and decides it
// in one script run, so under load a call costs a fraction of a round trip
// and one hot rule's window is read and written once per batch. Batchers never
// wait to fill a batch: a queued call waits at most for a batcher's current
// round trip, and in the benchmarks batched calls are faster at p50 and p99
// than one EVALSHA per call.
//
// A window far from its count is served mostly from leases: a call that
// goes to Redis also states this gateway's recent demand on the window (tokens
// per second), and when that demand would fill at most half of K in an
// interval and the window stays at most half full, the script counts demand
// x L extra tokens for the gateway, which calls take locally, in about 200ns
// without allocating, for L. L is statIntervalMs/40 at most, and at most as
// long as K/2048 tokens take at that demand or at the window's rate (over the
// interval and over its last 64th), so a lease is at most K/2048 tokens: only
// windows of 2048 tokens or more lease, and a never-blocking rule costs about
// 40 round trips per interval per gateway. Leased tokens are stamped with the
// last instant they may be used, so the window keeps each at least an
// interval after its use and the bound holds; passes decided meanwhile are
// stamped no earlier (times along the ring never decrease), so at most L
// late. A leased token left unused is returned by the gateway with its next
// call on the window, once, and the script removes one of the window's newest
// slots stamped no later than it. So while leases are out the window holds
// back from clients about K/2048 tokens per leasing gateway (leased, not yet
// used) and K/2048 more (passes counted late) while the rate holds:
// clients that together stay that much under the count are never refused,
// and a client at exactly the count never gets a lease. Near the count
// every pass is decided in Redis.
//
// When the cluster refuses a call the script also says when the window can
// take its tokens (when the slot in the way leaves), and until then calls
// on that window asking as many tokens or more are refused locally, in
// about 250ns without allocating. Under overload Redis sees about one
// refused call per freed slot from each gateway; the total stays exact,
// since this only ever refuses what Redis would refuse (bar an avgLocal
// gateway joining meanwhile).
//
// # Failures
//
// Every call gives up after Options.Timeout (20ms by default, Envoy
// ratelimit's default) and returns an error, so the limiter can fall back. After
// 3 consecutive failed round trips the breaker opens: Acquire returns
// ErrUnavailable at once without touching Redis, and Run probes Redis with
// its heartbeat, backing off from 50ms to 1s, until it answers. Each change
// of state is logged once and reported once through Options.OnState. Each
// call left undecided, open breaker or not, is reported with its Cause
// through Options.OnUnanswered (sluice_cluster_unanswered_total).
//
// The Redis may fail over under the Service (internal/redisconn builds the
// client for each form). Under Sentinel, calls fail while no master answers
// (the breaker opens: rules fall back) and go-redis asks the Sentinels for
// the master on each new connection, so the first probe that reaches the
// promoted replica closes the breaker. On a Redis Cluster the heartbeat
// reads the slot map anew and pings every shard's master, and it succeeds
// only when all answer, so a shard's promoted replica is found by the next
// probe and the breaker does not close on a half-dead cluster; MOVED and ASK
// are followed by go-redis within a call. Status and OnStatus name the form
// and the masters in use, for the sluice_cluster_redis_up gauge.
//
// go-redis logs failed dials through its own process-wide logger
// (redis.SetLogger); main decides where that goes.
//
// Layer 4 of docs/architecture.md: it imports config and internal/redisconn;
// no guard and nothing of HTTP.
package cluster
