package proxy

import (
	"crypto/tls"
	"io"
	"syscall"
	"testing"
	"time"

	"sluice/internal/heldconn"
	"sluice/internal/testcert"
)

// TestTLSHoldsWhatTheSocketPeekCannotSee: two records an upstream writes
// in one segment are read from the socket at once; the client's tls.Conn
// hands over the first and keeps the second, where the socket peek finds
// nothing. closedByPeer sees it (tlsHolds), and a close_notify kept the
// same way. On a quiet connection it sees nothing, and the connection
// still carries an exchange (the look, a read past its deadline, did not
// spoil it), with the read deadline the socket had.
func TestTLSHoldsWhatTheSocketPeekCannotSee(t *testing.T) {
	ca := testcert.NewCA(t, "tlsHolds CA")
	leaf := ca.Server(t, time.Now().Add(time.Hour), "127.0.0.1")
	raw, peerRaw := tcpPair(t)
	held := &heldconn.Conn{Conn: peerRaw}
	peer := tls.Server(held, &tls.Config{Certificates: []tls.Certificate{leaf.TLS}})
	client := tls.Client(raw, &tls.Config{RootCAs: ca.Pool(), ServerName: "127.0.0.1"})
	errc := make(chan error, 1)
	go func() { errc <- peer.Handshake() }()
	if err := client.Handshake(); err != nil {
		t.Fatal(err)
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	pc := newProbedConn(client, raw, new(closeWatch)).(*probedConn)
	if err := pc.SetReadDeadline(time.Now().Add(time.Minute)); err != nil {
		t.Fatal(err)
	}

	buf := make([]byte, 64)
	read := func(want string) {
		t.Helper()
		if n, err := pc.Read(buf[:len(want)]); string(buf[:n]) != want || (err != nil && err != io.EOF) {
			t.Fatalf("read %q %v, want %q", buf[:n], err, want)
		}
		// The session tickets, if any, and the records came in more
		// than one segment: the socket is empty once the read took all.
		for end := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
			var peek [1]byte
			empty := false
			_ = pc.raw.Control(func(fd uintptr) {
				_, _, err := syscall.Recvfrom(int(fd), peek[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
				empty = err == syscall.EAGAIN
			})
			if empty {
				return
			}
			if time.Now().After(end) {
				t.Fatalf("the socket still held bytes after %q was read", want)
			}
		}
	}
	write := func(records ...string) {
		t.Helper()
		held.Hold()
		for _, r := range records {
			if _, err := peer.Write([]byte(r)); err != nil {
				t.Fatal(err)
			}
		}
		if err := held.Send(); err != nil {
			t.Fatal(err)
		}
	}

	// An answer alone: nothing kept, and the look spoils nothing.
	write("answer")
	read("answer")
	if pc.closedByPeer() {
		t.Fatal("closedByPeer on a quiet connection: true, want false")
	}
	// A read that waits for its answer, as the socket's read deadline
	// (a minute away, not the look's) lets it.
	go func() {
		time.Sleep(20 * time.Millisecond)
		_, err := peer.Write([]byte("next"))
		errc <- err
	}()
	read("next")
	if err := <-errc; err != nil {
		t.Fatal(err)
	}

	// An answer and a stray record, in one segment.
	write("answer", "stray")
	read("answer")
	if !pc.closedByPeer() {
		t.Fatal("closedByPeer with a stray record kept in the TLS connection: false, want true")
	}
	read("tray") // what the look did not take

	// An answer and a close_notify, in one segment.
	held.Hold()
	if _, err := peer.Write([]byte("last")); err != nil {
		t.Fatal(err)
	}
	_ = peer.CloseWrite()
	// CloseWrite leaves the socket a write deadline that has passed, the
	// close_notify being written (held) by then.
	_ = peerRaw.SetWriteDeadline(time.Time{})
	if err := held.Send(); err != nil {
		t.Fatal(err)
	}
	read("last")
	if !pc.closedByPeer() {
		t.Error("closedByPeer after the upstream's close_notify: false, want true")
	}
}
