package main

// TLS for the protocol matrix (matrix.go): the bench's certificate, the
// floor's TLS listener, nginx's TLS listener and the h2 load (h2load).

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"time"

	"sluice/config"
)

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

// nginxTLSConf is nginxConf with a TLS and HTTP/2 listener on tlsAddr,
// after listen (the plain listener's directive, or "").
func nginxTLSConf(dir, name, listen, tlsAddr, upAddr, cert, key string, conns int) (string, error) {
	listen += fmt.Sprintf(`
    listen %s ssl http2;
    ssl_certificate %s;
    ssl_certificate_key %s;
    ssl_protocols TLSv1.2 TLSv1.3;
    ssl_conf_command Ciphersuites TLS_AES_128_GCM_SHA256;
    ssl_session_cache shared:SSL:1m;
    keepalive_requests 1000000;
    http2_max_requests 1000000;`, tlsAddr, cert, key)
	return writeNginxConf(dir, name, listen, upAddr, conns)
}

// serveFloorTLS serves plain's handler on a TLS listener at addr, HTTP/1.1
// and h2 by ALPN, with sluice's defaults for the server settings that
// apply: h2's MaxConcurrentStreams, the idle timeout, and plain's
// ReadHeaderTimeout (the proxy floor's is sluice's default), so that a
// front's TLS listener sets the same deadlines per request as its plain one
// (without it the proxy floor's TLS listener skipped two of sluice's read
// deadlines a request, about 600 instructions).
func serveFloorTLS(addr, certFile, keyFile string, plain *http.Server) error {
	var protos http.Protocols
	protos.SetHTTP1(true)
	protos.SetHTTP2(true)
	srv := &http.Server{
		Addr:              addr,
		Handler:           plain.Handler,
		Protocols:         &protos,
		ReadHeaderTimeout: plain.ReadHeaderTimeout,
		IdleTimeout:       config.DefaultIdleTimeout,
		HTTP2:             &http.HTTP2Config{MaxConcurrentStreams: config.DefaultMaxConcurrentStreams},
		TLSConfig:         &tls.Config{MinVersion: tls.VersionTLS12, NextProtos: []string{"h2", "http/1.1"}},
	}
	return srv.ListenAndServeTLS(certFile, keyFile)
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
