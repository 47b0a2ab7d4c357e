package main

// -instructions: user-space instructions per request, counted by
// valgrind's callgrind, for sluice and its floors over HTTP/1.1, HTTPS/1.1
// and h2. CPU time on this VM moves by a fifth from run to run and by 2x
// between rounds (docs/forwarding.md); an instruction count hardly does:
// the same binary under the same requests gave counts within 4 % over
// HTTP/1.1 (more over h2), whatever else the machine was doing. It leaves
// out the kernel (about half of a request's CPU time here, and the same
// for every Go front: equal system calls per request), so its ratios are
// those of the user-space work, larger than those of CPU time.
//
//	go run ./e2e/bench -instructions            # 3 rounds of 6,000 requests per protocol
//	go run ./e2e/bench -instructions -alt BIN   # and another sluice build, for an A/B of a change
//	go run ./e2e/bench -instructions -keep      # and keep the dumps for callgrind_annotate
//
// Besides sluice (the bench's route, flow rule and param rule) it measures
// sluice-norules (the route alone) and sluice-nofields (the rules with
// blockResponse.rateLimitHeaders: false), which tell what the rules and
// their RateLimit fields cost.
//
// Each front runs alone under callgrind (GOMAXPROCS=1); a fixed count of
// requests from h2load (8 connections; 8 streams each over h2) follows a
// warm-up; callgrind's counters are zeroed before and dumped after each
// measured block (callgrind_control). Go runs under valgrind 3.19 with two
// runtime settings, neither on the measured path: no RDTSCP (which valgrind
// 3.19 cannot execute; the runtime reads the clock with RDTSC instead) and
// no asynchronous preemption (whose signal trips callgrind's signal
// bookkeeping). Even so, callgrind 3.19 sometimes stops on its assertion
// "sigNum == vgCallgrind_current_state.sig": always at a front's SIGTERM,
// after the last dump, and in 2 of 10 runs once in the middle of a sluice
// front's load, on a thread returning from a signal: a SIGPIPE (a write to
// a socket whose peer had gone), which Go ignores for sockets. The bench
// then stops and says which front exited; valgrind runs with
// --trace-signals, so the front's log names the signal.

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// callgrindEnv is what a Go front needs to run under valgrind 3.19.
var callgrindEnv = []string{"GOMAXPROCS=1", "GODEBUG=cpu.rdtscp=off,asyncpreemptoff=1"}

// launch is how a Go front named name starts: bin itself, or under
// callgrind (-instructions), its counts written to dir/name.cg.N.
func (o options) launch(dir, name, bin string, args ...string) (env []string, cmd string, argv []string) {
	if !o.instructions {
		return []string{"GOMAXPROCS=1"}, bin, args
	}
	return callgrindEnv, "valgrind", append([]string{"--tool=callgrind", "--trace-signals=yes", "--callgrind-out-file=" + filepath.Join(dir, name+".cg"), bin}, args...)
}

// irRun is one measured block: a front's instructions over n requests.
type irRun struct {
	ir   int64
	n    int
	dump string
}

func (r irRun) perReq() float64 { return float64(r.ir) / float64(r.n) }

var callgrindSummary = regexp.MustCompile(`(?m)^summary: (\d+)$`)

