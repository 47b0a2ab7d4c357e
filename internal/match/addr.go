package match

import "net/netip"

// Addr reads an address written without a port as the one address that
// makes one client one key (the ip source's): an IPv4-mapped IPv6 address
// as its IPv4 address (::ffff:1.2.3.4 is 1.2.3.4), no zone. ok is false
// when s is not an address. The gateway keys clients with it and
// validation holds the rules file's addresses to it, so the two agree.
func Addr(s string) (netip.Addr, bool) {
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Addr{}, false
	}
	return a.Unmap().WithZone(""), true
}

// AddrString writes a (parsed from s by Addr) as RFC 5952 writes it
// (netip's String: lower case, zeros compressed; IPv4 dotted), allocating
// only when that form differs from s.
func AddrString(a netip.Addr, s string) string {
	var buf [len("ffff:ffff:ffff:ffff:ffff:ffff:255.255.255.255")]byte
	if b := a.AppendTo(buf[:0]); string(b) != s {
		return string(b)
	}
	return s
}
