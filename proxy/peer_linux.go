package proxy

import (
	"syscall"

	"golang.org/x/sys/unix"
)

// peerClosed reports whether the client has closed its side of the
// connection (a FIN: CLOSE_WAIT; a reset: CLOSE), whatever is still unread
// in the socket, which a MSG_PEEK would return instead of the EOF.
func peerClosed(raw syscall.RawConn) bool {
	closed := false
	_ = raw.Control(func(fd uintptr) {
		info, err := unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO)
		closed = err == nil && (info.State == tcpCloseWait || info.State == tcpClose)
	})
	return closed
}

// The kernel's TCP states (include/net/tcp_states.h).
const (
	tcpClose     = 7
	tcpCloseWait = 8
)