func runInstructions(ctx context.Context, o options, procs *processes, dir, self, sluice, upAddr string) error {
	valgrind, err := exec.LookPath("valgrind")
	if err != nil {
		return errors.New("-instructions needs valgrind (apt-get install -y valgrind)")
	}
	control, err := exec.LookPath("callgrind_control")
	if err != nil {
		return errors.New("-instructions needs callgrind_control (valgrind's package)")
	}
	h2load, err := exec.LookPath("h2load")
	if err != nil {
		return errors.New("-instructions needs h2load (apt-get install -y nghttp2-client)")
	}
	out, _ := exec.Command(valgrind, "--version").Output()
	fronts, err := startFronts(ctx, o, procs, dir, self, sluice, upAddr, "", "")
	if err != nil {
		return err
	}
	fmt.Printf("fronts: %s, each under %s's callgrind on CPU %s (GOMAXPROCS=1); h2load on CPU %s: %d requests per block after %d of warm-up, %d rounds\n",
		frontNames(fronts), strings.TrimSpace(string(out)), o.proxyCPU, o.loadCPU, o.requests, o.requests/3, o.rounds)

	type load struct {
		name string
		tls  bool
		args []string
	}
	loads := []load{{"HTTP/1.1", false, []string{"--h1", "-c8"}}, {"HTTPS/1.1", true, []string{"--h1", "-c8"}}, {"h2", true, []string{"-c8", "-m8"}}}
	if o.edge {
		loads = loads[1:]
	}
	dumps := map[string]int{} // front -> dumps written
	runs := map[string][]irRun{}
	send := func(f front, l load, n int) error {
		scheme, addr := "http", f.plain
		if l.tls {
			scheme, addr = "https", f.tls
		}
		args := append([]string{"-c", o.loadCPU, h2load, "-t1", "-n" + strconv.Itoa(n)}, l.args...)
		cctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
		defer cancel()
		b, err := exec.CommandContext(cctx, "taskset", append(args, fmt.Sprintf("%s://%s/b/100", scheme, addr))...).CombinedOutput()
		if err != nil {
			return fmt.Errorf("h2load: %w: %s", err, b)
		}
		m := h2loadDone.FindStringSubmatch(string(b))
		if m == nil || m[4] != strconv.Itoa(n) {
			return fmt.Errorf("h2load against %s over %s: not all %d requests succeeded%s\n%s", f.name, l.name, n, frontState(f), b)
		}
		return nil
	}
	ctl := func(f front, op string) error {
		b, err := exec.CommandContext(ctx, control, op, strconv.Itoa(f.pid)).CombinedOutput()
		if err != nil || !strings.Contains(string(b), "OK") {
			return fmt.Errorf("callgrind_control %s %s (%d): %v: %s%s", op, f.name, f.pid, err, b, frontState(f))
		}
		return nil
	}
	for round := 0; round < o.rounds; round++ {
		for _, l := range loads {
			for i := range fronts {
				f := fronts[(i+round)%len(fronts)]
				if l.tls && f.tls == "" {
					continue
				}
				if err := send(f, l, max(100, o.requests/3)); err != nil {
					return err
				}
				if err := ctl(f, "-z"); err != nil {
					return err
				}
				if err := send(f, l, o.requests); err != nil {
					return err
				}
				if err := ctl(f, "-d"); err != nil {
					return err
				}
				dumps[f.name]++
				dump := filepath.Join(dir, fmt.Sprintf("%s.cg.%d", f.name, dumps[f.name]))
				ir, err := readSummary(dump)
				if err != nil {
					return err
				}
				key := l.name + "/" + f.name
				runs[key] = append(runs[key], irRun{ir, o.requests, dump})
				fmt.Printf("  round %d  %-9s  %-14s  %8.0f instructions/request\n", round+1, l.name, f.name, float64(ir)/float64(o.requests))
			}
		}
	}

	fmt.Printf("\nuser-space instructions per request (callgrind), median of %d rounds [min–max]; sluice ÷ front of the same round\n", o.rounds)
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "protocol\tfront\tinstr/req\tspread\tsluice ÷ front\tspread\t")
	for _, l := range loads {
		base := runs[l.name+"/sluice"]
		for _, f := range fronts {
			rs := runs[l.name+"/"+f.name]
			if len(rs) == 0 {
				continue
			}
			var per, ratio []float64
			for i, r := range rs {
				per = append(per, r.perReq())
				if i < len(base) {
					ratio = append(ratio, base[i].perReq()/r.perReq())
				}
			}
			p, r := statsOf(per), statsOf(ratio)
			row := fmt.Sprintf("%s\t%s\t%.0f\t%.0f–%.0f\t", l.name, f.name, p.med, p.min, p.max)
			if f.name != "sluice" {
				row += fmt.Sprintf("%.2fx\t%.2f–%.2f\t", r.med, r.min, r.max)
			} else {
				row += "\t\t"
			}
			fmt.Fprintln(tw, row)
		}
	}
	tw.Flush()

	// Where sluice's instructions above each floor go.
	for _, l := range loads {
		for _, floor := range []string{"floor", "proxy-floor"} {
			s, fl := runs[l.name+"/sluice"], runs[l.name+"/"+floor]
			if len(s) == 0 || len(fl) == 0 {
				continue
			}
			if err := printExcess(l.name, floor, s[len(s)-1], fl[len(fl)-1], o.top); err != nil {
				return err
			}
		}
	}
	return nil
}

