// Command bench measures sluice's forwarding against its floors, a bare
// httputil.ReverseProxy, nginx and Caddy, interleaved in one run:
//
//	go run ./e2e/bench [-duration 5s] [-rounds 3] [-conns 64] [-sizes 100,65536] [-fasthttp-floor] [-fasthttp-front]
//	go run ./e2e/bench -all [-rounds 5] [-duration 5s] [-admin 127.0.0.1:9091]   # the protocol matrix, see matrix.go
//	go run ./e2e/bench -edge [...]   # the matrix over HTTPS/1.1 and h2 only
//	go run ./e2e/bench -all -pace 4ms [...]   # every front offered the same rate (no h2), see matrix.go
//
// -all measures sluice, the floor of the same front (net/http, over TLS
// and h2 by ALPN too, + fasthttp client), the fasthttp-both floor (HTTP/1.1
// only), nginx (limit_req) and Caddy (reverse_proxy; no rate limiting) over
// HTTP/1.1 and HTTPS/1.1 (wrk) and h2 (h2load), and prints one table: CPU
// µs/request of the front's core (median and min–max over the rounds),
// requests/s, and sluice's CPU per request over each front's, taken within
// each round. The end of a run of `-all -rounds 5 -duration 5s` on a
// 2-core VM shared with other work, load average 25 (docs/forwarding.md
// has the whole table, the noise and the profiles):
//
//	sluice's CPU µs/request ÷ each front's, same-round ratio, median of 5 rounds [min–max]; target: ≤ 1.05x the floor of the same front
//	   protocol  body            ÷ floor   ÷ fasthttp-floor            ÷ nginx            ÷ caddy  ≤ 1.05x floor
//	   HTTP/1.1  100B  1.24x [1.20–1.33]  1.88x [1.50–2.20]  2.31x [1.59–2.59]  0.53x [0.46–0.60]             no
//	  HTTPS/1.1  100B  1.27x [1.21–1.47]                n/a  1.85x [1.35–2.23]  0.55x [0.46–0.59]             no
//	         h2  100B  1.29x [1.21–1.38]                n/a  2.80x [2.45–2.94]  0.55x [0.49–0.56]             no
//
//	noise: CPU 0 busy outside the front measured: median 81%, max 90% of each run; steal median 0%, max 0%
//
// Without -all, each proxy (sluice with the fast path, sluice with the standard path —
// both with a never-blocking qps rule and a never-blocking hot-param rule —,
// the bare ReverseProxy, the design's floor, and nginx when installed) runs alone on CPU 0
// (taskset -c 0, GOMAXPROCS=1, one nginx process); the load generator (wrk
// when installed, else a built-in closed-loop generator) and the upstream
// share CPU 1. For every body size it prints requests/s, p50/p99 latency,
// the proxy's CPU time per request (utime+stime from /proc/<pid>/stat) and
// the ratios sluice/bare and sluice/nginx, as medians over the rounds.
//
// It listens on loopback only, stops by itself (every run is bounded; the
// whole program has a deadline) and stops only the processes it started,
// by PID. nginx and Caddy run from configs it writes into a temp dir, never
// as the system's services. It is not part of `go test`.
//
// The floor is the least any gateway built like sluice can cost: the
// same net/http server and fasthttp.HostClient, with no routing, rules or
// header handling — only the path, Content-Type and Content-Length carried
// across. floor/nginx is therefore the best fast/nginx ratio a net/http
// front end can reach on this machine, and fast/floor is what sluice's own
// work (chi, the checks, full header semantics) costs on top. With
// The floor forwards no request field and carries back no other answer
// field, which no proxy may do; proxy-floor (proxy_floor.go, in -all and
// -instructions) is the same floor with a correct proxy's header semantics,
// so that sluice ÷ proxy-floor is what sluice's routing, rules and RateLimit
// fields cost over any gateway of this design. With
// -fasthttp-floor, the same floor with a fasthttp server in place of
// net/http's (the design issue 9 set aside, for HTTP/2, streaming and chi)
// is measured too, to show what that choice costs. With -fasthttp-front,
// sluice's own Gateway runs behind a fasthttp server through a lean
// adaptor (fasthttp_front.go): what that choice would buy once sluice's
// per-request work is included.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/valyala/fasthttp"
)

