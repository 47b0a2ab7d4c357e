package main

// The edge benchmark (-edge): sluice and nginx both terminating TLS in
// front of the same upstream, with a never-blocking limit each (sluice: a
// qps and a hot-param rule; nginx: limit_req), one core each, measured
// over HTTPS/1.1 with wrk and over h2 with h2load, interleaved in one run.
// Both serve the same ECDSA P-256 certificate with TLS 1.3 and
// TLS_AES_128_GCM_SHA256 (Go's choice on AES-capable CPUs; nginx is told
// to use it too), and both speak HTTP/1.1 with keep-alive to the upstream.

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/http"
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

// edgeLoad is one client protocol.
type edgeLoad struct {
	name string // "https/1.1 wrk", "h2 h2load"
	run  func(ctx context.Context, u string, d time.Duration) (result, error)
}

func runEdge(ctx context.Context, o options, procs *processes, dir, sluice, upAddr, wrk, nginx string) error {
	h2load, _ := exec.LookPath("h2load")
	if wrk == "" || h2load == "" || nginx == "" {
		return errors.New("-edge needs wrk, h2load (nghttp2-client) and nginx installed")
	}
	certFile, keyFile, err := selfSigned(dir)
	if err != nil {
		return err
	}
	targets := []string{"sluice-tls", "nginx-tls"}
	pids, addrs := map[string]int{}, map[string]string{}
	for _, name := range targets {
		addr := freeAddr()
		var pid int
		switch name {
		case "sluice-tls":
			rules := filepath.Join(dir, "sluice-tls.yaml")
			body := strings.Replace(sluiceRules("http://"+upAddr, "fast"), "upstreams:", fmt.Sprintf(
				"tls:\n  listen: %q\n  certificates: [{certFile: %q, keyFile: %q}]\nupstreams:", addr, certFile, keyFile), 1)
			if err := os.WriteFile(rules, []byte(body), 0o644); err != nil {
				return err
			}
			pid, err = procs.start(ctx, name, o.proxyCPU, []string{"GOMAXPROCS=1"},
				sluice, "-config", rules, "-listen", freeAddr(), "-admin", "off", "-log-level", "warn")
		case "nginx-tls":
			conf, cerr := nginxTLSConf(dir, addr, upAddr, certFile, keyFile, o.conns)
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
			if err := waitHTTPS(ctx, fmt.Sprintf("https://%s/b/%d", addr, size), size); err != nil {
				return fmt.Errorf("%s: %w", name, err)
			}
		}
	}
	streams := max(1, o.conns/8)
	loads := []edgeLoad{
		{"https/1.1 wrk", func(ctx context.Context, u string, d time.Duration) (result, error) { return runWrk(ctx, o, wrk, u, d) }},
		{"h2 h2load", func(ctx context.Context, u string, d time.Duration) (result, error) {
			return runH2load(ctx, o, h2load, u, d, 8, streams)
		}},
	}
	fmt.Printf("edge: sluice (fast path, qps + hot-param rules) vs nginx (ssl, http2, limit_req), TLS 1.3 AES-128-GCM, ECDSA P-256;\n"+
		"  wrk %d connections; h2load 8 connections x %d streams; %v per run (+%v warm-up), %d interleaved rounds; proxy on CPU %s, load+upstream on CPU %s\n",
		o.conns, streams, o.duration, o.warmup, o.rounds, o.proxyCPU, o.loadCPU)
	fmt.Printf("load average at start: %s\n", loadavg())
	results := map[string][]result{} // load/target/size
	for round := 0; round < o.rounds; round++ {
		for _, l := range loads {
			for _, size := range o.sizes {
				for i := range targets {
					name := targets[(i+round)%len(targets)]
					u := fmt.Sprintf("https://%s/b/%d", addrs[name], size)
					if _, err := l.run(ctx, u, o.warmup); err != nil {
						return fmt.Errorf("%s %s warm-up: %w", l.name, name, err)
					}
					before := cpuTicks(pids[name])
					r, err := l.run(ctx, u, o.duration)
					if err != nil {
						return fmt.Errorf("%s %s: %w", l.name, name, err)
					}
					if r.requests > 0 {
						r.cpuPerReq = float64(cpuTicks(pids[name])-before) * 1e6 / float64(clockTicks()) / float64(r.requests)
					}
					key := fmt.Sprintf("%s/%s/%d", l.name, name, size)
					results[key] = append(results[key], r)
					fmt.Printf("  round %d %-14s %-10s %6dB  %9.0f req/s  cpu %6.1f µs/req  errors %d\n",
						round+1, l.name, name, size, r.rps, r.cpuPerReq, r.errors)
				}
			}
		}
	}
	fmt.Printf("load average at end: %s\n\n", loadavg())

	median := func(v []float64) float64 {
		if len(v) == 0 {
			return 0
		}
		sort.Float64s(v)
		return v[len(v)/2]
	}
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "client\tbody\ttarget\treq/s\tCPU µs/req\terrors\tsluice/nginx CPU\t")
	for _, l := range loads {
		for _, size := range o.sizes {
			for _, name := range targets {
				rs := results[fmt.Sprintf("%s/%s/%d", l.name, name, size)]
				var rps, cpu []float64
				var errs int64
				for _, r := range rs {
					rps, cpu, errs = append(rps, r.rps), append(cpu, r.cpuPerReq), errs+r.errors
				}
				ratio := ""
				if name == "sluice-tls" {
					// Same-round ratio, then the median, as in the plain benchmark.
					ns := results[fmt.Sprintf("%s/nginx-tls/%d", l.name, size)]
					var v []float64
					for i := range min(len(rs), len(ns)) {
						if ns[i].cpuPerReq > 0 {
							v = append(v, rs[i].cpuPerReq/ns[i].cpuPerReq)
						}
					}
					ratio = fmt.Sprintf("%.2fx", median(v))
				}
				fmt.Fprintf(tw, "%s\t%dB\t%s\t%.0f\t%.1f\t%d\t%s\t\n", l.name, size, name, median(rps), median(cpu), errs, ratio)
			}
		}
	}
	return tw.Flush()
}

