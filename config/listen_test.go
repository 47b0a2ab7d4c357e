package config

import (
	"slices"
	"strings"
	"testing"
)

// Two listeners clash when the second bind would fail with "address
// already in use", and only then: validate must not refuse what binds.
func TestSharePort(t *testing.T) {
	for _, tc := range []struct {
		a, b  string
		clash bool
	}{
		{":8080", ":8080", true},
		{":8080", "127.0.0.1:8080", true},
		{"[::]:8080", "127.0.0.1:8080", true},
		{"0.0.0.0:8080", "127.0.0.1:8080", true},
		{"0.0.0.0:8080", "localhost:8080", true},
		{"127.0.0.1:80", "127.0.0.1:http", true},
		{"0.0.0.0:8080", "[::1]:8080", true}, // Go listens on both families for 0.0.0.0
		{"127.0.0.1:8080", "10.0.0.1:8080", false},
		{"localhost:8080", "127.0.0.1:8080", true}, // localhost binds 127.0.0.1 (and ::1)
		{"[::ffff:127.0.0.1]:8080", "127.0.0.1:8080", true},
		{"localhost:8080", "10.0.0.1:8080", false},
		{"localhost:8080", "[::1]:8080", false}, // Listen binds one of a name's addresses, IPv4 first
		{"gateway.invalid:8080", "127.0.0.1:8080", false},
		{":8080", ":8081", false},
		{":0", ":0", false}, // each picks a free port
		{"127.0.0.1:0", "127.0.0.1:0", false},
	} {
		if got := sharePort(tc.a, tc.b); got != tc.clash {
			t.Errorf("sharePort(%q, %q) = %v, want %v", tc.a, tc.b, got, tc.clash)
		}
	}
}

