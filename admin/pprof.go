package admin

import (
	"net/http"
	"net/http/pprof"

	"github.com/go-chi/chi/v5"
)

// mountProfiler serves Go's profiler under /debug/pprof/ on r (guarded by
// the caller like a write): the index, every named profile (heap,
// goroutine, allocs, block, mutex, threadcreate), CPU profile?seconds=N,
// trace?seconds=N, cmdline and symbol. The handlers are mounted here, on
// the admin router only: importing net/http/pprof also registers them on
// http.DefaultServeMux, which sluice never serves.
func mountProfiler(r chi.Router) {
	get(r, "/debug/pprof", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/debug/pprof/", http.StatusMovedPermanently)
	})
	get(r, "/debug/pprof/*", pprof.Index) // the index and the named profiles by name
	get(r, "/debug/pprof/cmdline", pprof.Cmdline)
	get(r, "/debug/pprof/profile", pprof.Profile)
	get(r, "/debug/pprof/trace", pprof.Trace)
	get(r, "/debug/pprof/symbol", pprof.Symbol)
	r.Post("/debug/pprof/symbol", pprof.Symbol)
}
