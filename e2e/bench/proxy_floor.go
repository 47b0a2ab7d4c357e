package main

import (
	"net"
	"net/http"
	"strings"
	"unsafe"

	"github.com/valyala/fasthttp"

	"sluice/config"
)

// serveProxyFloor is the floor of a correct reverse proxy: serveFloor
// plus what RFC 9110 asks of any proxy and what Caddy, Traefik and
// httputil.ReverseProxy do by default, and nothing of sluice's own (no
// router, no rules, no RateLimit fields, no reading of the target beyond
// net/http's). The request goes with its method, its end-to-end fields
// (hop-by-hop ones and those its Connection names dropped), the client in
// X-Forwarded-For and the X-Forwarded-Host and -Proto fields, and its body;
// the answer comes back with its status and end-to-end fields. Written as
// lean as sluice's fast path (names not normalized again, the answer's
// values in one string, common names interned), so that proxy-floor ÷
// floor is what header semantics cost any gateway of this design, and
// sluice ÷ proxy-floor what sluice's routing, rules and fields cost on top.
// Its plain listener has sluice's default readHeaderTimeout (the slowloris
// guard every edge front needs) and idleTimeout, and so has its TLS one
// (serveFloorTLS).
func serveProxyFloor(addr, upAddr string, tls ...string) {
	serveGoFront(&http.Server{Addr: addr, Handler: proxyFloor(upAddr),
		ReadHeaderTimeout: config.DefaultReadHeaderTimeout, IdleTimeout: config.DefaultIdleTimeout}, tls)
}

// proxyFloor is serveProxyFloor's handler, forwarding to upAddr.
func proxyFloor(upAddr string) http.HandlerFunc {
	up := newFloorClient(upAddr)
	return func(w http.ResponseWriter, r *http.Request) {
		req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
		defer fasthttp.ReleaseRequest(req)
		defer fasthttp.ReleaseResponse(resp)
		copyRequest(req, r)
		if err := up.do(req, resp); err != nil {
			w.WriteHeader(http.StatusBadGateway)
			return
		}
		copyAnswer(w.Header(), &resp.Header)
		w.WriteHeader(resp.StatusCode())
		_, _ = w.Write(resp.Body())
	}
}

// copyRequest writes r into req as the proxy floor forwards it.
func copyRequest(req *fasthttp.Request, r *http.Request) {
	h := &req.Header
	h.DisableNormalizing() // net/http's names are canonical already
	h.SetMethod(r.Method)
	req.SetRequestURI(r.URL.RequestURI())
	conn := r.Header["Connection"]
	for k, vv := range r.Header {
		if hopByHop(k) || forwarding(k) || named(conn, k) {
			continue
		}
		for _, v := range vv {
			h.Add(k, v)
		}
	}
	client, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		client = r.RemoteAddr
	}
	// SetCanonical, as sluice's fast path does: the names are canonical,
	// and Set would copy and check each again.
	h.SetCanonical(nameXFF, readOnly(client))
	h.SetCanonical(nameXFHost, readOnly(r.Host))
	proto := "http"
	if r.TLS != nil {
		proto = "https"
	}
	h.SetCanonical(nameXFProto, readOnly(proto))
	if r.ContentLength != 0 && r.Body != nil && r.Body != http.NoBody {
		req.SetBodyStream(r.Body, int(r.ContentLength))
	}
}

// The names copyRequest sets, and readOnly, which lends a string's bytes
// to SetCanonical (it copies them).
var nameXFF, nameXFHost, nameXFProto = []byte("X-Forwarded-For"), []byte("X-Forwarded-Host"), []byte("X-Forwarded-Proto")

func readOnly(s string) []byte { return unsafe.Slice(unsafe.StringData(s), len(s)) }

// copyAnswer copies the upstream's end-to-end fields into dst: every
// value in one string, every field's []string in one backing array.
func copyAnswer(dst http.Header, src *fasthttp.ResponseHeader) {
	var conn []string
	n, size := 0, 0
	for k, v := range src.All() {
		if string(k) == "Connection" {
			conn = append(conn, string(v))
		}
		n, size = n+1, size+len(v)
	}
	all := make([]byte, 0, size)
	backing := make([]string, 0, n)
	for k, v := range src.All() {
		name := unsafe.String(unsafe.SliceData(k), len(k))
		if hopByHop(name) || named(conn, name) {
			continue
		}
		off, i := len(all), len(backing)
		all = append(all, v...) // within its capacity: the strings before stay put
		backing = append(backing, unsafe.String(unsafe.SliceData(all[off:]), len(v)))
		key := commonName(k)
		if prev, ok := dst[key]; ok {
			dst[key] = append(prev, backing[i])
		} else {
			dst[key] = backing[i : i+1 : i+1]
		}
	}
}

// hopByHop reports the fields httputil.ReverseProxy drops as hop-by-hop
// (RFC 9110 §7.6.1's, and RFC 2616's proxy authentication and Trailer).
func hopByHop(k string) bool {
	switch k {
	case "Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate", "Proxy-Authorization",
		"Te", "Trailer", "Transfer-Encoding", "Upgrade":
		return true
	}
	return false
}

// forwarding reports the fields the proxy writes anew. A client's own
// X-Forwarded-For is dropped, not extended: no peer is trusted (sluice's
// and Caddy's default).
func forwarding(k string) bool {
	switch k {
	case "Forwarded", "X-Forwarded-For", "X-Forwarded-Host", "X-Forwarded-Proto":
		return true
	}
	return false
}

// named reports whether a Connection field lists k.
func named(conn []string, k string) bool {
	for _, c := range conn {
		for t := range strings.SplitSeq(c, ",") {
			if strings.EqualFold(strings.TrimSpace(t), k) {
				return true
			}
		}
	}
	return false
}

// commonName is k as a string, without allocating for the names the
// bench's upstream sends.
func commonName(k []byte) string {
	switch string(k) {
	case "Content-Type":
		return "Content-Type"
	case "Content-Length":
		return "Content-Length"
	case "Date":
		return "Date"
	case "Server":
		return "Server"
	}
	return string(k)
}
