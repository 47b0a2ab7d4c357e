// Package hotparam limits calls per distinct value of a request parameter
// (Sentinel's ParamFlowRule): each order id, user or client IP gets its own
// token bucket, virtual queue or in-flight counter, and exception values
// (items) get their own thresholds.
//
// It knows nothing of HTTP: the caller turns a request into a Values and
// passes the time as now, nanoseconds on a monotonic timeline of any origin.
// The package never reads the clock.
//
// Memory is bounded: each rule tracks at most maxTrackedValues values in a
// sharded LRU (internal/lru, the one the limiter's origins use) and evicts
// the least recently used value of a shard (exact LRU within a shard,
// approximate across shards; small caps use one shard). A value longer than
// 64 bytes is tracked by its first 48 bytes and a 128-bit digest under the
// rule's own random seeds (an edited rule's are those of the rule whose
// values it carries) rather than by a copy, so a tracked value costs about
// the same memory whatever its length (items still match the exact value). A value that has calls in flight (concurrency) or queued
// (throttle) is never evicted; a new value is blocked rather than tracked
// past the cap only when no tracked value may be evicted. A value that
// returns after being evicted starts afresh, exactly as a value never seen
// before: a full token bucket, an empty queue, no calls in flight. A flood
// of distinct values therefore cannot grow memory, at the cost that a value
// idle long enough to be pushed out forgets its past.
//
// For operators, each tracked value also counts its passes and blocks of
// the last minute (a two-bucket estimate, internal/ring.Coarse, 16 bytes a
// value). Checker.Report lists the values with the most blocks, or peeks
// at given values without taking a token; Checker.Forget lifts a value.
//
// Layer 4 of docs/architecture.md: it imports limiter, config and internal/
// mechanisms; knows nothing of HTTP.
package hotparam
