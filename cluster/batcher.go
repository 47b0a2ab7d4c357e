package cluster

import (
	"context"
	"errors"
	"net"
	"strconv"
	"time"
)

// call is one Acquire waiting for its batch. The batcher fills ok and then
// sends on done (buffered, so it never blocks on a caller that timed out).
type call struct {
	key      string
	spec     *ruleSpec
	n        int64
	demand   int64         // tokens per second on this window, to size a lease; 0: no lease
	void     int64         // leased tokens this gateway did not use, returned to the window
	voidAt   int64         // the stamp they were leased with (Redis µs)
	at       time.Duration // when Acquire began, on the Service's timeline: no later than the script's clock read
	deadline time.Time
	timer    *time.Timer
	ok       bool
	retry    time.Duration // for a block: until the window can take n tokens
	extra    int64         // for a pass: tokens leased besides n
	leaseFor time.Duration // how long they may be used: they are counted as passed then
	stamp    int64         // their stamp in the window (Redis µs), to return them if unused
	done     chan error
	// scratch for deciding this call alone, without allocating
	keys [2]string
	args [9]any
}

// batcher takes the first waiting call, then every call already queued behind
// it (up to maxBatch), and decides them all in one script run: one round trip.
// It never waits to fill a batch, so a lone call pays no extra latency; under
// load, calls arriving during a round trip form the next batch.
func (s *Service) batcher() {
	defer s.wg.Done()
	batch := make([]*call, 0, maxBatch)
	keys := make([]string, 0, maxBatch+1)
	args := make([]any, 0, 2+7*maxBatch)
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
	keys = append(keys[:0], s.gwKey)
	args = append(args[:0], s.expiry, 0)
	live := batch[:0]
	var latest time.Duration
	for _, c := range batch {
		if !now.Before(c.deadline) { // its caller has given up
			c.done <- ErrTimeout
			continue
		}
		keys = append(keys, c.key)
		args = append(args, c.spec.argv[0], c.n, c.spec.argv[1], c.spec.argv[2], c.demand, c.void, c.voidAt)
		live = append(live, c)
		latest = max(latest, c.at)
	}
	if len(live) == 0 {
		return
	}
	if s.clock != nil {
		// A test's clock: decide at the batch's latest start, as TIME
		// would be no earlier than any of them.
		args[1] = latest.Microseconds()
	}
	// The socket deadlines (Options.Timeout) bound the round trip; callers
	// queued longer than that have their own timers.
	res, err := s.scripts.acquire.Run(context.Background(), s.rdb, keys, args...).Int64Slice()
	if err == nil && len(res) != 4*len(live) {
		err = errors.New("cluster: script returned " + strconv.Itoa(len(res)) + " results for " + strconv.Itoa(len(live)) + " calls")
	}
	s.report(err, false)
	if err != nil {
		if isTimeout(err) {
			err = ErrTimeout
		} else {
			err = errors.Join(ErrUnavailable, err)
		}
		for _, c := range live {
			c.done <- err
		}
		return
	}
	for i, c := range live {
		r := res[4*i : 4*i+4]
		c.ok = r[0] == 0
		c.retry = time.Duration(r[0]) * time.Microsecond
		c.extra = r[1]
		c.leaseFor = time.Duration(r[2]) * time.Microsecond
		c.stamp = r[3]
		c.done <- nil
	}
	clear(args) // drop references to keys and specs
	clear(keys)
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.Is(err, context.DeadlineExceeded) || errors.As(err, &ne) && ne.Timeout()
}

func itoa(v int64) string { return strconv.FormatInt(v, 10) }
