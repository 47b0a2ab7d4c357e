package match

import (
	"net/netip"
	"strings"
)

// Host is the host source's value of a Host header (or a URL's host): without
// port or IPv6 brackets, without a trailing dot, lower-cased, so that
// SHOP.example.:8080 and shop.example are one value. It allocates only to
// lower-case. The gateway reads the source with it and validation holds
// host items to it, so the two agree.
func Host(hostport string) string {
	return lowerASCII(strings.TrimSuffix(HostOnly(hostport), "."))
}

// lowerASCII is s lower-cased, allocating only when s holds an upper-case
// ASCII letter (hosts and auth-schemes are ASCII where they matter).
func lowerASCII(s string) string {
	for i := 0; i < len(s); i++ {
		if c := s[i]; 'A' <= c && c <= 'Z' {
			return strings.ToLower(s)
		}
	}
	return s
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

// hostByte marks the bytes of a Host sluice serves: a DNS name's letters,
// digits, '-', '.' and '_' (some private names hold one), a port's ':',
// and an IPv6 literal's brackets and hex digits ('%' for its zone, %25,
// within the brackets only).
var hostByte = func() (t [256]bool) {
	for c := 0; c < 256; c++ {
		t[c] = nameByte[c] || c == ':' || c == '[' || c == ']' || c == '%'
	}
	return t
}()

// nameByte marks the bytes of a Host's name outside brackets.
var nameByte = func() (t [256]bool) {
	for c := 0; c < 256; c++ {
		t[c] = 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' ||
			c == '-' || c == '.' || c == '_'
	}
	return t
}()

// maxHostName is the longest DNS name (RFC 1035 2.3.4, in text form).
const maxHostName = 253

// PlainHost reports whether host is a uri-host[:port] sluice serves: a
// name of nameByte bytes or an IPv6 literal in brackets (hostByte bytes,
// '%' for its zone), then at most one ':' and a port of digits. What it
// refuses names no real host, and is read differently by the routes and by
// an upstream:
//   - no name at all (no Host, as HTTP/1.0 and an h2 request without
//     :authority may send, an empty one, or ":80"): the host source had no
//     value, so a limit keyed on host or ip+host was skipped for it, while
//     routes without hosts served it (nginx refuses all but HTTP/1.0's);
//   - the sub-delims a reg-name may hold (",;!$&'()*+=~"): an upstream may
//     read "victim.example," as a list or a parameter;
//   - more than one ':' outside brackets ("victim.example:0:0"): the
//     routes' hosts cut the port at the last ':' and miss victim.example,
//     the host source keys each spelling apart, and an upstream reading
//     X-Forwarded-Host (Express's req.hostname) cuts at the first;
//   - brackets around anything but an IPv6 address ("[victim.example]"):
//     the routes' hosts kept the brackets and missed victim.example, where
//     the host source and Go's net.SplitHostPort drop them;
//   - a name longer than a DNS name's 253 bytes (a trailing dot aside), or
//     with an empty label (".victim.example", "a..victim.example"), which
//     no route's hosts can name: the routes missed it, so a
//     "*.victim.example" route's limits were stepped around, where an
//     upstream taking a tenant from the first label read "a".
func PlainHost(host string) bool {
	port := host
	if len(host) > 0 && host[0] == '[' {
		end := strings.IndexByte(host, ']')
		if end < 0 {
			return false
		}
		for i := 1; i < end; i++ {
			if !hostByte[host[i]] || host[i] == '[' {
				return false
			}
		}
		if a, err := netip.ParseAddr(host[1:end]); err != nil || !a.Is6() {
			return false
		}
		port = host[end+1:]
	} else {
		i := strings.IndexByte(host, ':')
		if i < 0 {
			i = len(host)
		}
		if name := host[:i]; name == "" || len(strings.TrimSuffix(name, ".")) > maxHostName ||
			strings.HasPrefix(name, ".") || strings.Contains(name, "..") {
			return false
		}
		for j := 0; j < i; j++ {
			if !nameByte[host[j]] {
				return false
			}
		}
		port = host[i:]
	}
	if port == "" {
		return true
	}
	if port[0] != ':' {
		return false
	}
	for i := 1; i < len(port); i++ {
		if port[i] < '0' || port[i] > '9' {
			return false
		}
	}
	return true
}
