package proxy_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"sluice/config"
	"sluice/proxy"
)

// observed counts passes per resource.
type observed struct {
	mu sync.Mutex
	by map[string]*counter
}

func (o *observed) observer(res string) proxy.Observer {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.by[res] == nil {
		o.by[res] = &counter{}
	}
	return o.by[res]
}

func (o *observed) passes(res string) int {
	o.mu.Lock()
	c := o.by[res]
	o.mu.Unlock()
	if c == nil {
		return 0
	}
	p, _ := c.counts()
	return p
}

// rawExchange sends one request line as written (Go's client would clean
// the target first) on a new connection and returns the status and body.
func rawExchange(t *testing.T, addr, method, target string) (int, string) {
	t.Helper()
	resp, body := rawRequest(t, addr, method, target)
	return resp.StatusCode, body
}

// rawRequest sends one request line as written, with the header lines
// given (and "Host: gw" unless one of them is a Host), on a new
// connection, and returns the response and its body.
func rawRequest(t *testing.T, addr, method, target string, headers ...string) (*http.Response, string) {
	t.Helper()
	resp, body, _ := rawRequestHead(t, addr, method, target, headers...)
	return resp, body
}

// rawRequestHead is rawRequest that also returns the answer's head as the
// gateway wrote it, for what parsing it hides (repeated lines, order).
func rawRequestHead(t *testing.T, addr, method, target string, headers ...string) (*http.Response, string, string) {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s HTTP/1.1\r\n", method, target)
	host := false
	for _, h := range headers {
		host = host || strings.HasPrefix(strings.ToLower(h), "host:")
		b.WriteString(h + "\r\n")
	}
	if !host {
		b.WriteString("Host: gw\r\n")
	}
	b.WriteString("\r\n")
	io.WriteString(conn, b.String())
	var head strings.Builder
	resp, err := http.ReadResponse(bufio.NewReader(io.TeeReader(conn, &head)), &http.Request{Method: method})
	if err != nil {
		t.Fatalf("%s %s: %v", method, target, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	h, _, _ := strings.Cut(head.String(), "\r\n\r\n")
	return resp, string(body), h
}

// TestOneView: on both forwarders, a target is routed, limited and
// forwarded by its one view (SPEC §11): unreserved escapes decoded, "//"
// merged, other escapes kept, raw bytes a path may not hold escaped; a
// fragment, a dot segment, a query Go would read differently, and a
// target that is no path are 400 and never forwarded; HEAD is served by
// the GET route and counted on its resource.
func TestOneView(t *testing.T) {
	var mu sync.Mutex
	var got []string // "METHOD RequestURI" as the upstream read it
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = append(got, r.Method+" "+r.RequestURI)
		mu.Unlock()
		io.WriteString(w, "ok")
	}))
	defer up.Close()
	rules := fmt.Sprintf(`
upstreams:
  up: {targets: [%q]}
routes:
  - path: /hello
    methods: [GET]
    upstream: up
    resource: hello
  - path: /items/{id}
    upstream: up
    resource: items
  - path: /api/*
    upstream: up
    stripPrefix: /api
    resource: api
  - path: /café
    upstream: up
    resource: cafe
  - path: /café/menu/*
    upstream: up
    stripPrefix: /café/menu
    resource: menu
  - path: /th%%c3%%a9/*
    upstream: up
    stripPrefix: /th%%c3%%a9
    resource: tea
  - path: /*
    upstream: up
    resource: other
`, up.URL)
	cases := []struct {
		method, target string
		status         int
		resource       string // counted on; "" with 400
		upstream       string // what the upstream read
	}{
		{"GET", "/hello", 200, "hello", "GET /hello"},
		{"GET", "/%68ello", 200, "hello", "GET /hello"},
		{"GET", "/%68%65%6C%6c%6F?x=1", 200, "hello", "GET /hello?x=1"},
		{"GET", "//hello", 200, "hello", "GET /hello"},
		{"HEAD", "/hello", 200, "hello", "HEAD /hello"},
		{"HEAD", "/%68ello", 200, "hello", "HEAD /hello"},
		{"POST", "/hello", 200, "other", "POST /hello"}, // the catch-all takes what /hello does not
		{"GET", "/hello/", 200, "other", "GET /hello/"},
		{"GET", "/Hello", 200, "other", "GET /Hello"},
		{"GET", "/items/%31", 200, "items", "GET /items/1"},
		{"GET", "/items/a%2Fb", 200, "items", "GET /items/a%2Fb"},
		{"GET", "/items/a%2fb", 200, "items", "GET /items/a%2Fb"},
		{"GET", "/caf%C3%A9", 200, "cafe", "GET /caf%C3%A9"},
		{"GET", "/caf%c3%a9", 200, "cafe", "GET /caf%C3%A9"},
		{"GET", "/caf\xc3\xa9", 200, "cafe", "GET /caf%C3%A9"},
		{"GET", "/items/caf\xc3\xa9", 200, "items", "GET /items/caf%C3%A9"},
		{"GET", "/api//x/%7Ey", 200, "api", "GET /x/~y"},
		// stripPrefix is spelled like the route's path: it strips the view's
		// normalized path however the prefix or the request spells it.
		{"GET", "/caf%C3%A9/menu/x", 200, "menu", "GET /x"},
		{"GET", "/caf\xc3\xa9/menu/x", 200, "menu", "GET /x"},
		{"GET", "/th%C3%A9/x", 200, "tea", "GET /x"},
		{"GET", "/hello?", 200, "hello", "GET /hello"},
		{"GET", "http://elsewhere.example/%68ello?q=1", 200, "hello", "GET /hello?q=1"},
		{"GET", "/hello?id=102#zN", 400, "", ""},
		{"GET", "/hello#x", 400, "", ""},
		{"GET", "/hello?a=1;b=2", 400, "", ""},
		{"GET", "/hello?a=%zz&a=1", 400, "", ""},
		{"GET", "/items/%2e%2e/hello", 400, "", ""},
		{"GET", "*", 400, "", ""}, // (OPTIONS * net/http answers itself)
	}
	for _, fwd := range []string{"standard", "fast"} {
		t.Run(fwd, func(t *testing.T) {
			cfg, err := config.Parse("oneview.yaml", []byte(rules))
			if err != nil {
				t.Fatal(err)
			}
			obs := &observed{by: map[string]*counter{}}
			g := proxy.New(proxy.Deps{Log: zerolog.Nop(), Forwarder: fwd, Observer: obs.observer})
			if err := g.Load(cfg); err != nil {
				t.Fatal(err)
			}
			srv := httptest.NewServer(g)
			defer srv.Close()
			addr := strings.TrimPrefix(srv.URL, "http://")
			for _, c := range cases {
				mu.Lock()
				got = got[:0]
				mu.Unlock()
				before := obs.passes(c.resource)
				status, body := rawExchange(t, addr, c.method, c.target)
				mu.Lock()
				seen := strings.Join(got, ",")
				mu.Unlock()
				if status != c.status || seen != c.upstream {
					t.Errorf("%s %q: %d %q, upstream saw %q; want %d, %q", c.method, c.target, status, body, seen, c.status, c.upstream)
				}
				if c.resource != "" && obs.passes(c.resource) != before+1 {
					t.Errorf("%s %q: not counted on %s", c.method, c.target, c.resource)
				}
			}
		})
	}
}

