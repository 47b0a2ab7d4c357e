package match

import "testing"

// TestHost: every spelling of one host is one value of the host source,
// and the validation of host items (which holds them to this form) agrees
// with what a request gives.
func TestHost(t *testing.T) {
	for _, c := range []struct{ in, host, only string }{
		{"shop.example.com", "shop.example.com", "shop.example.com"},
		{"Shop.Example.COM", "shop.example.com", "Shop.Example.COM"},
		{"shop.example.com.", "shop.example.com", "shop.example.com."},
		{"SHOP.example.:8080", "shop.example", "SHOP.example."},
		{"[2001:DB8::1]:443", "2001:db8::1", "2001:DB8::1"},
		{"[::1]", "::1", "::1"},
		{"2001:db8::1", "2001:db8::1", "2001:db8::1"}, // bare IPv6: no port to strip
		{"10.0.0.1:80", "10.0.0.1", "10.0.0.1"},
		{"[broken", "[broken", "[broken"},
		{"", "", ""},
	} {
		if got := HostOnly(c.in); got != c.only {
			t.Errorf("HostOnly(%q) = %q, want %q", c.in, got, c.only)
		}
		if got := Host(c.in); got != c.host {
			t.Errorf("Host(%q) = %q, want %q", c.in, got, c.host)
		}
	}
	if n := testing.AllocsPerRun(100, func() { _ = Host("shop.example.com:8080") }); n != 0 {
		t.Errorf("Host of a lower-case name allocates %v times, want 0", n)
	}
}
