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
// state of unchanged rules.
package limiter
