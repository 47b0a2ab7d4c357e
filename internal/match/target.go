package match

import (
	"net"
	"net/url"
	"strings"
)

// TargetKey is the server a valid upstream target URL names and the path it
// forwards under, as one string: letter case in the scheme and host, a
// host's trailing dot, a default port, a port's leading zeros and a lone
// "/" path do not make another target. Validation refuses two spellings of
// one target (one server would take twice its weight, and show as two
// targets), and a reload that respells a target keeps its health and
// ejection, which are the server's.
func TargetKey(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return raw
	}
	port := strings.TrimLeft(u.Port(), "0")
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[strings.ToLower(u.Scheme)]
	}
	path := u.EscapedPath()
	if path == "/" {
		path = ""
	}
	host := strings.TrimSuffix(strings.ToLower(u.Hostname()), ".")
	return strings.ToLower(u.Scheme) + "://" + net.JoinHostPort(host, port) + path
}
