package e2e

import (
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// hdSoakDuration is SLUICE_SOAK (e.g. 60s for the full soak), 8 s by
// default so that CI stays within its budget.
func hdSoakDuration(t *testing.T) time.Duration {
	s := os.Getenv("SLUICE_SOAK")
	if s == "" {
		return 8 * time.Second
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 4*time.Second {
		t.Fatalf("SLUICE_SOAK=%q: want a duration of at least 4s", s)
	}
	return d
}

// hdSample is the gateway's RSS, goroutine count and established TCP
// connections at one instant: accepted ones (clients, metric scrapes) and
// dialled ones (upstreams).
type hdSample struct {
	rssKB             int64
	goroutines        float64
	inbound, outbound int
}

// hdConnGoroutines are the goroutines a correct gateway holds for its open
// connections: one serving each accepted connection. The upstream pool of
// the fast path (which this soak's plain-HTTP route takes) holds none for
// an idle connection. Under load the clients' and the pool's connections
// grow to the highest concurrency seen so far, which a busy moment on the
// machine raises; that is not a leak.
func (s hdSample) hdConnGoroutines() float64 { return float64(s.inbound) }

// hdConnKB bounds what one open connection holds in the gateway (its
// goroutines' stacks, bufio buffers, TLS-free conn state).
const hdConnKB = 64

// hdSampleProcess reads VmRSS, go_goroutines and the process's TCP
// connections without failing the test (it runs beside the load).
func hdSampleProcess(g *gateway) (hdSample, error) {
	pid := g.cmd.Process.Pid
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return hdSample{}, err
	}
	var s hdSample
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			s.rssKB, _ = strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
		}
	}
	if s.inbound, s.outbound, err = hdConns(pid); err != nil {
		return hdSample{}, err
	}
	m, err := scrapeMetrics(g.AdminURL)
	if err != nil {
		return hdSample{}, err
	}
	s.goroutines = m["go_goroutines"]
	return s, nil
}

// hdConns counts pid's established TCP connections: inbound ones have a
// local port pid listens on, the others pid dialled.
func hdConns(pid int) (inbound, outbound int, err error) {
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		return 0, 0, err
	}
	mine := map[string]bool{}
	for _, fd := range fds {
		l, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, fd.Name()))
		if inode, ok := strings.CutPrefix(l, "socket:["); err == nil && ok {
			mine[strings.TrimSuffix(inode, "]")] = true
		}
	}
	// /proc/<pid>/net/tcp{,6}: sl local rem st ... inode (field 9).
	type sock struct{ localPort, state string }
	var socks []sock
	for _, f := range []string{"tcp", "tcp6"} {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/net/%s", pid, f))
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n")[1:] {
			fs := strings.Fields(line)
			if len(fs) < 10 || !mine[fs[9]] {
				continue
			}
			_, port, _ := strings.Cut(fs[1], ":")
			socks = append(socks, sock{port, fs[3]})
		}
	}
	listening := map[string]bool{}
	for _, s := range socks {
		if s.state == "0A" {
			listening[s.localPort] = true
		}
	}
	for _, s := range socks {
		switch {
		case s.state != "01": // not ESTABLISHED
		case listening[s.localPort]:
			inbound++
		default:
			outbound++
		}
	}
	return inbound, outbound, nil
}

// hdSettled is a window's median RSS and median connections (a single
// instant can catch a GC cycle) and its fewest goroutines beyond those its
// connections hold (the count moves with the requests in flight at the
// instant; a leak raises the floor), reported as goroutines.
func hdSettled(ss []hdSample) hdSample {
	if len(ss) == 0 {
		return hdSample{}
	}
	r := make([]int64, len(ss))
	spare := make([]float64, len(ss))
	in := make([]int, len(ss))
	out := make([]int, len(ss))
	for i, s := range ss {
		r[i], spare[i], in[i], out[i] = s.rssKB, s.goroutines-s.hdConnGoroutines(), s.inbound, s.outbound
	}
	sort.Slice(r, func(i, j int) bool { return r[i] < r[j] })
	sort.Float64s(spare)
	sort.Ints(in)
	sort.Ints(out)
	return hdSample{rssKB: r[len(r)/2], goroutines: spare[0], inbound: in[len(in)/2], outbound: out[len(out)/2]}
}

