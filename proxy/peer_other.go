//go:build !linux

package proxy

import "syscall"

// peerClosed cannot tell without TCP_INFO: a queued request with an unread
// body then waits out its turn (docs/rules.md, throttle).
func peerClosed(syscall.RawConn) bool { return false }