func main() {
	if len(os.Args) > 1 {
		switch os.Args[1] {
		case "upstream":
			serveUpstream(os.Args[2])
			return
		case "bare":
			serveBare(os.Args[2], os.Args[3])
			return
		case "floor":
			serveFloor(os.Args[2], os.Args[3], os.Args[4:]...)
			return
		case "proxy-floor":
			serveProxyFloor(os.Args[2], os.Args[3], os.Args[4:]...)
			return
		case "fasthttp-floor":
			serveFasthttpFloor(os.Args[2], os.Args[3])
			return
		case "sluice-fasthttp":
			serveSluiceFasthttp(os.Args[2], os.Args[3])
			return
		case "load":
			runLoadChild(os.Args[2:])
			return
		}
	}
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

type options struct {
	duration time.Duration
	warmup   time.Duration
	rounds   int
	conns    int
	sizes    []int
	proxyCPU string
	loadCPU  string
	useWrk   bool
	useNginx bool
	fhFloor  bool
	fhFront  bool
	all      bool
	edge     bool
	useCaddy bool
	admin    string
	pgo      string
	alt      string
	profile  string
	deadline time.Duration
	// pace, with -all or -edge: each wrk connection waits this long after
	// an answer before its next request; paceScript is the wrk script that
	// says so (written into the run's directory).
	pace       time.Duration
	paceScript string

	instructions bool // count instructions under callgrind instead (instructions.go)
	requests     int  // requests per measured block of -instructions
	top          int  // functions listed per protocol by -instructions
	keep         bool // -instructions leaves its callgrind dumps for callgrind_annotate
}

func run() error {
	var o options
	var sizes string
	flag.DurationVar(&o.duration, "duration", 5*time.Second, "measured load per run")
	flag.DurationVar(&o.warmup, "warmup", time.Second, "unmeasured load before each run")
	flag.IntVar(&o.rounds, "rounds", 3, "interleaved rounds (medians are reported)")
	flag.IntVar(&o.conns, "conns", 64, "concurrent keep-alive connections")
	flag.StringVar(&sizes, "sizes", "100,65536", "response body sizes in bytes")
	flag.StringVar(&o.proxyCPU, "proxy-cpu", "0", "CPU list for the proxy under test")
	flag.StringVar(&o.loadCPU, "load-cpu", "1", "CPU list for the load generator and the upstream")
	flag.BoolVar(&o.useWrk, "wrk", true, "use wrk when installed")
	flag.BoolVar(&o.useNginx, "nginx", true, "include nginx when installed")
	flag.BoolVar(&o.fhFloor, "fasthttp-floor", false, "also measure the floor with a fasthttp server")
	flag.BoolVar(&o.fhFront, "fasthttp-front", false, "also measure sluice's Gateway behind a fasthttp server (an experiment, see fasthttp_front.go)")
	flag.BoolVar(&o.all, "all", false, "measure the protocol matrix instead: sluice, the floors, nginx and Caddy over HTTP/1.1, HTTPS/1.1 and h2 (matrix.go)")
	flag.BoolVar(&o.edge, "edge", false, "the protocol matrix over HTTPS/1.1 and h2 only")
	flag.BoolVar(&o.useCaddy, "caddy", true, "include Caddy in the protocol matrix when installed")
	flag.StringVar(&o.admin, "admin", "", "in the protocol matrix, sluice's admin listener (loopback, for /debug/pprof); default off")
	flag.StringVar(&o.pgo, "pgo", "", "in the protocol matrix, also measure sluice built with this profile (go build -pgo=FILE) as the front sluice-pgo")
	flag.StringVar(&o.alt, "alt", "", "in the protocol matrix, also measure this sluice binary (an A/B of a change: build it from another tree) as the front sluice-alt")
	flag.StringVar(&o.profile, "profile", "", "instead of measuring, write a CPU profile of sluice under the matrix's load (every protocol, -duration each) to this file, for -pgo")
	flag.BoolVar(&o.instructions, "instructions", false, "count user-space instructions per request under valgrind's callgrind instead of CPU time: sluice, the floors (and -alt) over HTTP/1.1, HTTPS/1.1 and h2 (instructions.go)")
	flag.IntVar(&o.requests, "requests", 6000, "with -instructions, requests per measured block")
	flag.IntVar(&o.top, "top", 25, "with -instructions, functions listed where sluice's instructions exceed the floor's")
	flag.BoolVar(&o.keep, "keep", false, "with -instructions, keep the callgrind dumps (their directory is printed) for callgrind_annotate's call trees")
	flag.DurationVar(&o.pace, "pace", 0, "with -all or -edge: each wrk connection waits this long (whole ms) after an answer before its next request, so every front is offered about the same rate (conns ÷ pace) instead of all it can serve; h2 is left out (h2load cannot pace requests)")
	flag.DurationVar(&o.deadline, "deadline", 0, "stop everything after this long (default: from the plan, +2m)")
	flag.Parse()
	sizesSet := false
	flag.Visit(func(f *flag.Flag) { sizesSet = sizesSet || f.Name == "sizes" })
	if (o.all || o.edge) && !sizesSet {
		sizes = "100"
	}
	for _, s := range strings.Split(sizes, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 0 || n > 16<<20 {
			return fmt.Errorf("bad size %q", s)
		}
		o.sizes = append(o.sizes, n)
	}
	if o.duration <= 0 || o.duration > 5*time.Minute || o.rounds < 1 || o.rounds > 20 || o.conns < 1 || o.conns > 4096 {
		return errors.New("duration must be in (0, 5m], rounds in [1, 20], conns in [1, 4096]")
	}
	if o.pace != 0 && (!(o.all || o.edge) || o.pace < time.Millisecond || o.pace > time.Second || o.pace%time.Millisecond != 0) {
		return errors.New("pace must be whole ms in [1ms, 1s], with -all or -edge")
	}
	if _, err := exec.LookPath("taskset"); err != nil {
		return errors.New("taskset (util-linux) is needed to pin processes")
	}

	var wrk, nginx, caddy string
	if o.useWrk {
		wrk, _ = exec.LookPath("wrk")
	}
	if o.useNginx {
		if nginx, _ = exec.LookPath("nginx"); nginx == "" {
			for _, p := range []string{"/usr/sbin/nginx", "/usr/local/sbin/nginx", "/usr/local/nginx/sbin/nginx"} {
				if _, err := os.Stat(p); err == nil {
					nginx = p
					break
				}
			}
		}
	}
	if o.useCaddy {
		caddy, _ = exec.LookPath("caddy")
	}
	targets := []string{"sluice-fast", "sluice-standard", "bare-reverseproxy", "floor"}
	if o.fhFloor {
		targets = append(targets, "fasthttp-floor")
	}
	if o.fhFront {
		targets = append(targets, "sluice-fasthttp")
	}
	if nginx != "" {
		targets = append(targets, "nginx-limit_req")
	}
	runs := len(targets)
	if o.all || o.edge {
		runs = matrixRuns(o, nginx != "", caddy != "")
	}
	if o.profile != "" {
		o.all, o.rounds, o.sizes, runs = true, 1, []int{100}, 3
	}
	perRun := o.duration + o.warmup + 500*time.Millisecond
	if o.instructions {
		if o.requests < 100 || o.requests > 1000000 {
			return errors.New("requests must be in [100, 1000000]")
		}
		o.sizes, nginx, caddy = []int{100}, "", ""
		// 3 protocols x sluice, its two variants, the floors and -alt; under
		// callgrind a request (a third more for the warm-up) costs about 1 ms.
		runs, perRun = 3*6, time.Duration(o.requests)*2*time.Millisecond+time.Second
	}
	plan := time.Duration(o.rounds*len(o.sizes)*runs) * perRun
	if o.deadline == 0 {
		o.deadline = plan + 2*time.Minute
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	dir, err := os.MkdirTemp("", "sluice-bench-")
	if err != nil {
		return err
	}
	if o.keep && o.instructions {
		defer fmt.Printf("\nthe callgrind dumps are kept in %s\n", dir)
	} else {
		defer os.RemoveAll(dir)
	}
	procs := &processes{}
	defer procs.stopAll()
	if o.pace > 0 {
		// wrk calls delay() after each answer, before the connection's next request.
		o.paceScript = filepath.Join(dir, "pace.lua")
		script := fmt.Sprintf("function delay() return %d end\n", o.pace.Milliseconds())
		if err := os.WriteFile(o.paceScript, []byte(script), 0o644); err != nil {
			return err
		}
	}

	self, err := os.Executable()
	if err != nil {
		return err
	}
	root, err := moduleRoot()
	if err != nil {
		return err
	}
	sluice := filepath.Join(dir, "sluice")
	fmt.Printf("building sluice from %s ...\n", root)
	build := exec.CommandContext(ctx, "go", "build", "-o", sluice, ".")
	build.Dir, build.Stdout, build.Stderr = root, os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		return fmt.Errorf("building sluice: %w", err)
	}
	if o.pgo != "" {
		pgo, err := filepath.Abs(o.pgo)
		if err != nil {
			return err
		}
		build := exec.CommandContext(ctx, "go", "build", "-pgo="+pgo, "-o", sluice+"-pgo", ".")
		build.Dir, build.Stdout, build.Stderr = root, os.Stderr, os.Stderr
		if err := build.Run(); err != nil {
			return fmt.Errorf("building sluice with -pgo=%s: %w", pgo, err)
		}
	}
	if o.instructions {
		// go run leaves out the symbols callgrind names functions by.
		self = filepath.Join(dir, "bench")
		build := exec.CommandContext(ctx, "go", "build", "-o", self, "./e2e/bench")
		build.Dir, build.Stdout, build.Stderr = root, os.Stderr, os.Stderr
		if err := build.Run(); err != nil {
			return fmt.Errorf("building the bench with its symbols: %w", err)
		}
	}
	// The deadline starts once the build is done: a cold build on a busy
	// machine can take minutes.
	ctx, cancel := context.WithTimeout(ctx, o.deadline)
	defer cancel()

	// The upstream: one fasthttp server on the load CPU.
	upAddr := freeAddr()
	if _, err := procs.start(ctx, "upstream", o.loadCPU, nil, self, "upstream", upAddr); err != nil {
		return err
	}
	upURL := "http://" + upAddr
	if err := waitHTTP(ctx, upURL+"/b/100", 100); err != nil {
		return fmt.Errorf("upstream: %w", err)
	}

	if o.profile != "" {
		return profileSluice(ctx, o, procs, dir, self, sluice, upAddr, wrk)
	}
	if o.instructions {
		return runInstructions(ctx, o, procs, dir, self, sluice, upAddr)
	}
	if o.all || o.edge {
		return runMatrix(ctx, o, procs, dir, self, sluice, upAddr, wrk, nginx, caddy)
	}

	pids := map[string]int{}
	addrs := map[string]string{}
	for _, name := range targets {
		addr := freeAddr()
		var pid int
		switch name {
		case "sluice-fast", "sluice-standard":
			mode := strings.TrimPrefix(name, "sluice-")
			rules, werr := writeRules(dir, name, upURL, mode)
			if werr != nil {
				return werr
			}
			pid, err = procs.start(ctx, name, o.proxyCPU, []string{"GOMAXPROCS=1", "SLUICE_FORWARDER=" + mode},
				sluice, "-config", rules, "-listen", addr, "-admin", "off", "-log-level", "warn")
		case "sluice-fasthttp":
			rules, werr := writeRules(dir, name, upURL, "fast")
			if werr != nil {
				return werr
			}
			pid, err = procs.start(ctx, name, o.proxyCPU, []string{"GOMAXPROCS=1"}, self, name, addr, rules)
		case "bare-reverseproxy":
			pid, err = procs.start(ctx, name, o.proxyCPU, []string{"GOMAXPROCS=1"}, self, "bare", addr, upURL)
		case "floor", "fasthttp-floor":
			pid, err = procs.start(ctx, name, o.proxyCPU, []string{"GOMAXPROCS=1"}, self, name, addr, upAddr)
		case "nginx-limit_req":
			conf, cerr := nginxConf(dir, addr, upAddr, o.conns)
			if cerr != nil {
				return cerr
			}
			pid, err = procs.start(ctx, name, o.proxyCPU, nil, nginx, "-p", dir, "-c", conf, "-e", filepath.Join(dir, "nginx-error.log"))
		}
		if err != nil {
			return err
		}
		pids[name], addrs[name] = pid, addr
		for _, size := range o.sizes {
			if err := waitHTTP(ctx, fmt.Sprintf("http://%s/b/%d", addr, size), size); err != nil {
				return fmt.Errorf("%s: %w", name, err)
			}
		}
	}

	loader := "built-in closed-loop generator"
	if wrk != "" {
		loader = wrk
	}
	fmt.Printf("load: %s, %d connections, %v per run (+%v warm-up), %d interleaved rounds; proxy on CPU %s, load+upstream on CPU %s\n",
		loader, o.conns, o.duration, o.warmup, o.rounds, o.proxyCPU, o.loadCPU)
	fmt.Printf("load average at start: %s\n", loadavg())

	results := map[string][]result{} // key: target/size
	for round := 0; round < o.rounds; round++ {
		for _, size := range o.sizes {
			// Rotate the order so no target always runs first or last.
			for i := range targets {
				name := targets[(i+round)%len(targets)]
				u := fmt.Sprintf("http://%s/b/%d", addrs[name], size)
				if _, err := measure(ctx, o, wrk, self, u, o.warmup, 0); err != nil {
					return fmt.Errorf("%s warm-up: %w", name, err)
				}
				r, err := measure(ctx, o, wrk, self, u, o.duration, pids[name])
				if err != nil {
					return fmt.Errorf("%s: %w", name, err)
				}
				key := fmt.Sprintf("%s/%d", name, size)
				results[key] = append(results[key], r)
				fmt.Printf("  round %d %-18s %6dB  %9.0f req/s  p50 %-8v p99 %-8v cpu %6.1f µs/req  errors %d\n",
					round+1, name, size, r.rps, r.p50, r.p99, r.cpuPerReq, r.errors)
			}
		}
	}
	fmt.Printf("load average at end: %s\n\n", loadavg())
	report(o, targets, results)
	return nil
}

// result is one measured run.
type result struct {
	rps       float64
	p50, p99  time.Duration
	cpuPerReq float64 // µs of proxy CPU per request
	requests  int64
	errors    int64
	// others and steal are the shares of the proxy CPU's time, over the
	// run, busy with other processes and stolen by the hypervisor.
	others, steal float64
}

// measure runs the load for d and, when pid > 0, the proxy's CPU time over it.
func measure(ctx context.Context, o options, wrk, self, u string, d time.Duration, pid int) (result, error) {
	var before int64
	if pid > 0 {
		before = cpuTicks(pid)
	}
	var r result
	var err error
	if wrk != "" {
		r, err = runWrk(ctx, o, wrk, u, d)
	} else {
		r, err = runLoad(ctx, o, self, u, d)
	}
	if err != nil || pid == 0 {
		return r, err
	}
	if r.requests > 0 {
		r.cpuPerReq = float64(cpuTicks(pid)-before) * 1e6 / float64(clockTicks()) / float64(r.requests)
	}
	return r, nil
}

var (
	wrkRPS      = regexp.MustCompile(`Requests/sec:\s+([0-9.]+)`)
	wrkTotal    = regexp.MustCompile(`([0-9]+) requests in`)
	wrkPct      = regexp.MustCompile(`(?m)^\s+(50|99)%\s+([0-9.]+)(us|ms|s)\s*$`)
	wrkNon2xx   = regexp.MustCompile(`Non-2xx or 3xx responses:\s+([0-9]+)`)
	wrkSockErrs = regexp.MustCompile(`Socket errors: connect ([0-9]+), read ([0-9]+), write ([0-9]+), timeout ([0-9]+)`)
)

func runWrk(ctx context.Context, o options, wrk, u string, d time.Duration) (result, error) {
	secs := max(1, int(d.Round(time.Second)/time.Second))
	cctx, cancel := context.WithTimeout(ctx, d+20*time.Second)
	defer cancel()
	args := []string{"-c", o.loadCPU, wrk, "-t1", "-c" + strconv.Itoa(o.conns),
		"-d" + strconv.Itoa(secs) + "s", "--timeout", "5s", "--latency"}
	if o.paceScript != "" {
		args = append(args, "-s", o.paceScript)
	}
	cmd := exec.CommandContext(cctx, "taskset", append(args, u)...)
	out, err := cmd.Output()
	if err != nil {
		return result{}, fmt.Errorf("wrk: %w: %s", err, out)
	}
	s := string(out)
	var r result
	if m := wrkRPS.FindStringSubmatch(s); m != nil {
		r.rps, _ = strconv.ParseFloat(m[1], 64)
	}
	if m := wrkTotal.FindStringSubmatch(s); m != nil {
		r.requests, _ = strconv.ParseInt(m[1], 10, 64)
	}
	for _, m := range wrkPct.FindAllStringSubmatch(s, -1) {
		v, _ := strconv.ParseFloat(m[2], 64)
		unit := map[string]time.Duration{"us": time.Microsecond, "ms": time.Millisecond, "s": time.Second}[m[3]]
		dur := time.Duration(v * float64(unit))
		if m[1] == "50" {
			r.p50 = dur
		} else {
			r.p99 = dur
		}
	}
	if m := wrkNon2xx.FindStringSubmatch(s); m != nil {
		n, _ := strconv.ParseInt(m[1], 10, 64)
		r.errors += n
	}
	if m := wrkSockErrs.FindStringSubmatch(s); m != nil {
		for _, x := range m[1:] {
			n, _ := strconv.ParseInt(x, 10, 64)
			r.errors += n
		}
	}
	if r.rps == 0 {
		return r, fmt.Errorf("wrk output not understood:\n%s", s)
	}
	return r, nil
}

// runLoad runs the built-in generator as a child on the load CPU.
func runLoad(ctx context.Context, o options, self, u string, d time.Duration) (result, error) {
	cctx, cancel := context.WithTimeout(ctx, d+20*time.Second)
	defer cancel()
	cmd := exec.CommandContext(cctx, "taskset", "-c", o.loadCPU, self, "load", u, strconv.Itoa(o.conns), d.String())
	cmd.Env = append(os.Environ(), "GOMAXPROCS=1")
	out, err := cmd.Output()
	if err != nil {
		return result{}, fmt.Errorf("load: %w", err)
	}
	var j loadOut
	if err := json.Unmarshal(out, &j); err != nil {
		return result{}, fmt.Errorf("load output %q: %w", out, err)
	}
	return result{rps: float64(j.Requests) / j.Seconds, p50: time.Duration(j.P50), p99: time.Duration(j.P99),
		requests: j.Requests, errors: j.Errors}, nil
}

type loadOut struct {
	Requests, Errors int64
	Seconds          float64
	P50, P99         int64
}

// runLoadChild is `bench load URL CONNS DURATION`: a closed loop of CONNS
// workers, one keep-alive connection each, for DURATION; JSON on stdout.
func runLoadChild(args []string) {
	u, err := url.Parse(args[0])
	if err != nil || !strings.HasPrefix(u.Hostname(), "127.") {
		fmt.Fprintln(os.Stderr, "load: loopback URL required")
		os.Exit(2)
	}
	conns, _ := strconv.Atoi(args[1])
	d, _ := time.ParseDuration(args[2])
	hc := &fasthttp.HostClient{Addr: u.Host, MaxConns: conns}
	var mu sync.Mutex
	var all []time.Duration
	var errs int64
	start := time.Now()
	end := start.Add(d)
	var wg sync.WaitGroup
	for i := 0; i < conns; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
			req.SetRequestURI(args[0])
			var lat []time.Duration
			var e int64
			for time.Now().Before(end) {
				t0 := time.Now()
				if err := hc.DoTimeout(req, resp, 5*time.Second); err != nil || resp.StatusCode() != 200 {
					e++
					continue
				}
				lat = append(lat, time.Since(t0))
			}
			mu.Lock()
			all, errs = append(all, lat...), errs+e
			mu.Unlock()
		}()
	}
	wg.Wait()
	secs := time.Since(start).Seconds()
	sort.Slice(all, func(i, j int) bool { return all[i] < all[j] })
	pct := func(p float64) int64 {
		if len(all) == 0 {
			return 0
		}
		return int64(all[min(len(all)-1, int(p*float64(len(all))))])
	}
	json.NewEncoder(os.Stdout).Encode(loadOut{Requests: int64(len(all)), Errors: errs, Seconds: secs, P50: pct(0.50), P99: pct(0.99)})
}

