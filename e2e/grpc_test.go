package e2e

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"sluice/internal/testcert"
)

// grpcUpstream serves gRPC's own health service on loopback (unary Check,
// server-streaming Watch), adding a trailer to every call so that the test
// can see trailers come through. With creds it serves TLS (h2), else h2c.
func grpcUpstream(t *testing.T, creds credentials.TransportCredentials) (string, *health.Server) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	trailer := func(ctx context.Context) { _ = grpc.SetTrailer(ctx, metadata.Pairs("x-upstream", "trailer")) }
	opts := []grpc.ServerOption{
		grpc.UnaryInterceptor(func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
			trailer(ctx)
			return h(ctx, req)
		}),
		grpc.StreamInterceptor(func(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, h grpc.StreamHandler) error {
			ss.SetTrailer(metadata.Pairs("x-upstream", "trailer"))
			return h(srv, ss)
		}),
	}
	if creds != nil {
		opts = append(opts, grpc.Creds(creds))
	}
	s := grpc.NewServer(opts...)
	hs := health.NewServer()
	healthpb.RegisterHealthServer(s, hs)
	go s.Serve(ln)
	t.Cleanup(s.Stop)
	return ln.Addr().String(), hs
}

// TestGRPCThroughSluice: a real gRPC client and server with sluice between
// them, for each way in (h2c on listen, h2 on tls.listen) and each
// upstream protocol (h2c, h2): unary and server-streaming calls pass with
// their trailers, and calls over the flow rule's count, or from an origin an
// authority rule refuses, get RESOURCE_EXHAUSTED naming the resource and the
// reason.
func TestGRPCThroughSluice(t *testing.T) {
	ca := testcert.NewCA(t, "e2e CA")
	dir := t.TempDir()
	edgePair(t, ca, dir, "edge", "plain.test", "secure.test")
	// The h2 upstream's certificate is checked against the system roots:
	// the test CA is made the only one for the sluice process.
	upLeaf := ca.Server(t, time.Now().Add(time.Hour), "127.0.0.1")
	caFile := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(caFile, ca.PEM, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("SSL_CERT_FILE", caFile)

	plainAddr, plainHealth := grpcUpstream(t, nil)
	tlsAddr, tlsHealth := grpcUpstream(t, credentials.NewServerTLSFromCert(&upLeaf.TLS))
	g := startEdge(t, dir, fmt.Sprintf(`
tls:
  listen: "127.0.0.1:0"
  certificates: [{ certFile: edge.crt, keyFile: edge.key }]
http2:
  h2c: true
origin: { from: "header:X-Origin" }
upstreams:
  plain: { targets: ["http://%s"], protocol: h2c }
  secure: { targets: ["https://%s"], protocol: h2 }
routes:
  - { path: /grpc.health.v1.Health/Check, hosts: [plain.test], upstream: plain, resource: check-plain }
  - { path: /grpc.health.v1.Health/Watch, hosts: [plain.test], upstream: plain, resource: watch-plain }
  - { path: /grpc.health.v1.Health/Check, hosts: [secure.test], upstream: secure, resource: check-secure }
  - { path: /grpc.health.v1.Health/Watch, hosts: [secure.test], upstream: secure, resource: watch-secure }
flowRules:
  - { resource: check-plain, count: 3, statIntervalMs: 60000 }
  - { resource: check-secure, count: 3, statIntervalMs: 60000 }
  - { resource: watch-plain, count: 1, statIntervalMs: 60000 }
  - { resource: watch-secure, count: 1, statIntervalMs: 60000 }
authorityRules:
  - { resource: check-plain, strategy: black, limitApp: banned }
  - { resource: check-secure, strategy: black, limitApp: banned }
`, plainAddr, tlsAddr))

	ins := []struct {
		name, target string
		creds        func(host string) credentials.TransportCredentials
	}{
		{"h2c in", strings.TrimPrefix(g.URL, "http://"), func(string) credentials.TransportCredentials { return insecure.NewCredentials() }},
		{"h2 in", g.TLSAddr, func(host string) credentials.TransportCredentials {
			return credentials.NewClientTLSFromCert(ca.Pool(), host)
		}},
	}
	ups := []struct {
		name, host string
		hs         *health.Server
	}{
		{"h2c upstream", "plain.test", plainHealth},
		{"h2 upstream", "secure.test", tlsHealth},
	}
	for i, up := range ups {
		in := ins[i] // each upstream's rules are met once: by one way in
		t.Run(in.name+", "+up.name, func(t *testing.T) {
			conn, err := grpc.NewClient(in.target, grpc.WithTransportCredentials(in.creds(up.host)), grpc.WithAuthority(up.host))
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			hc := healthpb.NewHealthClient(conn)
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()

			// A caller the authority rule refuses reads RESOURCE_EXHAUSTED,
			// as every blocked call does (SPEC section 8), and takes no pass.
			banned := metadata.AppendToOutgoingContext(ctx, "x-origin", "banned")
			if _, err := hc.Check(banned, &healthpb.HealthCheckRequest{}); status.Code(err) != codes.ResourceExhausted ||
				!strings.Contains(status.Convert(err).Message(), "authority") {
				t.Errorf("Check from a refused origin: %v, want ResourceExhausted naming authority", err)
			}

			// Unary: 3 pass with the upstream's trailer, the 4th is refused.
			for n := 1; n <= 4; n++ {
				var tr metadata.MD
				resp, err := hc.Check(ctx, &healthpb.HealthCheckRequest{}, grpc.Trailer(&tr))
				if n <= 3 {
					if err != nil || resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
						t.Fatalf("Check %d: %v %v, want SERVING", n, resp, err)
					}
					if got := tr.Get("x-upstream"); len(got) != 1 || got[0] != "trailer" {
						t.Errorf("Check %d: trailers %v, want x-upstream: trailer", n, tr)
					}
					continue
				}
				st := status.Convert(err)
				if st.Code() != codes.ResourceExhausted || !strings.Contains(st.Message(), "check-") || !strings.Contains(st.Message(), "flow") {
					t.Errorf("Check %d: %v %q, want ResourceExhausted naming the resource and flow", n, st.Code(), st.Message())
				}
			}

			// Server streaming: the first Watch gets each status change as
			// it happens; a second one is refused.
			wctx, wcancel := context.WithCancel(ctx)
			defer wcancel()
			w, err := hc.Watch(wctx, &healthpb.HealthCheckRequest{Service: "orders"})
			if err != nil {
				t.Fatal(err)
			}
			up.hs.SetServingStatus("orders", healthpb.HealthCheckResponse_SERVING)
			for _, want := range []healthpb.HealthCheckResponse_ServingStatus{healthpb.HealthCheckResponse_SERVING, healthpb.HealthCheckResponse_NOT_SERVING} {
				// The first message may be the state before SetServingStatus.
				for {
					m, err := w.Recv()
					if err != nil {
						t.Fatalf("Watch: %v, waiting for %v", err, want)
					}
					if m.GetStatus() == want {
						break
					}
				}
				if want == healthpb.HealthCheckResponse_SERVING {
					up.hs.SetServingStatus("orders", healthpb.HealthCheckResponse_NOT_SERVING)
				}
			}
			wcancel()
			w2, err := hc.Watch(ctx, &healthpb.HealthCheckRequest{Service: "orders"})
			if err == nil {
				_, err = w2.Recv()
			}
			if st := status.Convert(err); st.Code() != codes.ResourceExhausted || !strings.Contains(st.Message(), "watch-") {
				t.Errorf("second Watch: %v %q, want ResourceExhausted", st.Code(), st.Message())
			}
		})
	}
	m := metrics(t, g.gateway)
	for series, want := range map[string]float64{
		`sluice_requests_total{resource="check-plain",result="pass"}`: 3, `sluice_requests_total{resource="check-plain",result="block"}`: 2,
		`sluice_requests_total{resource="check-secure",result="pass"}`: 3, `sluice_requests_total{resource="watch-secure",result="block"}`: 1,
		`sluice_blocked_total{reason="authority",resource="check-secure"}`: 1,
	} {
		if got, ok := m[series]; !ok || got != want {
			t.Errorf("metrics: %s = %v (exported: %v), want %v", series, got, ok, want)
		}
	}
}
