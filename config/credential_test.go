package config

import "testing"

// TestCredentialSources: the sources whose values the admin API keeps from
// a reader who could not write. Authorization is caught by "auth"; a
// composite key is one if any part is.
func TestCredentialSources(t *testing.T) {
	for _, tc := range []struct {
		param string
		want  bool
	}{
		{"header:Authorization", true},
		{"header:proxy-authorization", true},
		{"header:Cookie", true},
		{"cookie:lang", true},
		{"header:X-Api-Key", true},
		{"header:X_API_KEY", true},
		{"query:access_token", true},
		{"query:apiKey", true},
		{"query:sig", false},
		{"query:pwd", true},
		{"query:X-Amz-Signature", true},
		{"path:sessionId", true},
		{"header:X-Password", true},
		{"header:X-Jwt-Assertion", true},
		{"ip+header:X-Auth-Token", true},
		{"header:X-Tenant", false},
		{"query:id", false},
		{"path:orderId", false},
		{"host", false},
		{"ip", false},
		{"ip+header:X-Tenant", false},
	} {
		k, err := ParseKey(tc.param)
		if err != nil {
			t.Fatal(err)
		}
		if got := k.Credential(); got != tc.want {
			t.Errorf("%s: Credential() = %v, want %v", tc.param, got, tc.want)
		}
	}
}