func report(o options, targets []string, results map[string][]result) {
	median := func(key string, f func(result) float64) float64 {
		var v []float64
		for _, r := range results[key] {
			v = append(v, f(r))
		}
		if len(v) == 0 {
			return 0
		}
		sort.Float64s(v)
		return v[len(v)/2]
	}
	rps := func(r result) float64 { return r.rps }
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "body\ttarget\treq/s\tp50\tp99\tCPU µs/req\terrors\t")
	for _, size := range o.sizes {
		for _, name := range targets {
			key := fmt.Sprintf("%s/%d", name, size)
			var errs int64
			for _, r := range results[key] {
				errs += r.errors
			}
			fmt.Fprintf(tw, "%dB\t%s\t%.0f\t%v\t%v\t%.1f\t%d\t\n", size, name, median(key, rps),
				time.Duration(median(key, func(r result) float64 { return float64(r.p50) })).Round(time.Microsecond),
				time.Duration(median(key, func(r result) float64 { return float64(r.p99) })).Round(time.Microsecond),
				median(key, func(r result) float64 { return r.cpuPerReq }), errs)
		}
	}
	tw.Flush()
	fmt.Println()
	// Ratios are taken within each round (the targets of a round ran
	// back to back, under the same background load), then the median.
	ratio := func(size int, a, b string, f func(result) float64) (float64, bool) {
		ra, rb := results[fmt.Sprintf("%s/%d", a, size)], results[fmt.Sprintf("%s/%d", b, size)]
		var v []float64
		for i := range min(len(ra), len(rb)) {
			if d := f(rb[i]); d > 0 {
				v = append(v, f(ra[i])/d)
			}
		}
		if len(v) == 0 {
			return 0, false
		}
		sort.Float64s(v)
		return v[len(v)/2], true
	}
	cpu := func(r result) float64 { return r.cpuPerReq }
	fmt.Printf("ratios (median over %d rounds of the same-round ratio):\n", o.rounds)
	for _, size := range o.sizes {
		line := fmt.Sprintf("  %6dB  requests/s:", size)
		for _, p := range [][2]string{{"sluice-fast", "bare-reverseproxy"}, {"sluice-standard", "bare-reverseproxy"},
			{"sluice-fast", "nginx-limit_req"}, {"sluice-standard", "nginx-limit_req"},
			{"floor", "nginx-limit_req"}, {"sluice-fast", "floor"}, {"fasthttp-floor", "nginx-limit_req"},
			{"sluice-fasthttp", "nginx-limit_req"}, {"sluice-fasthttp", "fasthttp-floor"}} {
			if r, ok := ratio(size, p[0], p[1], rps); ok {
				line += fmt.Sprintf("  %s/%s %.2fx", short(p[0]), short(p[1]), r)
			}
		}
		line += "   CPU per request:"
		for _, p := range [][2]string{{"sluice-fast", "bare-reverseproxy"}, {"sluice-fast", "nginx-limit_req"}, {"floor", "nginx-limit_req"}} {
			if r, ok := ratio(size, p[0], p[1], cpu); ok {
				line += fmt.Sprintf("  %s/%s %.2fx", short(p[0]), short(p[1]), r)
			}
		}
		fmt.Println(line)
	}
}

