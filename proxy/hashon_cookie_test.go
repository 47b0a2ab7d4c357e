package proxy_test

import (
	"testing"

	"github.com/rs/zerolog"

	"sluice/config"
	"sluice/proxy"
)

// TestOneCookieIsOneValueToHashOn: SPEC §Sources says a source
// sees one value per occurrence, and only a source that must give one value
// with several distinct ones is 400. The new cookie reader adds every
// server's reading of a cookie as a value, so ONE cookie can give two: a
// value holding a ',' (net/http and Python read sid=a,b as "a,b", Rack 2 as
// "a"), a Latin-1 escape as JavaScript's escape() writes it (%E9 is no
// UTF-8: "\xe9" and "%E9"). With hashOn: cookie:sid such a client got 400.
// A source that must give one value now reads a cookie's value once, as
// net/http does; two cookies of the name with distinct values are still 400.
func TestOneCookieIsOneValueToHashOn(t *testing.T) {
	cfg, err := config.Parse("one.yaml", []byte(`
upstreams:
  up:
    targets: ["http://a.invalid", "http://b.invalid"]
    balance: hash
    hashOn: cookie:sid
routes:
  - path: /item/{id}
    upstream: up
    resource: item
`))
	if err != nil {
		t.Fatal(err)
	}
	up := &stubUpstream{}
	up.status.Store(200)
	g := proxy.New(proxy.Deps{Log: zerolog.Nop(), Clock: &fakeClock{}, Transport: up, Forwarder: "standard"})
	if err := g.Load(cfg); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		cookie string
		status int
	}{
		{"sid=a,b", 200},
		{"sid=en,fr; theme=dark", 200},
		{"sid=Jos%E9", 200},
		{"sid=%zz%41", 200},
		{`sid="abc`, 200},
		// still ambiguous: two occurrences
		{"sid=a; sid=b", 400},
		{"sid=a; s%69d=b", 400},
	} {
		if status, _ := sendHost(g, "", "/item/x", "Cookie", c.cookie); status != c.status {
			t.Errorf("Cookie %q: %d, want %d", c.cookie, status, c.status)
		}
	}
}

// TestRealHostsServed: the new Host check refuses no real Host
// value: IPv6 literals (a zone too), trailing dots, ports, punycode, '_'.
func TestRealHostsServed(t *testing.T) {
	cfg, err := config.Parse("h.yaml", []byte(`
upstreams:
  up: {targets: ["http://a.invalid"]}
routes:
  - path: /item/{id}
    upstream: up
    resource: item
`))
	if err != nil {
		t.Fatal(err)
	}
	up := &stubUpstream{}
	up.status.Store(200)
	g := proxy.New(proxy.Deps{Log: zerolog.Nop(), Clock: &fakeClock{}, Transport: up, Forwarder: "standard"})
	if err := g.Load(cfg); err != nil {
		t.Fatal(err)
	}
	for _, h := range []string{"[fe80::1%25eth0]:8080", "[fe80::1%eth0]", "[::1]", "example.com.", "Example.COM.:443",
		"xn--bcher-kva.example", "my_host.internal", "10.0.0.1:80", "localhost"} {
		if status, _ := sendHost(g, h, "/item/x"); status != 200 {
			t.Errorf("Host %q: %d", h, status)
		}
	}
}
