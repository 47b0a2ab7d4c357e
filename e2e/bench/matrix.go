package main

// The protocol matrix (-all, or -edge for its TLS protocols only): sluice,
// its floors, nginx and Caddy over HTTP/1.1, HTTPS/1.1 and h2 in one run,
// each front one process alone on the proxy CPU serving a plain and a TLS
// listener, interleaved round by round, one table at the end.
//
//	sluice          the binary: fast path, a never-blocking qps rule and hot-param rule
//	floor           net/http server (TLS and h2 by ALPN on its TLS listener) + fasthttp.HostClient, no rules
//	proxy-floor     the floor with a correct proxy's header semantics (proxy_floor.go): what any gateway of this design pays
//	fasthttp-floor  fasthttp server + fasthttp.HostClient (HTTP/1.1 only: fasthttp serves no h2)
//	nginx           one process, limit_req that never rejects, ssl + http2
//	caddy           reverse_proxy, GOMAXPROCS=1, h1 + h2; no rate limiting (Caddy ships none)
//
// All TLS fronts serve the bench's ECDSA P-256 certificate; TLS 1.3 with
// AES-128-GCM is what every client here negotiates with each of them.
//
// By default each front serves all the load can send (closed loop), so a
// slower front leaves the load's CPU idle more often. -pace 4ms instead has
// every wrk connection wait 4 ms after each answer, so that every front is
// offered the same rate (64 connections: under 16,000 requests/s, 12,700 to
// 13,300 measured) and idles alike between requests; h2load cannot pace, so
// h2 is left out then.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// protocol is one client protocol of the matrix.
type protocol struct {
	name string // "HTTP/1.1", "HTTPS/1.1", "h2"
	tls  bool
	run  func(ctx context.Context, u string, d time.Duration) (result, error)
}

// front is one proxy process with its listeners ("" where it has none).
type front struct {
	name       string
	pid        int
	plain, tls string
}

func (f front) addr(p protocol) string {
	if p.tls {
		return f.tls
	}
	return f.plain
}

// matrixProtocolNames names the protocols -all (or -edge) measures, in
// order: matrixProtocols builds them and matrixRuns counts them.
func matrixProtocolNames(o options) []string {
	var names []string
	if !o.edge {
		names = append(names, "HTTP/1.1")
	}
	names = append(names, "HTTPS/1.1")
	if o.pace == 0 { // h2load cannot pace
		names = append(names, "h2")
	}
	return names
}

// matrixProtocols are the protocols -all (or -edge) measures.
func matrixProtocols(o options, wrk, h2load string) ([]protocol, error) {
	if wrk == "" {
		return nil, errors.New("-all and -edge need wrk (apt-get install -y wrk)")
	}
	wrkRun := func(ctx context.Context, u string, d time.Duration) (result, error) { return runWrk(ctx, o, wrk, u, d) }
	var ps []protocol
	for _, name := range matrixProtocolNames(o) {
		switch name {
		case "HTTP/1.1":
			ps = append(ps, protocol{name, false, wrkRun})
		case "HTTPS/1.1":
			ps = append(ps, protocol{name, true, wrkRun})
		case "h2":
			if h2load == "" {
				return nil, errors.New("-all and -edge need h2load (apt-get install -y nghttp2-client)")
			}
			streams := max(1, o.conns/8)
			ps = append(ps, protocol{name, true, func(ctx context.Context, u string, d time.Duration) (result, error) {
				return runH2load(ctx, o, h2load, u, d, 8, streams)
			}})
		}
	}
	return ps, nil
}

// matrixRuns is how many measured runs a round of the matrix has.
func matrixRuns(o options, nginx, caddy bool) int {
	tlsFronts := 3 // sluice, floor, proxy-floor
	if o.pgo != "" {
		tlsFronts++
	}
	if o.alt != "" {
		tlsFronts++
	}
	if nginx {
		tlsFronts++
	}
	if caddy {
		tlsFronts++
	}
	runs := len(matrixProtocolNames(o)) * tlsFronts
	if !o.edge {
		runs++ // the fasthttp-floor, over HTTP/1.1
	}
	return runs
}

