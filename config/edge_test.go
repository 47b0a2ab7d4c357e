package config_test

import (
	"path/filepath"
	"reflect"
	"testing"

	"sluice/config"
)

// TestLoadEdge loads every edge setting (docs/edge.md): a TLS listener
// with no plain one, several certificates, h2 off on TLS, and routes'
// hosts normalized as they are matched.
func TestLoadEdge(t *testing.T) {
	cfg, err := config.Load("testdata/edge_full.yaml")
	if err != nil {
		t.Fatal(err)
	}
	want := config.TLS{
		Listen: ":8443",
		Certificates: []config.Certificate{
			{CertFile: "certs/shop.crt", KeyFile: "certs/shop.key", Line: 6},
			{CertFile: "/etc/letsencrypt/live/example.com/fullchain.pem", KeyFile: "/etc/letsencrypt/live/example.com/privkey.pem", Line: 7},
		},
		MinVersion:       "1.3",
		ClientCAFile:     "certs/clients.pem",
		ClientCAFileLine: 10, // where validate's and a renewal's errors point
	}
	if cfg.Listen != "" || !reflect.DeepEqual(cfg.TLS, want) {
		t.Errorf("listen %q, tls %+v; want \"\", %+v", cfg.Listen, cfg.TLS, want)
	}
	if cfg.HTTP2.OverTLS() || cfg.HTTP2.H2C {
		t.Errorf("http2 = %+v, want h2 off on TLS and no h2c", cfg.HTTP2)
	}
	if got := cfg.Routes[0].Hosts; !reflect.DeepEqual(got, []string{"shop.example.com", "*.example.com"}) {
		t.Errorf("hosts = %q", got)
	}
	if got, want := cfg.File(cfg.TLS.Certificates[0].CertFile), filepath.Join("testdata", "certs", "shop.crt"); got != want {
		t.Errorf("File(certs/shop.crt) = %q, want %q (relative to the rules file)", got, want)
	}
	if got := cfg.File(cfg.TLS.Certificates[1].KeyFile); got != "/etc/letsencrypt/live/example.com/privkey.pem" {
		t.Errorf("an absolute file is %q", got)
	}

	for name, want := range map[string]string{"app": "http1", "grpc": "h2c", "grpcs": "h2"} {
		if got := cfg.Upstreams[name].Proto(); got != want {
			t.Errorf("upstreams.%s protocol %q, want %q", name, got, want)
		}
	}

	// Without a tls section: no TLS listener, h2 offered by default, no
	// minimum version to show.
	min, err := config.Load("testdata/minimal.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if min.TLS.Listen != "" || min.TLS.MinVersion != "" || !min.HTTP2.OverTLS() || min.HTTP2.H2C {
		t.Errorf("defaults: tls %+v, http2 %+v", min.TLS, min.HTTP2)
	}
}

func TestTLSMinVersionDefault(t *testing.T) {
	cfg, err := config.Parse("x.yaml", []byte(`
tls:
  listen: ":8443"
  certificates: [{certFile: a.crt, keyFile: a.key}]
upstreams: {app: {targets: ["http://127.0.0.1:9001"]}}
routes: [{path: /, upstream: app}]
`))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.TLS.MinVersion != "1.2" || cfg.Listen != config.DefaultListen {
		t.Errorf("minVersion %q, listen %q; want 1.2 and the default listen", cfg.TLS.MinVersion, cfg.Listen)
	}
}
