// Package cluster is sluice's cluster flow control (docs/cluster.md): a token service
// on Redis that counts a clusterMode flow rule across every gateway sharing a
// namespace. It knows nothing of HTTP and does not import sluice/limiter; its
// Service satisfies limiter.TokenService.
//
// # Decisions
//
// Each decision is made atomically by one Lua script in Redis, on Redis's
// clock (TIME), so gateways' clocks never matter. A rule's count is kept in a
// bucketed sliding window: statIntervalMs is cut into at most 40 buckets, and
// a pass is remembered until its whole bucket has left the interval. So no
// real interval of statIntervalMs ever holds more than count passes (the
// first one included); under a steady overload the rate is count*40/41 per
// interval. The window is a Redis hash holding one field per bucket plus a
// running total, and expires shortly after its last pass.
//
// Keys are "{namespace}:f:<rule hash>:<origin>". The rule hash is a stable
// FNV-1a of the fields that define the limit (resource, limitApp, grade,
// count, strategy, refResource, statIntervalMs, thresholdType), so equal rules
// on different gateways, or a rule moved to another line, share one window and
// a changed count starts a new one. The {namespace} hash tag keeps all of a
// namespace in one Redis Cluster slot.
//
// Only qps rules are counted in the cluster, with reject behaviour (as in
// Sentinel's cluster mode); Acquire returns ErrUnsupported for concurrency
// rules, which the limiter then treats as Redis being unavailable.
//
// # avgLocal
//
// thresholdType avgLocal multiplies count by the live gateways of the
// namespace: Run puts the gateway in a sorted set every Heartbeat with Redis's
// time as score, and the script drops entries older than 3 heartbeats, so a
// dead gateway stops counting within about 3s by default. Close removes the
// gateway at once.
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
// goes to Redis also states this gateway's recent demand on the window, and
// while the window stays at most half full the script counts extra tokens
// for the gateway in the current bucket (about the demand until the bucket
// ends, at most count/buckets), which calls take locally, in about 200ns
// without allocating, until the bucket ends. Every leased token is counted in
// the bucket in which it is used, so the window's bound holds; an unused one
// is lost, which can only pass less (if demand rises to the count within the
// same interval, by at most the unused part of leases taken while the window
// was half empty). Near the count every pass is decided in Redis.
//
// A window frees tokens only at its bucket boundaries (on Redis's clock), so
// when the cluster refuses a call the script also says how long until the
// next boundary, and until then calls on that window asking as many tokens
// or more are refused locally, in about 250ns without allocating. Under
// overload Redis sees about one call per window per bucket from each gateway
// for the blocked traffic; the total stays exact, since this only ever
// refuses what Redis would refuse (bar an avgLocal gateway joining within
// that bucket).
//
// # Failures
//
// Every call gives up after Options.Timeout (20ms by default, Envoy
// ratelimit's default) and returns an error, so the limiter can fall back. After
// 3 consecutive failed round trips the breaker opens: Acquire returns
// ErrUnavailable at once without touching Redis, and Run probes Redis with
// its heartbeat, backing off from 50ms to 1s, until it answers. Each change
// of state is logged once and reported once through Options.OnState.
//
// go-redis logs failed dials through its own process-wide logger
// (redis.SetLogger); main decides where that goes.
package cluster