func short(target string) string {
	if s, ok := map[string]string{"sluice-fast": "fast", "sluice-standard": "standard",
		"bare-reverseproxy": "bare", "nginx-limit_req": "nginx"}[target]; ok {
		return s
	}
	return target
}

// writeRules writes the rules file of target name into dir.
func writeRules(dir, name, upURL, mode string) (string, error) {
	p := filepath.Join(dir, name+".yaml")
	return p, os.WriteFile(p, []byte(sluiceRules(upURL, mode)), 0o644)
}

func sluiceRules(upURL, mode string) string {
	return fmt.Sprintf(`upstreams:
  up:
    targets: [%q]
    timeout: 10s
routes:
  - path: /b/{size}
    upstream: up
    resource: bench
    forwarder: %s
flowRules:
  - resource: bench
    count: 1000000000      # never blocks
paramRules:
  - resource: bench
    param: path:size
    count: 1000000000      # never blocks
`, upURL, mode)
}

// nginxConf renders a one-process nginx (the one PID measured) with
// limit_req never blocking, keep-alive to the upstream, buffers large
// enough that a 64 KiB body never touches disk, everything in dir.
func nginxConf(dir, addr, upAddr string, conns int) (string, error) {
	return writeNginxConf(dir, "nginx.conf", "listen "+addr+";", upAddr, conns)
}

