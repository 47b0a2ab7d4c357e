package proxy

import (
	"context"
	"net/http"
	"sync"

	"sluice/config"
)

// exchange wraps the client's ResponseWriter for one request: it records the
// status the client got and whether the upstream failed, so the statistics
// (errors, RT) and the circuit breakers see what the client saw. Pooled:
// its lifetime ends when the route handler returns.
type exchange struct {
	http.ResponseWriter
	req        *http.Request
	src        *sources
	clientCtx  context.Context
	status     int
	failed     bool // transport failure or timeout
	clientGone bool
}

var _ interface{ Unwrap() http.ResponseWriter } = (*exchange)(nil)

func (e *exchange) WriteHeader(code int) {
	if e.status == 0 && code >= 200 {
		e.status = code
	}
	e.ResponseWriter.WriteHeader(code)
}

func (e *exchange) Write(b []byte) (int, error) {
	if e.status == 0 {
		e.status = http.StatusOK
	}
	return e.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach Flush and Hijack (streaming,
// WebSocket upgrades) on the real writer.
func (e *exchange) Unwrap() http.ResponseWriter { return e.ResponseWriter }

// Value implements hotparam.Values; an *exchange is a pointer, so passing
// it as an interface allocates nothing.
func (e *exchange) Value(src config.Source) (string, bool) { return e.src.value(e.req, src) }

type exchangePool struct{ p sync.Pool }

func (p *exchangePool) get(w http.ResponseWriter, r *http.Request, src *sources) *exchange {
	e, _ := p.p.Get().(*exchange)
	if e == nil {
		e = new(exchange)
	}
	*e = exchange{ResponseWriter: w, req: r, src: src, clientCtx: r.Context()}
	return e
}

func (p *exchangePool) put(e *exchange) {
	*e = exchange{}
	p.p.Put(e)
}
