// Package procid names this gateway process among others sharing a Redis:
// hostname-pid-random. The pid alone is not enough: containers on one host
// (or with one hostname) each run the gateway as pid 1, and two such
// gateways took each other's heartbeat in /api/fleet.
package procid

import (
	"crypto/rand"
	"encoding/hex"
	"os"
	"strconv"
)

// New returns a fresh id: the hostname ("gateway" when unknown), the pid
// and 8 random hex digits.
func New() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "gateway"
	}
	var b [4]byte
	_, _ = rand.Read(b[:])
	return host + "-" + strconv.Itoa(os.Getpid()) + "-" + hex.EncodeToString(b[:])
}