// writeNginxConf writes nginxConf's configuration to dir/name, with listen
// (the listen directive and anything else the server block needs first).
func writeNginxConf(dir, name, listen, upAddr string, conns int) (string, error) {
	conf := fmt.Sprintf(`daemon off;
master_process off;
worker_processes 1;
pid %[1]s/nginx.pid;
error_log %[1]s/nginx-error.log warn;
events { worker_connections %[4]d; }
http {
  access_log off;
  client_body_temp_path %[1]s/client_temp;
  proxy_temp_path %[1]s/proxy_temp;
  fastcgi_temp_path %[1]s/fastcgi_temp;
  uwsgi_temp_path %[1]s/uwsgi_temp;
  scgi_temp_path %[1]s/scgi_temp;
  limit_req_zone $binary_remote_addr zone=bench:1m rate=100000000r/s;
  upstream up { server %[3]s; keepalive %[4]d; }
  server {
    %[2]s
    location / {
      limit_req zone=bench burst=1000000 nodelay;
      proxy_pass http://up;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_buffer_size 16k;
      proxy_buffers 16 16k;
      proxy_busy_buffers_size 32k;
    }
  }
}
`, dir, listen, upAddr, max(conns*2, 1024))
	p := filepath.Join(dir, name)
	return p, os.WriteFile(p, []byte(conf), 0o644)
}

