package match

import "strings"

// Host is the host source's value of a Host header (or a URL's host): without
// port or IPv6 brackets, without a trailing dot, lower-cased, so that
// SHOP.example.:8080 and shop.example are one value. It allocates only to
// lower-case. The gateway reads the source with it and validation holds
// host items to it, so the two agree.
func Host(hostport string) string {
	h := strings.TrimSuffix(HostOnly(hostport), ".")
	for i := 0; i < len(h); i++ {
		if c := h[i]; 'A' <= c && c <= 'Z' {
			return strings.ToLower(h)
		}
	}
	return h
}

// HostOnly strips a port and IPv6 brackets from hostport without
// allocating; a bare IPv6 address (more than one colon) is left whole.
func HostOnly(hostport string) string {
	if strings.HasPrefix(hostport, "[") {
		if i := strings.IndexByte(hostport, ']'); i > 0 {
			return hostport[1:i]
		}
		return hostport
	}
	if i := strings.LastIndexByte(hostport, ':'); i >= 0 && strings.IndexByte(hostport, ':') == i {
		return hostport[:i]
	}
	return hostport
}
