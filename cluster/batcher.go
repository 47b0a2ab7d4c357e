package cluster

import (
	"context"
	"errors"
	"net"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// call is one Acquire waiting for its batch. The batcher fills ok and then
// sends on done (buffered, so it never blocks on a caller that timed out).
type call struct {
	key      string
	spec     *ruleSpec
	slot     int // the key's hash slot (Redis Cluster): calls of one slot share a script run
	n        int64
	op       int64         // opAcquire, opPeek or opCharge
	demand   int64         // tokens per second on this window, to size a lease; 0: no lease
	back     uint64        // a calendar quota's give-back (opGiveBack): its id, by which Redis takes it once
	void     int64         // tokens this gateway did not use (leased, or given back), returned to the window
	voidAt   int64         // their stamp (Redis µs; the earliest of several)
	at       time.Duration // when Acquire began, on the Service's timeline: no later than the script's clock read
	gen      uint64        // the block cache's generation when Acquire began, before Redis decided
	deadline time.Time
	timer    *time.Timer
	ok       bool
	retry    time.Duration // for a block: until the window can take n tokens
	extra    int64         // for a pass: tokens leased besides n
	leaseFor time.Duration // how long they may be used: they are counted as passed then
	stamp    int64         // their stamp in the window (Redis µs), to return them if unused
	own      int64         // for a pass decided in Redis: the stamp of its own n tokens, to give them back
	// A calendar quota's call: when its key expires (Unix ms, boxed), the
	// time until the period's reset (a block's retry), and what the period
	// has left after the call. expireAt is nil for a window's call.
	expireAt any
	reset    time.Duration
	left     int64
	// A window's pass asked with opAcquireLeft or opPeekLeft: left is what
	// the window has left after it and its lease (-1: not asked), leaves
	// how long until the window's oldest pass leaves it.
	leaves time.Duration
	quiet  bool // opAcquireLeft asked for a lease, not by the caller: left is not the caller's
	done   chan error
	// scratch for deciding this call alone, without allocating
	keys [1]string
	args [11]any
}

// What a call asks of its window (the script's op argument).
const (
	opAcquire     int64 = iota // take n tokens if they fit
	opPeek                     // would n tokens fit? take none
	opCharge                   // take n tokens (at most the window) whether or not they fit
	opAcquireLeft              // opAcquire that also says what a pass leaves (the RateLimit fields)
	opPeekLeft                 // opPeek that also says what the window has left
	opGiveBack                 // a calendar quota's: take n back off the period's count (not below 0), once per id (call.back)
)

// ops are the op arguments, boxed once.
var ops = [...]any{opAcquire: "0", opPeek: "1", opCharge: "2", opAcquireLeft: "3", opPeekLeft: "4", opGiveBack: "5"}

// resultsPerCall is how many numbers the acquire script returns per call.
const resultsPerCall = 7

// batcher takes the first waiting call, then every call already queued behind
// it (up to maxBatch), and decides them all in one script run: one round trip.
// It never waits to fill a batch, so a lone call pays no extra latency; under
// load, calls arriving during a round trip form the next batch.
func (s *Service) batcher() {
	defer s.wg.Done()
	batch := make([]*call, 0, maxBatch)
	keys := make([]string, 0, maxBatch)
	args := make([]any, 0, 3+8*maxBatch)
	for {
		select {
		case <-s.quit:
			s.drain()
			return
		case c := <-s.calls:
			batch = append(batch[:0], c)
		}
	fill:
		for len(batch) < maxBatch {
			select {
			case c := <-s.calls:
				batch = append(batch, c)
			default:
				break fill
			}
		}
		s.decide(batch, keys, args)
		clear(batch) // let finished calls go
	}
}

// drain answers calls still queued at Close.
func (s *Service) drain() {
	for {
		select {
		case c := <-s.calls:
			c.done <- ErrClosed
		default:
			return
		}
	}
}

func (s *Service) decide(batch []*call, keys []string, args []any) {
	if !s.up.Load() {
		for _, c := range batch {
			c.done <- ErrUnavailable
		}
		return
	}
	now := time.Now()
	live := batch[:0]
	oneSlot := true
	for _, c := range batch {
		if !now.Before(c.deadline) { // its caller has given up
			c.done <- ErrTimeout
			continue
		}
		live = append(live, c)
		oneSlot = oneSlot && c.slot == live[0].slot
	}
	if len(live) == 0 {
		return
	}
	if s.sharded && !oneSlot {
		s.decideSlots(live)
		return
	}
	keys, args = s.scriptArgs(live, keys, args)
	ctx, cancel := s.callContext()
	// The socket deadlines (Options.Timeout) bound the round trip; callers
	// queued longer than that have their own timers.
	res, err := s.scripts.acquire.Run(ctx, s.rdb, keys, args...).Int64Slice()
	cancel()
	s.answer(live, res, err)
	clear(args) // drop references to keys and specs
	clear(keys)
}

// scriptArgs appends the acquire script's keys and arguments for calls.
func (s *Service) scriptArgs(calls []*call, keys []string, args []any) ([]string, []any) {
	n, at := any(0), any(0)
	if r := s.gateways.Load(); r != nil {
		n, at = r.nArg, r.atArg
	}
	keys = keys[:0]
	args = append(args[:0], n, 0, at)
	var latest time.Duration
	for _, c := range calls {
		keys = append(keys, c.key)
		if c.expireAt != nil {
			// A quota has no lease: its demand's place holds a give-back's
			// id (0 for its other ops).
			args = append(args, c.spec.argv[0], c.n, c.expireAt, c.spec.argv[2], c.back, 0, 0, ops[c.op])
			continue
		}
		args = append(args, c.spec.argv[0], c.n, c.spec.argv[1], c.spec.argv[2], c.demand, c.void, c.voidAt, ops[c.op])
		latest = max(latest, c.at)
	}
	if s.clock != nil {
		// A test's clock: decide at the batch's latest start, as TIME
		// would be no earlier than any of them.
		args[1] = latest.Microseconds()
	}
	return keys, args
}

// callContext bounds a script run on a Redis Cluster, where go-redis may
// follow a redirect or retry another node within one call; elsewhere the
// socket deadlines do, at no allocation.
func (s *Service) callContext() (context.Context, context.CancelFunc) {
	if !s.sharded {
		return context.Background(), func() {}
	}
	return context.WithTimeout(context.Background(), s.opts.Timeout)
}

// decideSlots decides a batch whose windows sit in several hash slots of a
// Redis Cluster: one script run per slot (a script's keys must share one),
// all sent in one pipeline, which go-redis splits by node and sends to the
// nodes at once. A slot whose shard fails fails only its own calls.
func (s *Service) decideSlots(calls []*call) {
	bySlot := map[int][]*call{}
	var slots []int
	for _, c := range calls {
		if _, ok := bySlot[c.slot]; !ok {
			slots = append(slots, c.slot)
		}
		bySlot[c.slot] = append(bySlot[c.slot], c)
	}
	ctx, cancel := s.callContext()
	defer cancel()
	run := func(slots []int, sha bool) []*redis.Cmd {
		pipe := s.rdb.Pipeline()
		cmds := make([]*redis.Cmd, len(slots))
		for i, slot := range slots {
			keys, args := s.scriptArgs(bySlot[slot], nil, nil)
			if sha {
				cmds[i] = s.scripts.acquire.EvalSha(ctx, pipe, keys, args...)
			} else {
				cmds[i] = s.scripts.acquire.Eval(ctx, pipe, keys, args...)
			}
		}
		_, _ = pipe.Exec(ctx) // each command holds its own error
		return cmds
	}
	cmds := run(slots, true)
	// A node that has not seen the script yet (a new or promoted master)
	// says NOSCRIPT: send those again with the script's text.
	var again []int
	for i, cmd := range cmds {
		if err := cmd.Err(); err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") {
			again = append(again, slots[i])
		}
	}
	if len(again) > 0 {
		for i, cmd := range run(again, false) {
			for j, slot := range slots {
				if slot == again[i] {
					cmds[j] = cmd
				}
			}
		}
	}
	for i, slot := range slots {
		res, err := cmds[i].Int64Slice()
		s.answer(bySlot[slot], res, err)
	}
}