// serveUpstream answers /b/<n> with n bytes (Content-Length set).
func serveUpstream(addr string) {
	bodies := map[int][]byte{}
	var mu sync.Mutex
	h := func(ctx *fasthttp.RequestCtx) {
		p := string(ctx.Path())
		n, err := strconv.Atoi(p[strings.LastIndexByte(p, '/')+1:])
		if err != nil || n < 0 || n > 16<<20 {
			ctx.SetStatusCode(404)
			return
		}
		mu.Lock()
		b := bodies[n]
		if b == nil {
			b = []byte(strings.Repeat("x", n))
			bodies[n] = b
		}
		mu.Unlock()
		ctx.SetContentType("text/plain")
		ctx.SetBody(b)
	}
	srv := &fasthttp.Server{Handler: h, Name: "bench-upstream", Concurrency: 1 << 16}
	if err := srv.ListenAndServe(addr); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

// serveBare is the baseline: a stock net/http server and ReverseProxy, with
// enough idle connections per host that it does not redial under load.
func serveBare(addr, upURL string) {
	target, _ := url.Parse(upURL)
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConns, tr.MaxIdleConnsPerHost = 4096, 1024
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(target)
			pr.SetXForwarded()
		},
		Transport: tr,
	}
	if err := http.ListenAndServe(addr, rp); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

