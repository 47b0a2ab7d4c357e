package proxy

import (
	"net"
	"testing"
	"time"
)

// deadlineConn counts the write (and read) deadlines set on it.
type deadlineConn struct {
	net.Conn
	sets  int
	clear int // of them, zero deadlines
	reads int
}

func (c *deadlineConn) SetReadDeadline(time.Time) error {
	c.reads++
	return nil
}

func (c *deadlineConn) Write(p []byte) (int, error) { return len(p), nil }

func (c *deadlineConn) SetWriteDeadline(t time.Time) error {
	c.sets++
	if t.IsZero() {
		c.clear++
	}
	return nil
}

// TestSendConnKeepsItsDeadlineOverAClear: net/http clears the write
// deadline after every HTTP/1.x response. A connection whose own deadline
// is set keeps it (a clear bounds no write), so a keep-alive connection
// moves its socket's deadline a few times a sendTimeout, not twice a
// response; a deadline someone else sets still replaces ours until the
// next write.
func TestSendConnKeepsItsDeadlineOverAClear(t *testing.T) {
	in := &deadlineConn{}
	c := newSendConn(in, time.Minute)
	for range 100 {
		if _, err := c.Write([]byte("HTTP/1.1 200 OK\r\n\r\n")); err != nil {
			t.Fatal(err)
		}
		if err := c.SetWriteDeadline(time.Time{}); err != nil { // net/http, after the response
			t.Fatal(err)
		}
	}
	if in.sets != 1 || in.clear != 0 {
		t.Fatalf("100 responses set the socket's write deadline %d times (%d of them cleared it), want once, never cleared", in.sets, in.clear)
	}

	// Someone else's deadline (crypto/tls bounding its closing alert) is
	// set, and the next write sets ours again.
	if err := c.SetWriteDeadline(time.Now().Add(5 * time.Second)); err != nil {
		t.Fatal(err)
	}
	if err := c.SetWriteDeadline(time.Time{}); err != nil { // cleared: now it counts
		t.Fatal(err)
	}
	if _, err := c.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	if in.sets != 4 || in.clear != 1 {
		t.Fatalf("after a deadline of another's, a clear and a write: %d sets (%d clears), want 4 (1)", in.sets, in.clear)
	}
}
