// Command loadgen is the e2e tests' paced open-loop sender, run as its own
// process (built without -race) so that the tests' race detector does not
// slow the load. Request i is due at start + i/rate, whatever the answers
// take; each hit's send lag is recorded so a busy machine can be told apart
// from a wrong gateway. It sends only to the loopback targets it is given,
// a bounded number of requests, and stops by itself.
//
// Input (stdin, JSON): {"rate":..,"durationMs":..,"workers":..,"stopOnEOF":..,"targets":[{"method":"GET","url":"http://127.0.0.1:..","header":{"K":"V"}}]}
// With stopOnEOF, the end of stdin after the JSON ends the load early: no
// request due after it is sent (durationMs is then the longest it runs).
// Output (stdout, JSON lines): first [-1, startUnixUs, 0, 0, 0], when the
// load started; then one [target, dueUs, sentUs, doneUs, status] per request
// sent.
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"
)

type target struct {
	Method string            `json:"method"`
	URL    string            `json:"url"`
	Header map[string]string `json:"header"`
}

type spec struct {
	Rate       float64  `json:"rate"`
	DurationMs int64    `json:"durationMs"`
	Workers    int      `json:"workers"`
	StopOnEOF  bool     `json:"stopOnEOF"`
	Targets    []target `json:"targets"`
}

type hit struct {
	due, sent, done time.Duration
	status          int
}

func main() {
	var s spec
	dec := json.NewDecoder(os.Stdin)
	if err := dec.Decode(&s); err != nil {
		fail(err)
	}
	stopped := make(chan struct{}) // closed when stdin ends, with stopOnEOF
	if s.StopOnEOF {
		go func() {
			_, _ = io.Copy(io.Discard, io.MultiReader(dec.Buffered(), os.Stdin))
			close(stopped)
		}()
	}
	if s.Rate <= 0 || s.DurationMs <= 0 || len(s.Targets) == 0 {
		fail(fmt.Errorf("need rate, durationMs and targets"))
	}
	for _, t := range s.Targets {
		u, err := url.Parse(t.URL)
		if err != nil || !strings.HasPrefix(u.Hostname(), "127.") {
			fail(fmt.Errorf("target %q is not on loopback", t.URL))
		}
	}
	if s.Workers <= 0 {
		s.Workers = 256
	}
	n := int(s.Rate * float64(s.DurationMs) / 1000)
	if n > 2_000_000 {
		fail(fmt.Errorf("%d requests is more than a test needs", n))
	}
	client := &http.Client{
		Transport: &http.Transport{MaxIdleConns: s.Workers, MaxIdleConnsPerHost: s.Workers, IdleConnTimeout: 30 * time.Second},
		Timeout:   30 * time.Second,
	}
	hits := make([]hit, n)
	start := time.Now()
	slots := make(chan int, 1)
	var wg sync.WaitGroup
	for w := 0; w < s.Workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range slots {
				t := &s.Targets[i%len(s.Targets)]
				req, err := http.NewRequest(t.Method, t.URL, nil)
				if err != nil {
					fail(err)
				}
				for k, v := range t.Header {
					req.Header.Set(k, v)
				}
				h := &hits[i]
				h.sent = time.Since(start)
				resp, err := client.Do(req)
				if err == nil {
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					h.status = resp.StatusCode
				}
				h.done = time.Since(start)
			}
		}()
	}
	interval := float64(time.Second) / s.Rate
	wait := time.NewTimer(0)
	<-wait.C
	sent := 0
send:
	for ; sent < n; sent++ {
		due := time.Duration(float64(sent) * interval)
		if d := due - time.Since(start); d > 0 {
			wait.Reset(d)
			select {
			case <-wait.C:
			case <-stopped:
				break send
			}
		}
		select {
		case <-stopped:
			break send
		default:
		}
		hits[sent].due = due
		slots <- sent
	}
	close(slots)
	wg.Wait()
	hits = hits[:sent]
	out := bufio.NewWriter(os.Stdout)
	// the first line is when the load started (target -1, Unix µs): loads
	// launched together start tens of ms apart on a busy machine, and a test
	// that adds their counts over one span lines them up by it
	fmt.Fprintf(out, "[-1,%d,0,0,0]\n", start.UnixMicro())
	for i, h := range hits {
		fmt.Fprintf(out, "[%d,%d,%d,%d,%d]\n", i%len(s.Targets), h.due.Microseconds(), h.sent.Microseconds(), h.done.Microseconds(), h.status)
	}
	if err := out.Flush(); err != nil {
		fail(err)
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "loadgen:", err)
	os.Exit(2)
}
