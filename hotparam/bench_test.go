package hotparam_test

import (
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"sluice/config"
	"sluice/hotparam"
)

// kinds are the three per-value state machines, with limits high enough that
// benchmarks measure the check, not blocks.
func benchRules() map[string]config.ParamRule {
	qps := seedRule()
	qps.Count = 1e9
	throttle := throttleRule(1e9, 1000)
	conc := inFlightRule()
	conc.Count = 1e9
	failure := lockoutRule(1e9, 1)
	cost := costRule(1e9, 1)
	return map[string]config.ParamRule{"qps": qps, "throttle": throttle, "concurrency": conc, "failure": failure, "cost": cost}
}

// costAnswer is an answer with a figure for costRule, read (Token.Answer)
// by the benchmarks as the proxy reads it.
var costAnswer hotparam.Answer = answer{"X-Tokens-Used": {"50"}}

func TestEnterTrackedValueDoesNotAllocate(t *testing.T) {
	values := map[string]string{
		"short": "12345",
		"long":  strings.Repeat("x", 200), // tracked by its digest
	}
	for name, r := range benchRules() {
		for vname, val := range values {
			t.Run(name+"/"+vname, func(t *testing.T) {
				c := compile(t, r).For("get-order")
				var v hotparam.Values = one(val)
				tok, _ := c.Enter(0, v, 1)
				tok.Exit(0, 200)
				now := int64(0)
				allocs := testing.AllocsPerRun(1000, func() {
					now += 1000
					tok, vd := c.Enter(now, v, 1)
					if vd.Blocked {
						t.Fatal("blocked")
					}
					// A failure (countOn failure) or a figure (countOn
					// responseHeader) is charged after the answer.
					tok.Answer(costAnswer)
					tok.Exit(now, 401)
				})
				if allocs > 0 {
					t.Errorf("Enter+Answer+Exit of a tracked value: %v allocs, want 0", allocs)
				}
			})
		}
	}
}

// BenchmarkEnterTracked is the per-request check (Enter+Exit) of a value
// already tracked, from parallel goroutines spread over distinct values;
// failure and cost (countOn failure, responseHeader) read an answer and
// charge it after (Answer, Exit with a failure status).
func BenchmarkEnterTracked(b *testing.B) {
	for _, name := range []string{"qps", "throttle", "concurrency", "failure", "cost"} {
		for _, distinct := range []int{10, 100000} {
			b.Run(name+"/values="+strconv.Itoa(distinct), func(b *testing.B) {
				c := compile(b, benchRules()[name]).For("get-order")
				// Converted to the interface once, as a request's Values would be.
				keys := make([]hotparam.Values, distinct)
				for i := range keys {
					keys[i] = one("order-" + strconv.Itoa(i))
					tok, _ := c.Enter(0, keys[i], 1)
					tok.Exit(0, 200)
				}
				// Each goroutine keeps its own clock: a shared atomic clock
				// would measure cache-line ping-pong, not the check.
				var worker atomic.Int64
				b.ReportAllocs()
				b.ResetTimer()
				b.RunParallel(func(pb *testing.PB) {
					i := int(worker.Add(1)) * 7919
					now := int64(0)
					for pb.Next() {
						now += 100
						tok, v := c.Enter(now, keys[i%distinct], 1)
						if v.Blocked {
							b.Error("blocked")
						}
						tok.Answer(costAnswer)
						tok.Exit(now, 401)
						i++
					}
				})
			})
		}
	}
}

// BenchmarkMemoryMillionValues pushes 1,000,000 distinct values through one
// qps rule with the default cap (100,000) and reports the live heap after GC
// and the bytes each tracked value costs (entry, map slot, key, LRU links).
func BenchmarkMemoryMillionValues(b *testing.B) {
	const distinct = 1000000
	keys := make([]hotparam.Values, distinct)
	for i := range keys {
		keys[i] = one(strconv.Itoa(100000000 + i)) // 9-byte ids
	}
	r := seedRule()
	r.Items = nil
	var base, after runtime.MemStats
	for range b.N {
		runtime.GC()
		runtime.ReadMemStats(&base)
		s := hotparam.Compile(defaulted(r), nil)
		c := s.For("get-order")
		for i, k := range keys {
			tok, _ := c.Enter(int64(i), k, 1)
			tok.Exit(int64(i), 200)
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		tracked := s.Tracked("get-order")
		if tracked != config.DefaultMaxTrackedValues {
			b.Fatalf("tracked %d, want %d", tracked, config.DefaultMaxTrackedValues)
		}
		heap := float64(after.HeapAlloc) - float64(base.HeapAlloc)
		b.ReportMetric(heap/(1<<20), "heapMB")
		b.ReportMetric(heap/float64(tracked), "B/value")
		b.ReportMetric(float64(tracked), "tracked")
		runtime.KeepAlive(s)
	}
}
