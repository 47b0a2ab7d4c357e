package main

import (
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"sync"

	"github.com/rs/zerolog"
	"github.com/valyala/fasthttp"

	"sluice/config"
	"sluice/proxy"
)

// serveSluiceFasthttp runs sluice's own Gateway — the same routing, checks
// and fast forwarder as the shipped binary — behind a fasthttp server
// instead of net/http's, through the lean adaptor below. It is an
// experiment, not a mode sluice ships: it answers "what would an HTTP/1.1
// fasthttp front end buy with all of sluice's per-request work included",
// the question the floor rows only answer for an empty handler.
//
// The adaptor carries what the bench's plain GETs need and no more: no
// request bodies, no client-gone context, no Flush/Hijack (so no streaming
// or upgrades). A shipped front end would have to add those, and hand
// what it cannot carry to net/http; the number here is therefore an upper
// bound on what a front end built this way (an adaptor in front of the
// existing Gateway) could reach.
func serveSluiceFasthttp(addr, rulesPath string) {
	cfg, err := config.Load(rulesPath)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	gw := proxy.New(proxy.Deps{Log: zerolog.Nop(), Forwarder: "fast"})
	if err := gw.Load(cfg); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	pool := sync.Pool{New: func() any { return newAdapted() }}
	h := func(ctx *fasthttp.RequestCtx) {
		a := pool.Get().(*adapted)
		if err := a.reset(ctx); err != nil {
			ctx.Error("bad request", fasthttp.StatusBadRequest)
		} else {
			gw.ServeHTTP(&a.w, &a.r)
			a.w.WriteHeader(http.StatusOK) // a handler that wrote nothing: 200, as net/http answers
		}
		a.clear()
		pool.Put(a)
	}
	srv := &fasthttp.Server{Handler: h, Concurrency: 1 << 16, NoDefaultServerHeader: true, NoDefaultContentType: true}
	if err := srv.ListenAndServe(addr); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

// adapted is one pooled net/http view of a fasthttp request.
type adapted struct {
	r   http.Request
	url url.URL
	h   http.Header
	w   adaptedWriter
}

func newAdapted() *adapted {
	a := &adapted{h: http.Header{}}
	a.w.h = http.Header{}
	return a
}

func (a *adapted) reset(ctx *fasthttp.RequestCtx) error {
	req := &ctx.Request
	if len(req.Body()) > 0 {
		return io.ErrUnexpectedEOF // bodies are out of this experiment's scope
	}
	a.url = url.URL{}
	if err := a.url.UnmarshalBinary(req.RequestURI()); err != nil {
		return err
	}
	for k, v := range req.Header.All() {
		key := string(k)
		a.h[key] = append(a.h[key], string(v))
	}
	a.r = http.Request{
		Method:     method(req.Header.Method()),
		URL:        &a.url,
		Proto:      "HTTP/1.1",
		ProtoMajor: 1,
		ProtoMinor: 1,
		Header:     a.h,
		Body:       http.NoBody,
		Host:       string(req.Host()),
		RemoteAddr: ctx.RemoteAddr().String(),
	}
	a.w.ctx = ctx
	return nil
}

func (a *adapted) clear() {
	clear(a.h)
	clear(a.w.h)
	a.r = http.Request{}
	a.w.ctx, a.w.wrote = nil, false
}

// method interns the common methods.
func method(m []byte) string {
	switch string(m) {
	case http.MethodGet:
		return http.MethodGet
	case http.MethodHead:
		return http.MethodHead
	case http.MethodPost:
		return http.MethodPost
	}
	return string(m)
}

// adaptedWriter buffers the status and header the gateway writes and
// appends the body to the fasthttp response, which sets Content-Length.
type adaptedWriter struct {
	ctx   *fasthttp.RequestCtx
	h     http.Header
	wrote bool
}

func (w *adaptedWriter) Header() http.Header { return w.h }

// WriteHeader sends the first final status only; later calls do nothing.
func (w *adaptedWriter) WriteHeader(code int) {
	if w.wrote || code < 200 {
		return
	}
	w.wrote = true
	w.ctx.SetStatusCode(code)
	rh := &w.ctx.Response.Header
	for k, vv := range w.h {
		if k == "Content-Length" {
			continue // fasthttp frames the body it holds
		}
		for _, v := range vv {
			rh.Add(k, v)
		}
	}
}

func (w *adaptedWriter) Write(b []byte) (int, error) {
	w.WriteHeader(http.StatusOK)
	return w.ctx.Write(b)
}