// printExcess prints where sluice's instructions over protocol exceed
// floor's: the two dumps' self cost per function, sluice minus the floor,
// by area and for the top functions.
func printExcess(protocol, floor string, sluice, base irRun, top int) error {
	a, err := selfCosts(sluice)
	if err != nil {
		return err
	}
	b, err := selfCosts(base)
	if err != nil {
		return err
	}
	type delta struct {
		fn   string
		s, f float64
	}
	var ds []delta
	var total float64
	for fn, v := range a {
		ds = append(ds, delta{fn, v, b[fn]})
		total += v - b[fn]
	}
	for fn, v := range b {
		if _, ok := a[fn]; !ok {
			ds = append(ds, delta{fn, 0, v})
			total -= v
		}
	}
	sort.Slice(ds, func(i, j int) bool { return ds[i].s-ds[i].f > ds[j].s-ds[j].f })
	fmt.Printf("\n%s: sluice's instructions per request above %s's (self cost, last round): %.0f in all\n", protocol, floor, total)
	byArea := map[string][2]float64{}
	for _, d := range ds {
		a := byArea[area(d.fn)]
		byArea[area(d.fn)] = [2]float64{a[0] + d.s, a[1] + d.f}
	}
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "above\tsluice\t"+floor+"\twhere\t")
	for _, ar := range areas {
		v := byArea[ar.name]
		fmt.Fprintf(tw, "%.0f\t%.0f\t%.0f\t%s\t\n", v[0]-v[1], v[0], v[1], ar.name)
	}
	tw.Flush()
	if ds = ds[:min(top, len(ds))]; len(ds) > 0 {
		fmt.Printf("the %d functions furthest above %s:\n", len(ds), floor)
		tw = tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "above\tsluice\t"+floor+"\tfunction\t")
		for _, d := range ds {
			fmt.Fprintf(tw, "%.0f\t%.0f\t%.0f\t%s\t\n", d.s-d.f, d.s, d.f, d.fn)
		}
		tw.Flush()
	}
	return nil
}

// areas group functions by what their instructions are for, first match
// wins; the last takes the rest.
var areas = []struct {
	name   string
	prefix []string
}{
	{"sluice's own code (routing, guards, RateLimit fields, forwarding)", []string{"sluice/"}},
	{"garbage collection (marking, scanning, write barriers)", []string{"runtime.scan", "runtime.tryDefer", "runtime.gc", "runtime.findObject", "runtime.typePointers", "runtime.wbBuf", "runtime.greyobject", "runtime.markBits", "runtime.(*gcWork)", "runtime.(*mspan).markBits", "runtime.spanOf", "runtime.(*spanInlineMarkBits)", "runtime.(*gcBits)", "runtime.bulkBarrier", "runtime.sweep", "runtime.(*mspan).sweep", "runtime.(*sweepLocked)"}},
	{"allocation", []string{"runtime.malloc", "runtime.newobject", "runtime.makeslice", "runtime.growslice", "runtime.(*mspan).writeHeapBits", "runtime.(*mcache)", "runtime.(*mcentral)", "runtime.(*mheap)", "runtime.nextFreeFast", "runtime.memclr", "runtime.rawstring", "runtime.rawbyteslice", "runtime.slicebytetostring", "runtime.concatstring", "runtime.heapSetType", "runtime.publicationBarrier"}},
	{"maps and hashing", []string{"internal/runtime/maps.", "runtime.map", "aeshash", "runtime.memhash", "runtime.strhash"}},
	{"goroutine stacks (growth and copying)", []string{"runtime.pcvalue", "runtime.step", "runtime.(*stkframe)", "runtime.adjust", "runtime.copystack", "runtime.newstack", "runtime.findfunc", "runtime.(*moduledata).textAddr", "runtime.funcInfo", "runtime.(*unwinder)", "runtime.morestack", "runtime.readvarint", "runtime.funcspdelta", "runtime.getStackMap", "runtime.pcdatavalue"}},
	{"clocks, timers and deadlines", []string{"runtime.nanotime", "time.", "runtime.(*timer)", "runtime.(*timers)", "internal/poll.runtime_pollSetDeadline", "internal/poll.setDeadlineImpl", "internal/poll.(*FD).Set", "net.(*conn).Set", "runtime.walltime", "runtime.resetForSleep", "runtime.modtimer", "runtime.deltimer"}},
	{"scheduler, locks, channels, select", []string{"runtime.lock", "runtime.unlock", "runtime.select", "runtime.sel", "runtime.chan", "runtime.gopark", "runtime.goready", "runtime.ready", "runtime.schedule", "runtime.findRunnable", "runtime.execute", "runtime.casgstatus", "runtime.park_m", "runtime.mcall", "runtime.gogo", "runtime.netpoll", "runtime.acquireSudog", "runtime.releaseSudog", "runtime.runqget", "runtime.runqput", "runtime.newproc", "runtime.goexit", "runtime.gfget", "runtime.gfput", "runtime.mPark", "runtime.notesleep", "runtime.futex", "runtime.stopm", "runtime.startm", "runtime.wakep", "runtime.resetspinning", "sync."}},
	{"crypto (TLS records, handshakes, RateLimit pk hashes)", []string{"crypto/", "vendor/golang.org/x/crypto"}},
	{"fasthttp (the upstream exchange)", []string{"github.com/valyala/fasthttp."}},
	{"net/http, textproto, bufio, hpack (serving the client)", []string{"net/http.", "net/textproto.", "bufio.", "vendor/golang.org/x/net/http2/hpack.", "vendor/golang.org/x/net/http/httpguts.", "strings.", "slices.", "sort.", "net/url."}},
	{"the rest (runtime, memmove, syscalls, other)", nil},
}