// startFronts starts every front the matrix measures, each on the proxy CPU.
func startFronts(ctx context.Context, o options, procs *processes, dir, self, sluice, upAddr, nginx, caddy string) ([]front, error) {
	certFile, keyFile, err := selfSigned(dir)
	if err != nil {
		return nil, err
	}
	names := []string{"sluice"}
	if o.pgo != "" {
		names = append(names, "sluice-pgo")
	}
	if o.alt != "" {
		names = append(names, "sluice-alt")
	}
	if o.instructions {
		// What the bench's rules cost, and what their RateLimit fields do.
		names = append(names, "sluice-norules", "sluice-nofields")
	}
	names = append(names, "floor", "proxy-floor")
	if !o.edge {
		names = append(names, "fasthttp-floor")
	}
	if nginx != "" {
		names = append(names, "nginx")
	}
	if caddy != "" {
		names = append(names, "caddy")
	}
	var fronts []front
	for _, name := range names {
		f := front{name: name, plain: freeAddr(), tls: freeAddr()}
		switch name {
		case "sluice", "sluice-pgo", "sluice-alt", "sluice-norules", "sluice-nofields":
			bin, admin := sluice, "off"
			switch name {
			case "sluice-pgo":
				bin = sluice + "-pgo"
			case "sluice-alt":
				bin = o.alt
			default:
				if o.admin != "" {
					admin = o.admin
				}
			}
			f.pid, err = startSluice(ctx, o, procs, dir, name, bin, f, upAddr, certFile, keyFile, admin)
		case "floor", "proxy-floor":
			env, bin, args := o.launch(dir, name, self, name, f.plain, upAddr, f.tls, certFile, keyFile)
			f.pid, err = procs.start(ctx, name, o.proxyCPU, env, bin, args...)
		case "fasthttp-floor":
			f.tls = ""
			env, bin, args := o.launch(dir, name, self, name, f.plain, upAddr)
			f.pid, err = procs.start(ctx, name, o.proxyCPU, env, bin, args...)
		case "nginx":
			conf, cerr := nginxTLSConf(dir, "nginx-all.conf", "listen "+f.plain+";", f.tls, upAddr, certFile, keyFile, o.conns)
			if cerr != nil {
				return nil, cerr
			}
			f.pid, err = procs.start(ctx, name, o.proxyCPU, nil, nginx, "-p", dir, "-c", conf, "-e", filepath.Join(dir, "nginx-error.log"))
		case "caddy":
			conf, cerr := caddyConf(dir, f.plain, f.tls, upAddr, certFile, keyFile)
			if cerr != nil {
				return nil, cerr
			}
			home := filepath.Join(dir, "caddy-home")
			f.pid, err = procs.start(ctx, name, o.proxyCPU,
				[]string{"GOMAXPROCS=1", "HOME=" + home, "XDG_DATA_HOME=" + home, "XDG_CONFIG_HOME=" + home},
				caddy, "run", "--config", conf)
		}
		if err != nil {
			return nil, err
		}
		for _, size := range o.sizes {
			if err := waitHTTP(ctx, fmt.Sprintf("http://%s/b/%d", f.plain, size), size); err != nil {
				return nil, fmt.Errorf("%s: %w", name, err)
			}
			if f.tls != "" {
				if err := waitHTTPS(ctx, fmt.Sprintf("https://%s/b/%d", f.tls, size), size); err != nil {
					return nil, fmt.Errorf("%s: %w", name, err)
				}
			}
		}
		fronts = append(fronts, f)
	}
	return fronts, nil
}

