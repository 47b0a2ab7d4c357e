package main

// -profile FILE: a CPU profile of sluice under the matrix's load, the input
// of profile-guided optimization. Then -pgo FILE measures a build with it
// beside the plain build:
//
//	go run ./e2e/bench -profile /tmp/sluice.pgo -duration 10s
//	go run ./e2e/bench -all -pgo /tmp/sluice.pgo -rounds 5
//
// The repository ships no default.pgo: measured, it saved 5 % over HTTP/1.1
// and cost 8 % over h2 (docs/forwarding.md).

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"time"
)

func profileSluice(ctx context.Context, o options, procs *processes, dir, self, sluice, upAddr, wrk string) error {
	h2load, _ := exec.LookPath("h2load")
	protos, err := matrixProtocols(o, wrk, h2load)
	if err != nil {
		return err
	}
	certFile, keyFile, err := selfSigned(dir)
	if err != nil {
		return err
	}
	f := front{name: "sluice", plain: freeAddr(), tls: freeAddr()}
	admin := freeAddr()
	if f.pid, err = startSluice(ctx, o, procs, dir, f.name, sluice, f, upAddr, certFile, keyFile, admin); err != nil {
		return err
	}
	if err := waitHTTP(ctx, "http://"+f.plain+"/b/100", 100); err != nil {
		return err
	}
	if err := waitHTTPS(ctx, "https://"+f.tls+"/b/100", 100); err != nil {
		return err
	}
	url := func(p protocol) string {
		if p.tls {
			return "https://" + f.tls + "/b/100"
		}
		return "http://" + f.plain + "/b/100"
	}
	for _, p := range protos {
		_, _ = p.run(ctx, url(p), o.warmup)
	}

	secs := int((time.Duration(len(protos))*o.duration + time.Second - 1) / time.Second)
	type fetched struct {
		body []byte
		err  error
	}
	got := make(chan fetched, 1)
	go func() {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", admin, secs), nil)
		if err != nil {
			got <- fetched{err: err}
			return
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			got <- fetched{err: err}
			return
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err == nil && resp.StatusCode != http.StatusOK {
			err = fmt.Errorf("%s: %s", resp.Status, b)
		}
		got <- fetched{b, err}
	}()
	fmt.Printf("profiling sluice for %ds on %s: %v of each protocol\n", secs, admin, o.duration)
	for _, p := range protos {
		r, err := p.run(ctx, url(p), o.duration)
		if err != nil {
			return fmt.Errorf("%s: %w", p.name, err)
		}
		fmt.Printf("  %-9s %8.0f req/s  errors %d\n", p.name, r.rps, r.errors)
	}
	g := <-got
	if g.err != nil {
		return fmt.Errorf("fetching the profile: %w", g.err)
	}
	if err := os.WriteFile(o.profile, g.body, 0o644); err != nil {
		return err
	}
	fmt.Printf("wrote %s (%d bytes)\n", o.profile, len(g.body))
	return nil
}