// area names the entry of areas a function's instructions belong to.
func area(fn string) string {
	for _, a := range areas {
		for _, p := range a.prefix {
			if strings.HasPrefix(fn, p) {
				return a.name
			}
		}
	}
	return areas[len(areas)-1].name
}

// frontState says whether front f still runs, and where its log is: with
// --trace-signals, valgrind logs each signal it delivers, and an assertion
// of its own if it stopped.
func frontState(f front) string {
	state := "still running"
	if !alive(f.pid) {
		state = "exited"
	}
	return fmt.Sprintf(" (%s %s; its log: %s)", f.name, state, filepath.Join(os.TempDir(), "sluice-bench-"+f.name+".log"))
}

// alive reports whether pid runs: not gone, and not a zombie (the bench
// waits for its processes only when it stops them).
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	_, rest, _ := strings.Cut(string(b), ") ")
	return rest != "" && rest[0] != 'Z'
}

// readSummary reads the instruction count a callgrind dump holds.
func readSummary(path string) (int64, error) {
	var b []byte
	var err error
	for range 50 { // callgrind_control returns once the dump is asked for
		if b, err = os.ReadFile(path); err == nil && callgrindSummary.Match(b) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	m := callgrindSummary.FindSubmatch(b)
	if m == nil {
		return 0, fmt.Errorf("%s: no callgrind summary (%v)", path, err)
	}
	return strconv.ParseInt(string(m[1]), 10, 64)
}

// selfCosts is each function's own instructions per request in a dump,
// read from callgrind's format: a cost line belongs to the function named
// by the last fn= line, except the line after calls=, which is the
// inclusive cost of a call. Names are compressed ("fn=(12) name" once,
// then "fn=(12)", in fn= or cfn= lines); a recursion's marker ("f'2") is folded into f.
// callgrind_annotate's listing counts some of Go's costs twice.
func selfCosts(r irRun) (map[string]float64, error) {
	f, err := os.Open(r.dump)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	names := map[string]string{} // "(12)" -> name
	costs := map[string]float64{}
	var fn string
	skip := false
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
		case strings.HasPrefix(line, "fn="):
			id, name, _ := strings.Cut(line[3:], " ")
			if name != "" {
				names[id] = name
			}
			fn = names[id]
			if i := strings.LastIndexByte(fn, '\''); i > 0 {
				fn = fn[:i]
			}
		case strings.HasPrefix(line, "cfn="): // a call's target may name it first
			if id, name, _ := strings.Cut(line[4:], " "); name != "" {
				names[id] = name
			}
		case strings.HasPrefix(line, "calls="):
			skip = true
		case line[0] == '+' || line[0] == '-' || line[0] == '*' || (line[0] >= '0' && line[0] <= '9'):
			if skip {
				skip = false
				continue
			}
			fields := strings.Fields(line)
			if len(fields) < 2 {
				continue
			}
			n, err := strconv.ParseInt(fields[1], 10, 64)
			if err != nil {
				continue
			}
			costs[fn] += float64(n) / float64(r.n)
		}
	}
	return costs, sc.Err()
}
