//go:build !unix

package proxy

// openFileLimit is unknown here: server.maxConnections has no automatic cap.
func openFileLimit() uint64 { return 0 }