// answer hands one script run's results (or error) to its calls and feeds
// the breaker.
func (s *Service) answer(calls []*call, res []int64, err error) {
	if err == nil && len(res) != resultsPerCall*len(calls) {
		err = errors.New("cluster: script returned " + strconv.Itoa(len(res)) + " results for " + strconv.Itoa(len(calls)) + " calls")
	}
	s.report(err, false)
	if err != nil {
		if isTimeout(err) {
			err = ErrTimeout
		} else {
			err = errors.Join(ErrUnavailable, err)
		}
		for _, c := range calls {
			c.done <- err
		}
		return
	}
	for i, c := range calls {
		r := res[resultsPerCall*i : resultsPerCall*(i+1)]
		c.ok = r[0] == 0
		if c.expireAt != nil {
			// A quota: blocked until the reset; r[2] is what is left.
			c.retry, c.left = c.reset, r[2]
			c.done <- nil
			continue
		}
		c.retry = time.Duration(r[0]) * time.Microsecond
		c.extra = r[1]
		c.leaseFor = time.Duration(r[2]) * time.Microsecond
		c.stamp = r[3]
		c.left = r[4]
		c.leaves = time.Duration(r[5]) * time.Microsecond
		c.own = r[6]
		c.done <- nil
	}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.Is(err, context.DeadlineExceeded) || errors.As(err, &ne) && ne.Timeout()
}

func itoa(v int64) string { return strconv.FormatInt(v, 10) }
