package proxy

import (
	"errors"
	"net"
	"testing"
	"time"
)

// TestProbeOnlyWhenItCanMatter: a pooled connection the target closed is
// peeked at (and refused with errStaleConn, nothing written) when it was
// idle for idleProbe or another connection to the target was found closed
// since its last request; one reused sooner is not peeked at, and its
// request is written, as any request under load is.
func TestProbeOnlyWhenItCanMatter(t *testing.T) {
	for _, c := range []struct {
		name      string
		idle      time.Duration
		otherSeen bool          // another connection to the target was found closed
		learned   time.Duration // a close the target taught after this idleness
		want      error
	}{
		{"reused within idleProbe", 500 * time.Millisecond, false, 0, nil},
		{"idle for idleProbe", idleProbe, false, 0, errStaleConn},
		{"another connection found closed", time.Millisecond, true, 0, errStaleConn},
		{"idle for learnedProbe once a close was met", learnedProbe, false, 600 * time.Millisecond, errStaleConn},
		{"idle 150 ms once a close was met after 900", 150 * time.Millisecond, false, 900 * time.Millisecond, errStaleConn},
		{"reused within learnedProbe once a close was met", learnedProbe - 5*time.Millisecond, false, 600 * time.Millisecond, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			raw, peer := tcpPair(t)
			w := new(closeWatch)
			pc := newProbedConn(raw, raw, w).(*probedConn)
			// One exchange, then the target closes the idle connection.
			if _, err := pc.Write([]byte("q")); err != nil {
				t.Fatal(err)
			}
			buf := make([]byte, 1)
			if _, err := peer.Read(buf); err != nil {
				t.Fatal(err)
			}
			if _, err := peer.Write([]byte("a")); err != nil {
				t.Fatal(err)
			}
			if _, err := pc.Read(buf); err != nil {
				t.Fatal(err)
			}
			peer.Close()
			for deadline := time.Now().Add(5 * time.Second); !pc.closedByPeer(); {
				if time.Now().After(deadline) {
					t.Fatal("the close never reached the connection")
				}
				time.Sleep(time.Millisecond)
			}
			pc.written = time.Now().Add(-c.idle)
			// The previous request's read deadline has passed, as it has
			// on a connection idle longer than the route's timeout.
			if err := raw.SetReadDeadline(time.Now().Add(-time.Second)); err != nil {
				t.Fatal(err)
			}
			if c.otherSeen {
				w.closed.Add(1)
			}
			w.learn(c.learned)
			if _, err := pc.Write([]byte("q")); !errors.Is(err, c.want) {
				t.Errorf("write after %v idle: %v, want %v", c.idle, err, c.want)
			}
		})
	}
}

// TestBodilessStatus: 1xx, 204 and 304 answers have no body by protocol;
// any other status, or bytes that are no status line, do.
func TestBodilessStatus(t *testing.T) {
	for line, want := range map[string]bool{
		"HTTP/1.1 204 No Content\r\n": true, "HTTP/1.1 304 Not Modified\r\n": true, "HTTP/1.1 103 Early Hints\r\n": true,
		"HTTP/1.0 100 Continue\r\n": true, "HTTP/1.1 200 OK\r\n": false, "HTTP/1.1 404 Not Found\r\n": false,
		"HTTP/1.1 214 x\r\n": false, "HTTP/1.1 305 x\r\n": false, "HTTP/2.0 204 x\r\n": false, "HTTP/1.1 20": false,
	} {
		if got := bodilessStatus([]byte(line)); got != want {
			t.Errorf("bodilessStatus(%q) = %v, want %v", line, got, want)
		}
	}
}

