package proxy

import (
	"bufio"
	"fmt"
	"math/rand/v2"
	"net/http"
	"reflect"
	"strings"
	"testing"

	"github.com/valyala/fasthttp"
)

// readUpstreamHeader parses an upstream's answer head as the fast path's
// client does (normalized names).
func readUpstreamHeader(t testing.TB, head string) *fasthttp.ResponseHeader {
	t.Helper()
	h := new(fasthttp.ResponseHeader)
	if err := h.Read(bufio.NewReader(strings.NewReader(head))); err != nil {
		t.Fatalf("%q: %v", head, err)
	}
	return h
}

// A pooled call keeps the names of the last answer it copied; whatever
// answers came before, an answer is copied exactly as a fresh call copies
// it: same names (however they were interned), same values, same order of
// repeated fields, Connection-named fields dropped.
func TestCopyResponseHeaderReusedCallCopiesAsFresh(t *testing.T) {
	names := []string{"Content-Type", "X-Custom", "Server", "Date", "X-Other", "Set-Cookie", "Cache-Control", "X-Custom-Two"}
	rng := rand.New(rand.NewPCG(1, 2))
	reused := &fastCall{}
	for i := range 2000 {
		var b strings.Builder
		b.WriteString("HTTP/1.1 200 OK\r\nContent-Length: 0\r\n")
		for range rng.IntN(12) {
			fmt.Fprintf(&b, "%s: v%d\r\n", names[rng.IntN(len(names))], rng.IntN(100))
		}
		if rng.IntN(8) == 0 {
			fmt.Fprintf(&b, "Connection: %s\r\n", names[rng.IntN(len(names))])
		}
		b.WriteString("\r\n")
		head := b.String()
		want, got := http.Header{}, http.Header{}
		copyResponseHeader(want, readUpstreamHeader(t, head), &fastCall{})
		copyResponseHeader(got, readUpstreamHeader(t, head), reused)
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("answer %d %q: a reused call copied %v, a fresh one %v", i, head, got, want)
		}
	}
	if len(reused.names) > maxKeptNames {
		t.Fatalf("the call keeps %d names, more than %d", len(reused.names), maxKeptNames)
	}
}

// An upstream that names its fields alike from answer to answer costs two
// allocations an answer, its own field names included, where each name
// headerKey does not know cost one more.
func TestCopyResponseHeaderReusesTheLastNames(t *testing.T) {
	up := readUpstreamHeader(t, "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Type: text/plain\r\nX-Backend-Node: a7\r\nX-Trace-Span: 42\r\n\r\n")
	c := &fastCall{}
	dst := http.Header{}
	copyResponseHeader(dst, up, c) // the first answer names them
	allocs := testing.AllocsPerRun(100, func() {
		clear(dst)
		copyResponseHeader(dst, up, c)
	})
	if allocs != 2 {
		t.Fatalf("copying a header named as the last costs %v allocations, want 2 (the values' string and their []string backing)", allocs)
	}
	if dst.Get("X-Backend-Node") != "a7" || dst.Get("X-Trace-Span") != "42" || dst.Get("Content-Type") != "text/plain" {
		t.Fatalf("copied %v", dst)
	}
}
