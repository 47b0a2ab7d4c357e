package proxy_test

import (
	"fmt"
	"net"
	"strings"
	"syscall"
	"testing"
	"time"
)

// hangingTarget is an address whose connects hang: a listener with a
// backlog of 0 that never accepts, its queue filled, so the kernel drops
// new SYNs (an overloaded login backend).
func hangingTarget(t *testing.T) string {
	t.Helper()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Close(fd) })
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Listen(fd, 0); err != nil {
		t.Fatal(err)
	}
	sa, _ := syscall.Getsockname(fd)
	addr := fmt.Sprintf("127.0.0.1:%d", sa.(*syscall.SockaddrInet4).Port)
	for range 16 {
		c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
		if err != nil {
			return addr // this one hung: the queue is full
		}
		t.Cleanup(func() { c.Close() })
	}
	t.Skip("could not fill the listener's queue: connects do not hang here")
	return ""
}

// TestFailureKeepsNothingOfAGuessStuckInADial: a client that gives up
// while the gateway is still connecting to the upstream sent no guess:
// its tokens are given back, on both forwarders, where a client that
// hangs up on a guess the upstream got is charged
// (TestFailureCountsAGuessItsClientHungUpOn). Before, two impatient
// logins against an overloaded backend locked an address out for the
// rule's duration.
func TestFailureKeepsNothingOfAGuessStuckInADial(t *testing.T) {
	target := hangingTarget(t)
	for _, fwd := range []string{"standard", "fast"} {
		t.Run(fwd, func(t *testing.T) {
			srv, g, settled := lockoutGateway(t, "http://"+target, "    connectTimeout: 1s", fwd, "login")
			// The clients hang up 200 ms in, as curl --max-time does: a
			// GET's leaving is seen at once (net/http reads a connection
			// whose request has no body left) and cancels the dial; a
			// POST's body, still unread, hides it until the dial fails.
			for _, raw := range []string{ // the count: both hold a token while in flight
				"GET /login HTTP/1.1\r\nHost: gw\r\nX-Key: k\r\n\r\n",
				"POST /login HTTP/1.1\r\nHost: gw\r\nX-Key: k\r\nContent-Length: 5\r\n\r\nguess",
			} {
				c, err := net.Dial("tcp", strings.TrimPrefix(srv.URL, "http://"))
				if err != nil {
					t.Fatal(err)
				}
				if _, err := c.Write([]byte(raw)); err != nil {
					t.Fatal(err)
				}
				c.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
				if n, _ := c.Read(make([]byte, 1)); n > 0 {
					t.Fatal("answered; want the client to give up during the dial")
				}
				c.Close()
			}
			settled()
			st := g.Current().Params.For("login").Report(g.Now(), []string{"k"}, 0)[0].Values[0]
			if st.Remaining != 2 {
				t.Errorf("after 2 clients gave up during the dial: %v tokens left, want 2 (none charged)", st.Remaining)
			}
		})
	}
}
