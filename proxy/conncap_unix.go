//go:build unix

package proxy

import "syscall"

// openFileLimit is the process's soft RLIMIT_NOFILE (Go raises it to the
// hard limit at start), or 0 when it cannot be read or is unlimited.
func openFileLimit() uint64 {
	var l syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l); err != nil {
		return 0
	}
	// Cur is int64 on some systems: RLIM_INFINITY is then negative, and
	// past any cap autoMaxConnections would take.
	if c := uint64(l.Cur); c != ^uint64(0) && int64(c) > 0 {
		return c
	}
	return 0
}
