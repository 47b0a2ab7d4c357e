package proxy_test

import (
	"errors"
	"io"
	"net"
	"os"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"sluice/config"
	"sluice/proxy"
)

// smallBuffers keeps the accepted connections' send buffers small, so that
// a write waits for the client as soon as it stops reading.
type smallBuffers struct{ net.Listener }

func (l smallBuffers) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetWriteBuffer(4 << 10)
	}
	return c, err
}

// TestListenerSendTimeout: on a connection from Gateway.Listener, a write
// that the client takes nothing of for sendTimeout fails with a timeout,
// while a client that keeps reading gets a write that takes far longer
// than sendTimeout in all (nginx's send_timeout, not a whole-response
// deadline).
func TestListenerSendTimeout(t *testing.T) {
	const timeout = 500 * time.Millisecond
	cfg, err := config.Parse("rules.yaml", []byte(`server: { sendTimeout: 500ms }
upstreams: { up: { targets: ["http://127.0.0.1:1"] } }
routes: [{ path: /, upstream: up }]
`))
	if err != nil {
		t.Fatal(err)
	}
	g := proxy.New(proxy.Deps{Log: zerolog.Nop()})
	if err := g.Load(cfg); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		size int
		// read is how the client reads: nil, not at all.
		read func(c net.Conn)
		// cleared: a first write, then the deadlines cleared as net/http
		// does when it hands over (hijacks) the connection.
		cleared bool
		cut     bool
	}{
		{name: "a client that stops reading is cut", size: 64 << 20, cut: true},
		{name: "a hijacked connection too", size: 64 << 20, cleared: true, cut: true},
		{name: "a client that keeps reading is not", size: 1 << 20, read: func(c net.Conn) {
			// 8 KiB every 10 ms: a 32 KiB piece in 40 ms, the whole
			// MiB in over a second.
			buf := make([]byte, 8<<10)
			tick := time.NewTicker(10 * time.Millisecond)
			defer tick.Stop()
			for range tick.C {
				if _, err := io.ReadFull(c, buf); err != nil {
					return
				}
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			raw, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			ln := g.Listener(smallBuffers{raw})
			defer ln.Close()
			client, err := net.Dial("tcp", raw.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			defer client.Close()
			if tt.read != nil {
				go tt.read(client)
			}
			srv, err := ln.Accept()
			if err != nil {
				t.Fatal(err)
			}
			defer srv.Close()
			if tt.cleared {
				if _, err := srv.Write([]byte("x")); err != nil {
					t.Fatal(err)
				}
				_ = srv.SetDeadline(time.Time{})
			}
			type result struct {
				n   int
				err error
			}
			done := make(chan result, 1)
			start := time.Now()
			go func() {
				n, err := srv.Write(make([]byte, tt.size))
				done <- result{n, err}
			}()
			var res result
			select {
			case res = <-done:
			case <-time.After(10 * time.Second):
				t.Fatal("the write still waits after 10s")
			}
			n, err, took := res.n, res.err, time.Since(start)
			if !tt.cut {
				if err != nil || n != tt.size {
					t.Fatalf("wrote %d of %d bytes in %v: %v; a reading client must not be cut", n, tt.size, took, err)
				}
				if took < 2*timeout {
					t.Errorf("the write took %v; the test needs it to outlast sendTimeout (%v) twice", took, timeout)
				}
				return
			}
			if !errors.Is(err, os.ErrDeadlineExceeded) || n >= tt.size {
				t.Fatalf("wrote %d of %d bytes: %v, want a timeout", n, tt.size, err)
			}
			if took < timeout || took > timeout+time.Second {
				t.Errorf("cut after %v, want about sendTimeout (%v)", took, timeout)
			}
		})
	}
}
