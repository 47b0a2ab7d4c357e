// Package limiter is sluice's flow checker: Sentinel's flow rules (qps and
// concurrency grades; reject, warmUp, throttle and warmUpThrottle behaviours;
// direct, relate and chain strategies; limitApp origins) over exact sliding
// windows, plus the per-resource, per-origin and per-entrance statistics the
// admin API shows.
//
// It knows nothing of HTTP and never reads the clock: every operation takes
// now, nanoseconds on a monotonic timeline with any origin. A Flow is built by
// Compile from one config snapshot and is immutable except for its counters;
// a reload compiles a new Flow from the previous one, which carries over the
// state of unchanged rules. There is no package-level state.
//
// Where it differs from Sentinel, on purpose:
//   - A qps window is exact (window.Exact): a call of n tokens passes when
//     the tokens passed in (now-statIntervalMs, now] plus n are at most
//     count, checked and counted under one lock. So no real interval ever
//     passes more than count, at any overload and for concurrent calls
//     (Sentinel: 2 buckets, check-then-add, up to 2x); a client whose calls
//     are statIntervalMs/count apart is never refused; a steady overload
//     passes count per interval. Up to 1024 tokens the window keeps every
//     pass time; above, groups of ceil(count/1024), so it may pass up to one
//     group (under 0.1%) less, never more.
//   - A concurrency rule counts the calls it let through itself (per origin for
//     limitApp origins and other, per entrance for chain), acquired by CAS, not
//     the node's thread count read before an increment.
//   - Warm-up syncs its tokens once per interval on a grid anchored at the
//     first call after it was cold, so its curve does not depend on where
//     on the clock's grid the load starts.
//   - Warm-up refills on or above the warning line only while the previous
//     interval passed fewer than floor(count/coldFactor), so a limiter passing
//     exactly its cold rate still warms up, and one whose tokens rest exactly
//     on the line still cools down when idle (Sentinel never refills tokens
//     that sit exactly on the line), and after a whole interval without a
//     call (with a cold rate under one call floor(count/coldFactor) is 0,
//     and no interval passes fewer).
//     warmUp allows at least min(count, 1) call per interval, so a cold rate
//     under one call (count 2, coldFactor 3) passes one call an interval
//     instead of nothing. Warm-up works per statIntervalMs (1 s by default, as
//     in Sentinel).
//   - Throttle spacing is in nanoseconds (exact at any rate); a queued call
//     whose client leaves (or that a later rule blocks) gives its slot back
//     to every throttle queue it joined: the queue's tail moves back,
//     or, with calls queued behind it, the slot is kept as a hole that the
//     next call fitting it takes (at most 1024 per queue). So clients less
//     patient than maxQueueingTimeMs cannot leave a queue of empty slots that
//     forwards nothing. The spacing is rounded up, so count calls never fit
//     in less than statIntervalMs.
//   - A throttle rule's burstCount is Guava's SmoothBursty: an idle queue
//     stores one permit per spacing, at most burstCount, spent at once
//     before the spacing resumes; no real interval passes more than count +
//     burstCount.
//   - relate rules compare the related resource's last-second pass count
//     (scaled to statIntervalMs) or concurrency with count; controlBehavior
//     does not apply to them.
//   - acquireCount (n tokens a call) and dryRun rules; dryRun rules never set
//     the Verdict's Quota. A dryRun qps rule's state evolves as if it were
//     enforced (a would-be block takes nothing, as nginx's limit_req_dry_run
//     accounts excess requests), so Verdict.DryRun counts exactly the blocks
//     the rule would make; a dryRun concurrency rule counts every call really
//     in flight.
//
// Layer 3 of docs/architecture.md: it imports config, limiter/window and
// internal/ mechanisms; knows nothing of HTTP.
package limiter