// startSluice starts the sluice binary bin as front f: the fast path, the
// bench's two never-blocking rules, f's plain and TLS listeners.
func startSluice(ctx context.Context, o options, procs *processes, dir, name, bin string, f front, upAddr, certFile, keyFile, admin string) (int, error) {
	rules := filepath.Join(dir, name+"-all.yaml")
	body := sluiceRules("http://"+upAddr, "fast")
	switch name {
	case "sluice-norules": // the route alone
		body, _, _ = strings.Cut(body, "flowRules:")
	case "sluice-nofields": // the rules without their RateLimit fields
		body += "blockResponse:\n  rateLimitHeaders: false\n"
	}
	body = strings.Replace(body, "upstreams:", fmt.Sprintf(
		"tls:\n  listen: %q\n  certificates: [{certFile: %q, keyFile: %q}]\nupstreams:", f.tls, certFile, keyFile), 1)
	if err := os.WriteFile(rules, []byte(body), 0o644); err != nil {
		return 0, err
	}
	env, bin, args := o.launch(dir, name, bin, "-config", rules, "-listen", f.plain, "-admin", admin, "-log-level", "warn")
	return procs.start(ctx, name, o.proxyCPU, env, bin, args...)
}

// caddyConf writes a Caddy JSON config: reverse_proxy to the upstream on a
// plain (h1) and a TLS (h1, h2) server, keep-alive to the upstream with an
// idle pool as large as the others', no admin endpoint, no automatic HTTPS,
// no access log, its storage in dir.
func caddyConf(dir, plain, tlsAddr, upAddr, certFile, keyFile string) (string, error) {
	proxy := []map[string]any{{
		"handler":   "reverse_proxy",
		"upstreams": []map[string]any{{"dial": upAddr}},
		"transport": map[string]any{"protocol": "http", "keep_alive": map[string]any{"max_idle_conns_per_host": 1024}},
	}}
	routes := []map[string]any{{"handle": proxy}}
	conf := map[string]any{
		"admin":   map[string]any{"disabled": true},
		"logging": map[string]any{"logs": map[string]any{"default": map[string]any{"level": "WARN"}}},
		"storage": map[string]any{"module": "file_system", "root": filepath.Join(dir, "caddy-data")},
		"apps": map[string]any{
			"http": map[string]any{"servers": map[string]any{
				"plain": map[string]any{"listen": []string{plain}, "routes": routes, "protocols": []string{"h1"},
					"automatic_https": map[string]any{"disable": true}},
				"tls": map[string]any{"listen": []string{tlsAddr}, "routes": routes, "protocols": []string{"h1", "h2"},
					"automatic_https":         map[string]any{"disable": true},
					"tls_connection_policies": []map[string]any{{"default_sni": "127.0.0.1"}}},
			}},
			"tls": map[string]any{"certificates": map[string]any{
				"load_files": []map[string]any{{"certificate": certFile, "key": keyFile}},
			}},
		},
	}
	b, err := json.MarshalIndent(conf, "", "  ")
	if err != nil {
		return "", err
	}
	p := filepath.Join(dir, "caddy.json")
	return p, os.WriteFile(p, b, 0o644)
}