// TestHeadFromGet: HEAD goes to the route whose methods have GET, unless
// a route on the same pattern lists HEAD itself (before or after it), on
// host routes as on the others; a HEAD on a path whose routes have neither
// is 405.
func TestHeadFromGet(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer up.Close()
	cfg, err := config.Parse("head.yaml", []byte(fmt.Sprintf(`
upstreams:
  up: {targets: [%q]}
routes:
  - path: /a
    methods: [GET]
    upstream: up
    resource: a-get
  - path: /a
    methods: [HEAD]
    upstream: up
    resource: a-head
  - path: /b/{id}
    methods: [GET]
    upstream: up
    resource: b-get
  - path: /c
    methods: [POST]
    upstream: up
    resource: c-post
  - path: /d
    hosts: [gw]
    methods: [GET]
    upstream: up
    resource: d-get
  - path: /d
    upstream: up
    resource: d-any
`, up.URL)))
	if err != nil {
		t.Fatal(err)
	}
	obs := &observed{by: map[string]*counter{}}
	g := proxy.New(proxy.Deps{Log: zerolog.Nop(), Observer: obs.observer})
	if err := g.Load(cfg); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(g)
	defer srv.Close()
	addr := strings.TrimPrefix(srv.URL, "http://")
	for _, c := range []struct {
		target   string
		status   int
		resource string
	}{
		{"/a", 200, "a-head"},
		{"/b/7", 200, "b-get"},
		{"/c", 405, ""},
		{"/d", 200, "d-get"}, // a host's GET route is tried first, its HEAD too
	} {
		before := obs.passes(c.resource)
		if status, _ := rawExchange(t, addr, "HEAD", c.target); status != c.status {
			t.Errorf("HEAD %s: %d, want %d", c.target, status, c.status)
		}
		if c.resource != "" && obs.passes(c.resource) != before+1 {
			t.Errorf("HEAD %s: not counted on %s", c.target, c.resource)
		}
	}
}