// TestOverridesReplaceFileListeners: the command line's -listen and -admin
// replace the file's listen and admin.listen before validation (SPEC 2), so
// a file value they replace never stops a load, and the listeners are
// checked as the gateway opens them; the zero Overrides checks the file as
// written (`sluice validate`).
func TestOverridesReplaceFileListeners(t *testing.T) {
	const rest = "upstreams: {app: {targets: [\"http://127.0.0.1:1\"]}}\nroutes: [{path: /a, upstream: app}]\n"
	str := func(s string) *string { return &s }
	for _, tt := range []struct {
		name        string
		file        string
		ov          Overrides
		want        []string // the errors, exactly; nil: it loads
		listen      string   // with want nil: the Config's listen
		adminListen string
	}{
		{"listen on the admin default port, as written", "listen: \"127.0.0.1:9090\"\n" + rest, Overrides{},
			[]string{`r.yaml:1: admin.listen: must differ from listen (both are "127.0.0.1:9090")`}, "", ""},
		{"listen on the admin default port, both flagged", "listen: \"127.0.0.1:9090\"\n" + rest,
			Overrides{Listen: str("127.0.0.1:0"), AdminListen: str("127.0.0.1:0")}, nil, "127.0.0.1:0", "127.0.0.1:0"},
		{"listen on the admin default port, -admin off", "listen: \"127.0.0.1:9090\"\n" + rest,
			Overrides{Listen: str("127.0.0.1:0"), AdminListen: str("")}, nil, "127.0.0.1:0", ""},
		// net.Listen resolves the host: one it cannot is refused here,
		// not at the next start.
		{"a listen host that is no address", "listen: \"256.1.1.1:8080\"\nadmin: {listen: \" 127.0.0.1:9191\"}\n" + rest, Overrides{},
			[]string{`r.yaml:1: listen: the host must be an IP address or a host name, got "256.1.1.1:8080"`,
				`r.yaml:2: admin.listen: the host must be an IP address or a host name, got " 127.0.0.1:9191"`}, "", ""},
		// A name is not resolved: validate may run where the gateway's
		// names are unknown (a CI job checking a compose file).
		{"a listen host name this machine cannot resolve", "listen: \"gateway.invalid:8080\"\n" + rest, Overrides{}, nil, "gateway.invalid:8080", DefaultAdminListen},
		{"a bad admin.listen, as written", "listen: \"127.0.0.1:0\"\nadmin: {listen: \"bogus\"}\n" + rest, Overrides{},
			[]string{`r.yaml:2: admin.listen: must be host:port or :port, got "bogus"`}, "", ""},
		{"a bad admin.listen replaced", "listen: \"127.0.0.1:0\"\nadmin: {listen: \"bogus\"}\n" + rest,
			Overrides{AdminListen: str("127.0.0.1:0")}, nil, "127.0.0.1:0", "127.0.0.1:0"},
		{"an admin.listen that does not decode, replaced", "listen: \"127.0.0.1:0\"\nadmin: {listen: [1]}\n" + rest,
			Overrides{AdminListen: str("127.0.0.1:0")}, nil, "127.0.0.1:0", "127.0.0.1:0"},
		// Settings that need the plain listener see the one the flag opens.
		{"h2c without listen, as written", "listen: \"\"\nhttp2: {h2c: true}\n" + rest, Overrides{},
			[]string{`r.yaml:1: listen: must not be empty (an address like ":8080")`, `r.yaml:2: http2.h2c: needs listen (h2c is HTTP/2 on the plain listener)`}, "", ""},
		{"h2c without listen, -listen given", "listen: \"\"\nhttp2: {h2c: true}\n" + rest,
			Overrides{Listen: str("127.0.0.1:0")}, nil, "127.0.0.1:0", DefaultAdminListen},
		{"a bad -listen", "listen: \"127.0.0.1:0\"\n" + rest, Overrides{Listen: str("bogus")},
			[]string{`r.yaml: listen: must be host:port or :port, got "bogus" (given on the command line, in place of the file's)`}, "", ""},
		// -listen off: the TLS listener alone serves traffic, as a file
		// with listen "" does; without one, it is the empty listen's error.
		{"-listen off beside tls.listen", "listen: \":8080\"\ntls: {listen: \"127.0.0.1:0\", certificates: [{certFile: c.pem, keyFile: k.pem}]}\n" + rest,
			Overrides{Listen: str(""), AdminListen: str("")}, nil, "", ""},
		{"-listen off, no tls.listen", "listen: \":8080\"\n" + rest, Overrides{Listen: str("")},
			[]string{`r.yaml: listen: must not be empty (an address like ":8080") (given on the command line, in place of the file's)`}, "", ""},
		{"-listen on the file's admin port", "listen: \"127.0.0.1:0\"\nadmin: {listen: \"127.0.0.1:9191\"}\n" + rest,
			Overrides{Listen: str(":9191")},
			[]string{`r.yaml:2: admin.listen: "127.0.0.1:9191" takes the port of listen (":9191", from the command line): each listener needs its own port`}, "", ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := tt.ov.Parse("r.yaml", []byte(tt.file))
			if tt.want != nil {
				if err == nil {
					t.Fatalf("loaded; want %q", tt.want)
				}
				if got := strings.Split(err.Error(), "\n"); !slices.Equal(got, tt.want) {
					t.Errorf("errors:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tt.want, "\n"))
				}
				return
			}
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if cfg.Listen != tt.listen || cfg.AdminListen() != tt.adminListen {
				t.Errorf("listen %q, admin.listen %q; want %q, %q", cfg.Listen, cfg.AdminListen(), tt.listen, tt.adminListen)
			}
		})
	}
}

// TestOverridesApplyToAFleetMerge: a fleet gateway's file holds the
// listeners, so its merge with the rules document takes the overrides as
// Parse does, and the gateway's own file alone (Parse) too.
func TestOverridesApplyToAFleetMerge(t *testing.T) {
	gateway := []byte("listen: \"127.0.0.1:9090\"\nrulesSource: {redis: \"redis://127.0.0.1:6379/0\", key: \"sluice:rules\"}\n")
	doc := []byte("upstreams: {app: {targets: [\"http://127.0.0.1:1\"]}}\nroutes: [{path: /a, upstream: app}]\n")
	off := ""
	listen := "127.0.0.1:0"
	ov := Overrides{Listen: &listen, AdminListen: &off}
	if _, err := ParseWithDocument("g.yaml", gateway, "redis://h/0/k", doc); err == nil {
		t.Fatal("the merge as written loaded; want listen and admin.listen to clash")
	}
	cfg, err := ov.ParseWithDocument("g.yaml", gateway, "redis://h/0/k", doc)
	if err != nil {
		t.Fatalf("the merge with -listen and -admin off: %v", err)
	}
	if cfg.Listen != "127.0.0.1:0" || cfg.AdminListen() != "" {
		t.Errorf("listen %q, admin.listen %q; want the overrides", cfg.Listen, cfg.AdminListen())
	}
	if _, err := ov.Parse("g.yaml", gateway); err != nil {
		t.Errorf("the gateway's file alone with -listen and -admin off: %v", err)
	}
}