// floorClient is the floors' upstream side: a fasthttp.HostClient, with
// the upstream's own Host and nothing else set. The caller sets the URI
// (from a string or from bytes, so neither floor converts and allocates).
type floorClient struct {
	hc   *fasthttp.HostClient
	host string
}

func newFloorClient(upAddr string) *floorClient {
	return &floorClient{hc: &fasthttp.HostClient{Addr: upAddr, MaxConns: 4096, NoDefaultUserAgentHeader: true}, host: upAddr}
}

func (c *floorClient) do(req *fasthttp.Request, resp *fasthttp.Response) error {
	req.Header.SetHost(c.host)
	return c.hc.Do(req, resp)
}

// serveFloor is the design's floor (see the package comment): net/http
// in, fasthttp.HostClient out, nothing else. With tls = TLSADDR CERT KEY it
// serves the same handler on a TLS listener too, HTTP/1.1 and h2 by ALPN,
// as sluice's tls.listen does (the same server settings that matter: h2's
// MaxConcurrentStreams, the idle timeout).
func serveFloor(addr, upAddr string, tls ...string) {
	up := newFloorClient(upAddr)
	h := func(w http.ResponseWriter, r *http.Request) {
		req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
		defer fasthttp.ReleaseRequest(req)
		defer fasthttp.ReleaseResponse(resp)
		req.SetRequestURI(r.URL.RequestURI())
		if err := up.do(req, resp); err != nil {
			w.WriteHeader(http.StatusBadGateway)
			return
		}
		body := resp.Body()
		hd := w.Header()
		hd["Content-Type"] = []string{string(resp.Header.ContentType())}
		hd["Content-Length"] = []string{strconv.Itoa(len(body))}
		w.WriteHeader(resp.StatusCode())
		_, _ = w.Write(body)
	}
	serveGoFront(&http.Server{Addr: addr, Handler: http.HandlerFunc(h)}, tls)
}

