package tlsedge

import "strings"

// handshakeLog is how net/http logs a TLS handshake that failed (the same
// text since Go 1.0); the server's error log is the only place it tells.
const handshakeLog = "http: TLS handshake error from "

// Why a TLS handshake failed, as sluice_tls_handshake_errors_total's
// reason label has it: a fixed set, never the client's words.
const (
	HandshakeNotTLS       = "not_tls"              // plain HTTP, or bytes that are no TLS record, on the TLS port
	HandshakeClosed       = "closed"               // the client hung up mid-handshake (port checks, scanners)
	HandshakeTimeout      = "timeout"              // no ClientHello or no finish within server.readHeaderTimeout
	HandshakeUnknownName  = "unknown_name"         // tls.strictSni: no certificate for the SNI, or no SNI
	HandshakeVersion      = "version"              // no TLS version in common (tls.minVersion)
	HandshakeCipher       = "cipher"               // no cipher suite in common (the edge offers AEADs only)
	HandshakeClientCert   = "client_certificate"   // tls.clientCAFile: none presented, or not signed by its CAs
	HandshakeCertRejected = "certificate_rejected" // the client refused the served certificate (expired, unknown CA, wrong name)
	HandshakeOther        = "other"
)

// HandshakeReasons are every reason, for a metric to show each from 0.
func HandshakeReasons() []string {
	return []string{HandshakeNotTLS, HandshakeClosed, HandshakeTimeout, HandshakeUnknownName, HandshakeVersion,
		HandshakeCipher, HandshakeClientCert, HandshakeCertRejected, HandshakeOther}
}

// HandshakeFailure reads a line of net/http's server log: ok when it
// reports a failed TLS handshake, with why.
func HandshakeFailure(line string) (reason string, ok bool) {
	rest, ok := strings.CutPrefix(line, handshakeLog)
	if !ok {
		return "", false
	}
	// After "ADDR: ", the error; an address may hold ':' (IPv6), the
	// error's text starts after the first ": " past it.
	if _, err, found := strings.Cut(rest, ": "); found {
		rest = err
	}
	for _, c := range handshakeCauses {
		if strings.Contains(rest, c.text) {
			return c.reason, true
		}
	}
	return HandshakeOther, true
}

// handshakeCauses map crypto/tls's and net/http's error texts to reasons,
// the first that a line contains winning.
var handshakeCauses = [...]struct{ text, reason string }{
	{"client sent an HTTP request to an HTTPS server", HandshakeNotTLS},
	{"does not look like a TLS handshake", HandshakeNotTLS},
	{"i/o timeout", HandshakeTimeout},
	{"no certificates configured", HandshakeUnknownName},
	{"unsupported versions", HandshakeVersion},
	{"protocol version not supported", HandshakeVersion},
	{"no cipher suite supported", HandshakeCipher},
	{"client didn't provide a certificate", HandshakeClientCert},
	{"failed to verify certificate", HandshakeClientCert},
	{"remote error: tls: bad certificate", HandshakeCertRejected},
	{"remote error: tls: unknown certificate authority", HandshakeCertRejected},
	{"remote error: tls: certificate", HandshakeCertRejected}, // expired, revoked, unknown
	{"remote error: tls: unsupported certificate", HandshakeCertRejected},
	{"EOF", HandshakeClosed},
	{"connection reset by peer", HandshakeClosed},
	{"broken pipe", HandshakeClosed},
}
