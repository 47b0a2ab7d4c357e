package proxy

import (
	"context"
	"sync"
	"time"
)

// tunnels are the upgraded connections (WebSockets) open through the
// gateway. net/http's Server.Shutdown neither waits for nor closes a
// hijacked connection, so a drain ended every WebSocket as soon as the
// ordinary requests were done (the process exited under them), where nginx
// keeps an upgraded connection until either side closes it or its
// worker_shutdown_timeout. Drain waits for them as for requests, and past
// its deadline ends them.
type tunnels struct {
	mu   sync.Mutex
	open map[*tunnelEnd]struct{}
}

func (ts *tunnels) add(t *tunnelEnd) {
	ts.mu.Lock()
	if ts.open == nil {
		ts.open = make(map[*tunnelEnd]struct{})
	}
	ts.open[t] = struct{}{}
	ts.mu.Unlock()
}

func (ts *tunnels) remove(t *tunnelEnd) {
	ts.mu.Lock()
	delete(ts.open, t)
	ts.mu.Unlock()
}

func (ts *tunnels) count() int {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	return len(ts.open)
}

// tunnelPoll is how often drain looks whether the tunnels have ended: a
// drain waits for people to close their WebSockets, not for microseconds.
const tunnelPoll = 20 * time.Millisecond

// drain waits until no tunnel is open or ctx ends. Then it ends those
// still open, both of their connections, and waits up to settle for their
// calls to end (their slots given back, their access lines written), and
// returns ctx's error.
func (ts *tunnels) drain(ctx context.Context, settle time.Duration) error {
	tick := time.NewTicker(tunnelPoll)
	defer tick.Stop()
	for ts.count() > 0 {
		select {
		case <-ctx.Done():
			ts.mu.Lock()
			for t := range ts.open {
				t.end()
			}
			ts.mu.Unlock()
			for end := time.Now().Add(settle); ts.count() > 0 && time.Now().Before(end); {
				<-tick.C
			}
			return ctx.Err()
		case <-tick.C:
		}
	}
	return nil
}

// DrainTunnels waits, at shutdown, for the WebSockets open through the
// gateway to close, as the server's Shutdown waits for requests in flight;
// when ctx ends first it closes them and returns ctx's error.
func (g *Gateway) DrainTunnels(ctx context.Context) error {
	return g.tunnels.drain(ctx, time.Second)
}
