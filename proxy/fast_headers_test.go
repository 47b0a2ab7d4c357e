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

// connNamesOf puts long Connection lines in a set, which must name exactly
// what scanning them names: the same tokens, ASCII case-insensitively,
// spaces and empty elements aside.
func TestConnNamesSetAgreesWithScanning(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	words := []string{"X-A", "x-a", "X-B", "keep-alive", "Close", "X-\u212a", "X-K", " X-C ", "", "x-long-name-of-a-header"}
	for i := range 3000 {
		var lines []string
		for range 1 + rng.IntN(3) {
			var toks []string
			for range rng.IntN(40) {
				toks = append(toks, words[rng.IntN(len(words))])
			}
			lines = append(lines, strings.Join(toks, ","))
		}
		for _, w := range words {
			name := strings.TrimSpace(w)
			if name == "" {
				continue // no header has an empty name
			}
			c := connNamesOf(lines)
			if got, want := c.has(name), listedIn(lines, name); got != want {
				t.Fatalf("case %d: lines %q (set: %v) name %q: has %v, scanning %v", i, lines, c.set != nil, name, got, want)
			}
		}
	}
}

// BenchmarkConnectionTokens: a request of H header lines and a Connection
// line of T tokens. Each line was looked up by scanning the tokens, so the
// cost grew as H x T: 0.8 s of CPU for T = 16,000, H = 3,200 (66 KB). With
// the set it grows as H + T.
func BenchmarkConnectionTokens(b *testing.B) {
	for _, size := range []struct{ tokens, lines int }{{1, 10}, {1000, 200}, {16000, 3200}} {
		b.Run(fmt.Sprintf("tokens=%d/lines=%d", size.tokens, size.lines), func(b *testing.B) {
			conn := []string{strings.Repeat("a,", size.tokens-1) + "a"}
			names := make([]string, size.lines)
			for i := range names {
				names[i] = fmt.Sprintf("X-H%d", i)
			}
			b.ReportAllocs()
			for b.Loop() {
				c := connNamesOf(conn)
				for _, n := range names {
					if c.has(n) {
						b.Fatal(n)
					}
				}
			}
		})
	}
}
