package proxy

import (
	"net/http"
	"net/http/httputil"
)

// forwarder sends one request to the route's upstream and writes the answer
// to the client. The standard one is httputil.ReverseProxy; a fast one for
// ordinary requests can sit beside it.
type forwarder interface {
	forward(ex *exchange, r *http.Request)
}

type standardForwarder struct{ rp *httputil.ReverseProxy }

func (f standardForwarder) forward(ex *exchange, r *http.Request) { f.rp.ServeHTTP(ex, r) }
