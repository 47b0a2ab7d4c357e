package config

import "strings"

// nameFault is what dnsName finds wrong with a DNS name.
type nameFault int

const (
	nameOK         nameFault = iota
	nameTooLong              // over 253 bytes
	nameLabelSize            // a label empty or over 63 bytes
	nameLabelChars           // a byte other than letters, digits, '-' (and '_' where allowed)
	nameLabelDash            // a label that starts or ends with '-'
)

// dnsName is the one reading of a host name's labels, for listeners
// (server.listen, admin.listen) and for the hosts routes and admin answer
// to: at most 253 bytes of dot-separated labels of 1 to 63 letters, digits
// and inner '-' (RFC 1123 2.1). underscore admits '_' too, which the names
// of services and of some internal hosts hold and resolvers accept, where a
// Host header may carry one; a listener's address comes from a resolver
// that refuses it.
func dnsName(name string, underscore bool) nameFault {
	if len(name) > 253 {
		return nameTooLong
	}
	for l := range strings.SplitSeq(name, ".") {
		if l == "" || len(l) > 63 {
			return nameLabelSize
		}
		for i := 0; i < len(l); i++ {
			if c := l[i]; !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || underscore && c == '_') {
				return nameLabelChars
			}
		}
		if l[0] == '-' || l[len(l)-1] == '-' {
			return nameLabelDash
		}
	}
	return nameOK
}