// runMatrix measures every front over every protocol, round by round, and
// prints the table.
func runMatrix(ctx context.Context, o options, procs *processes, dir, self, sluice, upAddr, wrk, nginx, caddy string) error {
	h2load, _ := exec.LookPath("h2load")
	protos, err := matrixProtocols(o, wrk, h2load)
	if err != nil {
		return err
	}
	fronts, err := startFronts(ctx, o, procs, dir, self, sluice, upAddr, nginx, caddy)
	if err != nil {
		return err
	}
	load := fmt.Sprintf("wrk -t1 -c%d; h2load 8 connections x %d streams", o.conns, max(1, o.conns/8))
	if o.pace > 0 {
		load = fmt.Sprintf("wrk -t1 -c%d", o.conns)
	}
	fmt.Printf("fronts: %s; each alone on CPU %s (GOMAXPROCS=1, one nginx worker); upstream and load (%s) on CPU %s\n",
		frontNames(fronts), o.proxyCPU, load, o.loadCPU)
	fmt.Printf("%v per run (+%v warm-up), %d interleaved rounds, bodies %v\n", o.duration, o.warmup, o.rounds, o.sizes)
	if o.pace > 0 {
		fmt.Printf("paced: each wrk connection waits %v after an answer, so every front is offered the same rate, under %.0f requests/s (the answers' latency and wrk's timers add to the wait); no h2 (h2load cannot pace)\n",
			o.pace, float64(o.conns)/o.pace.Seconds())
	}
	if caddy != "" {
		fmt.Println("caddy does no rate limiting (it ships none); sluice has a qps and a hot-param rule, nginx limit_req, all never blocking")
	}
	if o.admin != "" {
		fmt.Printf("sluice's admin is on %s: go tool pprof 'http://%s/debug/pprof/profile?seconds=10' during a run\n", o.admin, o.admin)
	}
	fmt.Printf("load average at start: %s\n", loadavg())
	results := map[string][]result{} // protocol/front/size
	for round := 0; round < o.rounds; round++ {
		for _, p := range protos {
			var fs []front
			for _, f := range fronts {
				if f.addr(p) != "" {
					fs = append(fs, f)
				}
			}
			for _, size := range o.sizes {
				for i := range fs {
					f := fs[(i+round)%len(fs)] // rotated, so no front always runs first
					scheme := "http"
					if p.tls {
						scheme = "https"
					}
					u := fmt.Sprintf("%s://%s/b/%d", scheme, f.addr(p), size)
					// A warm-up may finish nothing on a busy machine (a second
					// of TLS handshakes); only the measured run must.
					_, _ = p.run(ctx, u, o.warmup)
					before, cpu0 := cpuTicks(f.pid), readCPUStat(o.proxyCPU)
					r, err := p.run(ctx, u, o.duration)
					if err != nil {
						return fmt.Errorf("%s %s: %w", p.name, f.name, err)
					}
					used := cpuTicks(f.pid) - before
					if r.requests > 0 {
						r.cpuPerReq = float64(used) * 1e6 / float64(clockTicks()) / float64(r.requests)
					}
					r.others, r.steal = cpu0.since(used)
					key := fmt.Sprintf("%s/%s/%d", p.name, f.name, size)
					results[key] = append(results[key], r)
					fmt.Printf("  round %d %-9s %-14s %6dB  %8.0f req/s  cpu %6.1f µs/req  CPU %s others %3.0f%% steal %2.0f%%  errors %d\n",
						round+1, p.name, f.name, size, r.rps, r.cpuPerReq, o.proxyCPU, 100*r.others, 100*r.steal, r.errors)
				}
			}
		}
	}
	fmt.Printf("load average at end: %s\n\n", loadavg())
	matrixReport(os.Stdout, o, protos, fronts, results)
	return nil
}

func frontNames(fs []front) string {
	var n []string
	for _, f := range fs {
		n = append(n, f.name)
	}
	return strings.Join(n, ", ")
}