var (
	h2loadDone   = regexp.MustCompile(`requests: (\d+) total, (\d+) started, (\d+) done, (\d+) succeeded, (\d+) failed, (\d+) errored, (\d+) timeout`)
	h2loadFinish = regexp.MustCompile(`finished in ([0-9.]+)(s|ms), ([0-9.]+) req/s`)
)

// runH2load runs h2load for d: conns connections, streams concurrent
// streams each, on the load CPU; non-2xx answers count as errors.
func runH2load(ctx context.Context, o options, h2load, u string, d time.Duration, conns, streams int) (result, error) {
	secs := max(1, int(d.Round(time.Second)/time.Second))
	cctx, cancel := context.WithTimeout(ctx, d+20*time.Second)
	defer cancel()
	cmd := exec.CommandContext(cctx, "taskset", "-c", o.loadCPU, h2load, "-t1", "-c"+strconv.Itoa(conns), "-m"+strconv.Itoa(streams),
		"-D", strconv.Itoa(secs), u)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return result{}, fmt.Errorf("h2load: %w: %s", err, out)
	}
	s := string(out)
	m, f := h2loadDone.FindStringSubmatch(s), h2loadFinish.FindStringSubmatch(s)
	if m == nil || f == nil {
		return result{}, fmt.Errorf("h2load output not understood:\n%s", s)
	}
	var r result
	n := func(s string) int64 { v, _ := strconv.ParseInt(s, 10, 64); return v }
	// Failed (non-2xx/3xx), errored and timed-out requests are errors.
	r.requests, r.errors = n(m[3]), n(m[5])+n(m[6])+n(m[7])
	r.rps, _ = strconv.ParseFloat(f[3], 64)
	if r.rps == 0 {
		return r, fmt.Errorf("h2load: no requests done:\n%s", s)
	}
	return r, nil
}

// nginxTLSConf is nginxConf with the listener on TLS and HTTP/2.
func nginxTLSConf(dir, addr, upAddr, cert, key string, conns int) (string, error) {
	listen := fmt.Sprintf(`listen %s ssl http2;
    ssl_certificate %s;
    ssl_certificate_key %s;
    ssl_protocols TLSv1.2 TLSv1.3;
    ssl_conf_command Ciphersuites TLS_AES_128_GCM_SHA256;
    ssl_session_cache shared:SSL:1m;
    keepalive_requests 1000000;
    http2_max_requests 1000000;`, addr, cert, key)
	return writeNginxConf(dir, "nginx-tls.conf", listen, upAddr, conns)
}

// selfSigned writes an ECDSA P-256 certificate for 127.0.0.1 into dir.
func selfSigned(dir string) (certFile, keyFile string, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return "", "", err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "bench"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return "", "", err
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return "", "", err
	}
	certFile, keyFile = filepath.Join(dir, "bench.crt"), filepath.Join(dir, "bench.key")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
		return "", "", err
	}
	return certFile, keyFile, os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), 0o600)
}

// waitHTTPS is waitHTTP over TLS, trusting the bench's own certificate.
func waitHTTPS(ctx context.Context, u string, size int) error {
	c := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	defer c.CloseIdleConnections()
	return waitReady(ctx, c, u, size)
}
