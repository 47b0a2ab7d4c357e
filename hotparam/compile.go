package hotparam

import (
	"errors"
	"fmt"
	"time"

	"sluice/config"
	"sluice/internal/ruleid"
)

// Set is the compiled param rules of one snapshot. It is immutable after
// Compile and safe for concurrent use; the per-value state inside it is
// shared with the next Set for every rule whose definition did not change.
type Set struct {
	rules []config.ParamRule
	ids   ruleid.Index[*rule] // the compiled rules, for the next Compile
	byRes map[string]*Checker
}

// Compile builds the param checkers of one snapshot, carrying over per-value
// state of every rule whose definition (all fields but Line, see
// internal/ruleid) is unchanged in prev (nil at first); identical rules are
// matched in order, so two of them keep two states. The rules must have
// passed config's validation; zero fields take the defaults (grade qps,
// behaviour reject, durationSec 1, maxTrackedValues 100000) for rules built
// by hand. An error (a grade or behaviour this package does not know) is a
// programmer error; Compile then returns a nil Set.
func Compile(rules []config.ParamRule, prev *Set) (*Set, error) {
	var old *ruleid.Index[*rule]
	if prev != nil {
		old = &prev.ids
	}
	s := &Set{
		rules: append([]config.ParamRule(nil), rules...),
		byRes: map[string]*Checker{},
	}
	var errs []error
	for i, pr := range rules {
		k := config.RuleID(pr)
		r, ok := s.ids.Reuse(old, k)
		if !ok {
			var err error
			if r, err = compileRule(pr); err != nil {
				errs = append(errs, fmt.Errorf("hotparam: paramRules[%d] (line %d): %w", i, pr.Line, err))
				continue
			}
		}
		s.ids.Add(k, r)
		c := s.byRes[pr.Resource]
		if c == nil {
			c = &Checker{}
			s.byRes[pr.Resource] = c
		}
		c.rules = append(c.rules, r)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return s, nil
}

// compileRule compiles a rule that config has validated (ranges, duplicate
// items, counts <= config.MaxCount, which keeps a concurrency count within
// an int64). An error means a grade or behaviour this package does not know:
// a programmer error.
func compileRule(pr config.ParamRule) (*rule, error) {
	dur, maxTracked := pr.DurationSec, pr.MaxTrackedValues
	// A rule built in code gets config's defaults for what it left zero.
	if dur == 0 {
		dur = config.DefaultParamDurationSec
	}
	if maxTracked == 0 {
		maxTracked = config.DefaultMaxTrackedValues
	}
	r := &rule{
		resource: pr.Resource,
		src:      pr.Param,
		dryRun:   pr.DryRun,
		window:   time.Duration(dur) * time.Second,
		maxQueue: pr.MaxQueueingTimeMs * int64(time.Millisecond),
	}
	switch pr.Grade {
	case config.GradeQPS, "":
		switch pr.ControlBehavior {
		case config.BehaviorReject, "":
			r.kind = kindBucket
		case config.BehaviorThrottle:
			r.kind = kindQueue
		default:
			return nil, fmt.Errorf("controlBehavior %q is not one of reject, throttle", pr.ControlBehavior)
		}
	case config.GradeConcurrency:
		r.kind = kindInFlight
	default:
		return nil, fmt.Errorf("grade %q is not one of qps, concurrency", pr.Grade)
	}
	r.items = make(map[string]int32, len(pr.Items))
	for j, it := range pr.Items {
		r.items[it.Value] = int32(j + 1)
	}
	window := float64(r.window)
	burst := float64(pr.BurstCount)
	r.params = append(r.params, newParam(pr.Count, window, burst))
	for _, it := range pr.Items {
		r.params = append(r.params, newParam(it.Count, window, burst))
	}
	r.table = newTable(r, maxTracked)
	return r, nil
}

func newParam(count, window, burst float64) param {
	if count == 0 {
		return param{never: true}
	}
	emission := window / count
	// A bucket holds at least one token, so that a count below 1 (0.5 per
	// second) means one call every 1/count windows rather than none.
	capacity := max(count+burst, 1)
	return param{
		count:    count,
		emission: emission,
		tau:      nanos(capacity * emission),
		inFlight: int64(count),
	}
}

// For returns the checker for a resource's param rules (in file order), nil
// if it has none. Call it once per route when building a snapshot.
func (s *Set) For(resource string) *Checker {
	if s == nil {
		return nil
	}
	return s.byRes[resource]
}

// Rules returns the rules the Set was compiled from, as given (defaults are
// not filled in). The caller must not modify the slice.
func (s *Set) Rules() []config.ParamRule {
	if s == nil {
		return nil
	}
	return s.rules
}

// Tracked returns how many values the resource's rules track now, summed
// over its rules (for tests and metrics). It takes every shard lock in turn.
func (s *Set) Tracked(resource string) int {
	c := s.For(resource)
	if c == nil {
		return 0
	}
	n := 0
	for _, r := range c.rules {
		n += r.table.Len()
	}
	return n
}