// matrixReport prints one row per protocol and front (medians and spread
// over the rounds) and the same-round CPU ratios of sluice to each.
func matrixReport(w *os.File, o options, protos []protocol, fronts []front, results map[string][]result) {
	cpu := func(r result) float64 { return r.cpuPerReq }
	// sluiceOver is sluice's CPU per request over f's, taken within each
	// round (both ran back to back, under the same background load).
	sluiceOver := func(p protocol, f string, size int) []float64 {
		s, x := results[fmt.Sprintf("%s/sluice/%d", p.name, size)], results[fmt.Sprintf("%s/%s/%d", p.name, f, size)]
		var v []float64
		for i := range min(len(s), len(x)) {
			if x[i].cpuPerReq > 0 {
				v = append(v, s[i].cpuPerReq/x[i].cpuPerReq)
			}
		}
		return v
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "protocol\tbody\tfront\tCPU µs/req\tspread\treq/s\terrors\tsluice ÷ front\tspread\t")
	for _, p := range protos {
		for _, size := range o.sizes {
			for _, f := range fronts {
				rs := results[fmt.Sprintf("%s/%s/%d", p.name, f.name, size)]
				if len(rs) == 0 {
					fmt.Fprintf(tw, "%s\t%dB\t%s\tn/a\t\t\t\t\t\t\n", p.name, size, f.name)
					continue
				}
				var errs int64
				for _, r := range rs {
					errs += r.errors
				}
				c := stats(rs, cpu)
				ratio, rspread := "", ""
				if f.name != "sluice" {
					rt := statsOf(sluiceOver(p, f.name, size))
					ratio, rspread = fmt.Sprintf("%.2fx", rt.med), fmt.Sprintf("%.2f–%.2f", rt.min, rt.max)
				}
				fmt.Fprintf(tw, "%s\t%dB\t%s\t%.1f\t%.1f–%.1f\t%.0f\t%d\t%s\t%s\t\n", p.name, size, f.name, c.med, c.min, c.max,
					stats(rs, func(r result) float64 { return r.rps }).med, errs, ratio, rspread)
			}
		}
	}
	tw.Flush()

	fmt.Fprintf(w, "\nsluice's CPU µs/request ÷ each front's, same-round ratio, median of %d rounds [min–max]; target: ≤ 1.05x the floor of the same front\n", o.rounds)
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	head := "protocol\tbody\t"
	for _, f := range fronts[1:] {
		head += "÷ " + f.name + "\t"
	}
	fmt.Fprintln(tw, head+"≤ 1.05x floor\t")
	for _, p := range protos {
		for _, size := range o.sizes {
			line := fmt.Sprintf("%s\t%dB\t", p.name, size)
			verdict := ""
			for _, f := range fronts[1:] {
				v := sluiceOver(p, f.name, size)
				if len(v) == 0 {
					line += "n/a\t"
					continue
				}
				rt := statsOf(v)
				line += fmt.Sprintf("%.2fx [%.2f–%.2f]\t", rt.med, rt.min, rt.max)
				if f.name == "floor" {
					verdict = "no"
					if rt.med <= 1.05 {
						verdict = "yes"
					}
				}
			}
			fmt.Fprintln(tw, line+verdict+"\t")
		}
	}
	tw.Flush()

	var others, steal []float64
	for _, rs := range results {
		for _, r := range rs {
			others, steal = append(others, r.others), append(steal, r.steal)
		}
	}
	ot, st := statsOf(others), statsOf(steal)
	fmt.Fprintf(w, "\nnoise: CPU %s busy outside the front measured: median %.0f%%, max %.0f%% of each run; steal median %.0f%%, max %.0f%%\n",
		o.proxyCPU, 100*ot.med, 100*ot.max, 100*st.med, 100*st.max)
}

// summary is the median and range of some values.
type summary struct{ med, min, max float64 }

func statsOf(v []float64) summary {
	if len(v) == 0 {
		return summary{}
	}
	v = append([]float64(nil), v...)
	sort.Float64s(v)
	return summary{med: v[len(v)/2], min: v[0], max: v[len(v)-1]}
}

func stats(rs []result, f func(result) float64) summary {
	var v []float64
	for _, r := range rs {
		v = append(v, f(r))
	}
	return statsOf(v)
}

// cpuStat is one CPU's line of /proc/stat (ticks); ok is false when cpu
// does not name one CPU.
type cpuStat struct {
	cpu                string
	busy, steal, total int64
	ok                 bool
}

func readCPUStat(cpu string) cpuStat {
	if _, err := strconv.Atoi(cpu); err != nil {
		return cpuStat{}
	}
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return cpuStat{}
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 9 || f[0] != "cpu"+cpu {
			continue
		}
		var v [8]int64 // user nice system idle iowait irq softirq steal
		for i := range v {
			v[i], _ = strconv.ParseInt(f[i+1], 10, 64)
		}
		s := cpuStat{cpu: cpu, ok: true, steal: v[7]}
		for i, x := range v {
			s.total += x
			if i != 3 && i != 4 && i != 7 { // idle, iowait, steal
				s.busy += x
			}
		}
		return s
	}
	return cpuStat{}
}

// since is the share of the CPU's time since s that was busy with other
// work than the front's own (used ticks), and the share the hypervisor
// stole.
func (s cpuStat) since(used int64) (others, steal float64) {
	n := readCPUStat(s.cpu)
	if !s.ok || !n.ok || n.total <= s.total {
		return 0, 0
	}
	t := float64(n.total - s.total)
	return max(0, float64(n.busy-s.busy-used)) / t, float64(n.steal-s.steal) / t
}
