package proxy

import "net/http"

// ignoreOldExpect drops an HTTP/1.0 request's Expect, as RFC 9110 §10.1.1
// has a server ignore a 100-continue expectation from an HTTP/1.0 client
// (net/http's server does not answer one; any other expectation it
// refuses with 417 itself). Forwarded, it had the upstream send 100
// Continue, which reached the client as "HTTP/1.0 100 Continue": a 1xx no
// HTTP/1.0 client may be sent (§15.2; the smuggling audit).
func ignoreOldExpect(r *http.Request) {
	if r.ProtoMajor == 1 && r.ProtoMinor == 0 {
		delete(r.Header, "Expect")
	}
}
