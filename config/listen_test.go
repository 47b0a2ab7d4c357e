package config

import "testing"

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
		{":8080", ":8081", false},
		{":0", ":0", false}, // each picks a free port
		{"127.0.0.1:0", "127.0.0.1:0", false},
	} {
		if got := sharePort(tc.a, tc.b); got != tc.clash {
			t.Errorf("sharePort(%q, %q) = %v, want %v", tc.a, tc.b, got, tc.clash)
		}
	}
}