// TestSoakLoadWhileReloading: a steady 400 req/s against a qps-300 rule with
// a hot parameter, while rules.yaml is rewritten 5 times a second (valid and
// invalid versions alternating). Every answer is 200 or 429; the gateway's
// RSS and goroutine count after warm-up and at the end agree within 10%
// (RSS: at least 3 MB in the short CI run).
// SLUICE_SOAK=60s runs the full soak (300 rewrites).
func TestSoakLoadWhileReloading(t *testing.T) {
	d := hdSoakDuration(t)
	rewrites := int(d / (200 * time.Millisecond))
	up := startUpstream(t, nil)
	rules := func(i int) string {
		count := 300 + 10*(i%2) // each valid version changes the rule
		bad := ""
		if i%2 == 1 {
			bad = "    controlBehavior: sideways\n"
		}
		return rulesFor(up.URL, fmt.Sprintf(`# version %d
routes:
  - path: /soak
    upstream: up
    resource: soak
flowRules:
  - resource: soak
    count: %d
%sparamRules:
  - resource: soak
    param: query:id
    count: 40
`, i, count, bad))
	}
	g := startGateway(t, rules(0))
	targets := make([]target, 100)
	for i := range targets {
		targets[i] = to(fmt.Sprintf("%s/soak?id=%d", g.URL, i%20))
	}
	// Warm up first (the upstream pool, buffers, the GC's pace): the memory
	// a process grows into in its first seconds is not a leak.
	// 32 senders: enough for 400 req/s at loopback latency. Each sender
	// opens a connection only when the others are busy, and the gateway's
	// upstream pool keeps the highest concurrency it has met, so a busy
	// moment on the machine opens connections (each holding goroutines and
	// buffers in the gateway) that stay open: the samples count them, and
	// the bounds below leave room for what they hold, not for more.
	const workers = 32
	run(t, load{Rate: 400, Duration: 2 * time.Second, Workers: workers, Targets: targets})

	// Rewrites, spread over the run.
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		every := d / time.Duration(rewrites+1)
		for i := 1; i <= rewrites; i++ {
			time.Sleep(every)
			tmp := fmt.Sprintf("%s.%d", g.Rules, i)
			if err := os.WriteFile(tmp, []byte(rules(i)), 0o644); err == nil {
				_ = os.Rename(tmp, g.Rules)
			}
		}
	}()
	// Samples: five over a second after a warm-up of a quarter of the run,
	// five over the run's last second and a half.
	var early, late []hdSample
	var sampleErr error
	go func() {
		defer wg.Done()
		take := func(into *[]hdSample) {
			for range 5 {
				s, err := hdSampleProcess(g)
				if err != nil {
					sampleErr = err
					return
				}
				*into = append(*into, s)
				time.Sleep(200 * time.Millisecond)
			}
		}
		time.Sleep(max(d/4, 2*time.Second))
		take(&early)
		time.Sleep(d - max(d/4, 2*time.Second) - 2500*time.Millisecond)
		take(&late)
	}()

	res := run(t, load{Rate: 400, Duration: d, Workers: workers, Targets: targets})
	wg.Wait()
	res.checkLag(t)
	if sampleErr != nil {
		t.Fatalf("sampling the gateway: %v", sampleErr)
	}
	st := res.statuses()
	other := len(res.hits) - st[200] - st[429]
	start, end := hdSettled(early), hdSettled(late)
	ok, failed := len(g.logs.Events("rules loaded")), len(g.logs.Events("reload failed"))
	t.Logf("soak %v: %d requests (%v), other than 200/429: %d; %d rewrites -> reloads ok %d, failed %d; "+
		"RSS %d kB -> %d kB (%+.1f%%); connections in/out %d/%d -> %d/%d; goroutines beyond theirs %.0f -> %.0f",
		d, len(res.hits), st, other, rewrites, ok, failed,
		start.rssKB, end.rssKB, 100*float64(end.rssKB-start.rssKB)/float64(start.rssKB),
		start.inbound, start.outbound, end.inbound, end.outbound, start.goroutines, end.goroutines)
	if other != 0 {
		t.Errorf("%d answers other than 200/429: %v", other, st)
	}
	if st[200] == 0 || st[429] == 0 {
		t.Errorf("statuses %v: want both passes and blocks", st)
	}
	// Each rewrite is 200 ms after the last, past the 100 ms debounce; on a
	// busy machine some may merge.
	if ok < rewrites/4 || failed < rewrites/4 {
		t.Errorf("%d rewrites gave %d good and %d failed reloads: the rewrites were not seen", rewrites, ok, failed)
	}
	// 10%; the short CI run allows at least 3 MB, since 10% of a 20 MB
	// process is within the heap's swing between two GC cycles over a few
	// seconds. A leak of a byte per request or a goroutine per reload shows
	// in the full run (SLUICE_SOAK=60s), which is held to 10% exactly.
	// Connections opened between the windows (a busy moment raised the
	// concurrency) add what they hold; a leak grows without them.
	allowed := 0.10 * float64(start.rssKB)
	if os.Getenv("SLUICE_SOAK") == "" {
		allowed = max(allowed, 3<<10)
	}
	grownConns := max(0, end.inbound+end.outbound-start.inbound-start.outbound)
	allowed += float64(hdConnKB * grownConns)
	if float64(end.rssKB-start.rssKB) > allowed {
		t.Errorf("RSS grew %d kB -> %d kB, over the %.0f kB allowed (%d more connections open)",
			start.rssKB, end.rssKB, allowed, grownConns)
	}
	// Goroutines are compared net of those the open connections hold, so
	// connections a busy moment opened do not count, and a goroutine leaked
	// per good reload (about 10 between the windows in the short CI run) or
	// per thousand requests exceeds the slack of 5 (the floor moved by 2 at
	// most in runs under load 8). On a busy machine the late
	// samples can catch requests and a reload still in flight, which hold
	// goroutines that are not leaked: those end once the load has, so the
	// count is read again after it, until it settles or 10 s pass. A leaked
	// goroutine does not end.
	limit := start.goroutines + 5
	settled := time.Now()
	for end.goroutines > limit && time.Since(settled) < 10*time.Second {
		time.Sleep(200 * time.Millisecond)
		s, err := hdSampleProcess(g)
		if err != nil {
			t.Fatalf("sampling the gateway: %v", err)
		}
		end.goroutines = s.goroutines - s.hdConnGoroutines()
	}
	if end.goroutines > limit {
		t.Errorf("goroutines beyond the open connections' grew %.0f -> %.0f, and stayed there for 10 s after the load ended",
			start.goroutines, end.goroutines)
	}
}