// TestCoarseDeadlineBoundsEveryExchange: whatever the timeout, the gap
// between requests and a timeout changed by a reload, the socket's
// deadline is never before the one asked for (a route timeout never ends
// early) nor more than 1/32 of the time left after it, and a connection
// reused faster than that keeps its deadline.
func TestCoarseDeadlineBoundsEveryExchange(t *testing.T) {
	base := time.Now()
	for _, timeout := range []time.Duration{time.Millisecond, 50 * time.Millisecond, time.Second, 10 * time.Second, time.Hour} {
		for _, gap := range []time.Duration{0, time.Microsecond, timeout / 100, timeout / 31, timeout / 8, 2 * timeout} {
			var cur time.Time
			sets := 0
			const n = 1000
			for i := range n {
				now := base.Add(time.Duration(i) * gap)
				to := timeout
				if i == n/2 {
					to = timeout / 10 // a reload shortens it once
				}
				want := now.Add(to)
				set, keep := coarseDeadline(cur, want, now)
				if !keep {
					cur = set
					sets++
				} else if !set.Equal(cur) {
					t.Fatalf("timeout %v, gap %v: kept %v but returned %v", timeout, gap, cur, set)
				}
				if late := cur.Sub(want); late < 0 || late > to/32 {
					t.Fatalf("timeout %v, gap %v, request %d: deadline %v after the one asked for, want within [0, %v]", timeout, gap, i, late, to/32)
				}
			}
			// Reused within a 32nd of the timeout, the deadline moves about
			// once per such span (and once more for the reload).
			if gap > 0 && gap <= timeout/100 {
				span := time.Duration(n) * gap
				if most := int(span/(timeout/32)) + 3; sets > most {
					t.Errorf("timeout %v, gap %v: %d deadlines set over %d requests, want at most %d", timeout, gap, sets, n, most)
				}
			}
		}
	}
	// No deadline asked for: none is set, and one set is cleared.
	if _, keep := coarseDeadline(time.Time{}, time.Time{}, base); !keep {
		t.Error("no deadline on a socket without one: set one anew")
	}
	if set, keep := coarseDeadline(base, time.Time{}, base); keep || !set.IsZero() {
		t.Errorf("no deadline on a socket with one: (%v, keep %v), want it cleared", set, keep)
	}
}

// TestUpstreamConnMovesItsDeadlinesRarely: fasthttp asks for both
// deadlines at every request; a connection reused a thousand times within
// a 32nd of a 10 s timeout sets each on its socket once.
func TestUpstreamConnMovesItsDeadlinesRarely(t *testing.T) {
	in := &deadlineConn{}
	pc := &probedConn{Conn: in}
	for range 1000 {
		d := time.Now().Add(10 * time.Second)
		if err := pc.SetWriteDeadline(d); err != nil {
			t.Fatal(err)
		}
		if err := pc.SetReadDeadline(d); err != nil {
			t.Fatal(err)
		}
	}
	if in.sets != 1 || in.reads != 1 {
		t.Fatalf("1,000 requests set the write deadline %d times and the read deadline %d times, want once each", in.sets, in.reads)
	}
}

// TestCloseWatchLearnsKeepAlive: a close met after keepAliveMin of
// idleness or more (but within idleProbe, where the probe looked) drops the
// probe threshold to learnedProbe, whatever the idleness, since it says
// only that the keep-alive is shorter; a close sooner (a crash) teaches
// nothing.
func TestCloseWatchLearnsKeepAlive(t *testing.T) {
	ms := time.Millisecond
	for _, c := range []struct {
		name  string
		idles []time.Duration
		want  time.Duration
	}{
		{"nothing learned", nil, idleProbe},
		{"a 600 ms idle close", []time.Duration{600 * ms}, learnedProbe},
		{"a 900 ms idle close", []time.Duration{900 * ms}, learnedProbe},
		{"a close at keepAliveMin", []time.Duration{keepAliveMin}, learnedProbe},
		{"a longer one keeps it", []time.Duration{200 * ms, 600 * ms}, learnedProbe},
		{"a crash after 10 ms teaches nothing", []time.Duration{10 * ms}, idleProbe},
		{"just under keepAliveMin teaches nothing", []time.Duration{keepAliveMin - ms}, idleProbe},
		{"past idleProbe (the probe looked) teaches nothing", []time.Duration{idleProbe, 5 * idleProbe}, idleProbe},
	} {
		t.Run(c.name, func(t *testing.T) {
			w := new(closeWatch)
			for _, d := range c.idles {
				w.learn(d)
			}
			if got := w.threshold(); got != c.want {
				t.Errorf("threshold after closes at %v: %v, want %v", c.idles, got, c.want)
			}
		})
	}
}

// tcpPair is a TCP connection on loopback: the gateway's end and the
// upstream's, both closed when the test ends.
func tcpPair(t *testing.T) (gw, upstream net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	gw, err = net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { gw.Close() })
	upstream, err = ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { upstream.Close() })
	return gw, upstream
}