// serveGoFront serves plain's handler on plain, and with tls = TLSADDR
// CERT KEY on a TLS listener too (serveFloorTLS); it exits when either
// stops.
func serveGoFront(plain *http.Server, tls []string) {
	errc := make(chan error, 2)
	if len(tls) == 3 {
		go func() { errc <- serveFloorTLS(tls[0], tls[1], tls[2], plain) }()
	}
	go func() { errc <- plain.ListenAndServe() }()
	fmt.Fprintln(os.Stderr, <-errc)
	os.Exit(1)
}

// serveFasthttpFloor is serveFloor with a fasthttp server in front.
func serveFasthttpFloor(addr, upAddr string) {
	up := newFloorClient(upAddr)
	h := func(ctx *fasthttp.RequestCtx) {
		req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
		defer fasthttp.ReleaseRequest(req)
		defer fasthttp.ReleaseResponse(resp)
		req.SetRequestURIBytes(ctx.RequestURI())
		if err := up.do(req, resp); err != nil {
			ctx.SetStatusCode(http.StatusBadGateway)
			return
		}
		ctx.SetStatusCode(resp.StatusCode())
		ctx.SetContentTypeBytes(resp.Header.ContentType())
		ctx.SetBody(resp.Body())
	}
	srv := &fasthttp.Server{Handler: h, Concurrency: 1 << 16}
	if err := srv.ListenAndServe(addr); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

// processes are the children this run started; stopAll ends exactly those.
type processes struct {
	mu   sync.Mutex
	cmds []*exec.Cmd
}

func (p *processes) start(ctx context.Context, name, cpus string, env []string, bin string, args ...string) (int, error) {
	cmd := exec.Command("taskset", append([]string{"-c", cpus, bin}, args...)...)
	cmd.Env = append(os.Environ(), env...)
	logf, err := os.Create(filepath.Join(os.TempDir(), "sluice-bench-"+name+".log"))
	if err != nil {
		return 0, err
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		return 0, fmt.Errorf("starting %s: %w", name, err)
	}
	p.mu.Lock()
	p.cmds = append(p.cmds, cmd)
	p.mu.Unlock()
	go func() { <-ctx.Done(); p.stopAll() }()
	// taskset execs the program, so the PID is the program's own.
	return cmd.Process.Pid, nil
}

func (p *processes) stopAll() {
	p.mu.Lock()
	cmds := p.cmds
	p.cmds = nil
	p.mu.Unlock()
	for _, c := range cmds {
		_ = c.Process.Signal(syscall.SIGTERM)
	}
	for _, c := range cmds {
		done := make(chan struct{})
		go func() { _ = c.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(3 * time.Second):
			_ = c.Process.Kill()
			<-done
		}
	}
}

func waitHTTP(ctx context.Context, u string, size int) error {
	return waitReady(ctx, http.DefaultClient, u, size)
}

// waitReady polls u with c until it answers 200 with size bytes (15 s at most).
func waitReady(ctx context.Context, c *http.Client, u string, size int) error {
	deadline := time.Now().Add(15 * time.Second)
	var last error
	for time.Now().Before(deadline) && ctx.Err() == nil {
		resp, err := c.Get(u)
		if err == nil {
			n, _ := io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == 200 && int(n) == size {
				return nil
			}
			err = fmt.Errorf("GET %s: %d with %d bytes", u, resp.StatusCode, n)
		}
		last = err
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("not ready: %v", last)
}

func freeAddr() string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// cpuTicks is utime+stime of pid in clock ticks (/proc/<pid>/stat fields 14, 15).
func cpuTicks(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:]) // after "(comm) "
	if len(f) < 13 {
		return 0
	}
	u, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return u + st
}

func clockTicks() int64 {
	out, err := exec.Command("getconf", "CLK_TCK").Output()
	if err == nil {
		if n, err := strconv.ParseInt(strings.TrimSpace(string(out)), 10, 64); err == nil && n > 0 {
			return n
		}
	}
	return 100
}

func loadavg() string {
	b, _ := os.ReadFile("/proc/loadavg")
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

func moduleRoot() (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", err
	}
	mod := strings.TrimSpace(string(out))
	if mod == "" || mod == os.DevNull {
		return "", errors.New("run from inside the sluice module")
	}
	b, err := os.ReadFile(mod)
	if err != nil {
		return "", err
	}
	sc := bufio.NewScanner(strings.NewReader(string(b)))
	if sc.Scan() && strings.TrimSpace(sc.Text()) != "module sluice" {
		return "", errors.New("not the sluice module")
	}
	return filepath.Dir(mod), nil
}
