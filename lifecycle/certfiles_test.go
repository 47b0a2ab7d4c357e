package lifecycle

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"sluice/internal/testcert"
)

// TestValidateLoadsTheCertificates: `sluice validate` reads the TLS files
// as the gateway does, so a file the gateway would refuse to start with is
// an error there too, named at its line as a rules file's errors are
// (SPEC section 2: FILE:LINE: message, exit 1); the gateway's own refusal
// names the same line. Before, validate said ok and the gateway refused.
func TestValidateLoadsTheCertificates(t *testing.T) {
	ca := testcert.NewCA(t, "validate CA")
	dir := t.TempDir()
	ca.Server(t, time.Now().Add(time.Hour), "a.test").Write(t, filepath.Join(dir, "a.crt"), filepath.Join(dir, "a.key"))
	write := func(name, data string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("garbage.crt", "not a certificate")
	write("empty-ca.pem", "no PEM here")
	if err := os.WriteFile(filepath.Join(dir, "ca.pem"), ca.PEM, 0o600); err != nil {
		t.Fatal(err)
	}
	up := upstream(t)
	cases := []struct {
		name, tls string
		want      []string // the error lines after FILE: (empty: ok)
	}{
		{"loads", "  certificates:\n    - { certFile: a.crt, keyFile: a.key }\n  clientCAFile: ca.pem\n", nil},
		{"a missing file", "  certificates:\n    - { certFile: a.crt, keyFile: a.key }\n    - { certFile: missing.crt, keyFile: a.key }\n",
			[]string{"8: tls.certificates[1]: "}},
		{"garbage, and a CA without PEM", "  certificates:\n    - { certFile: garbage.crt, keyFile: a.key }\n  clientCAFile: empty-ca.pem\n",
			[]string{"7: tls.certificates[0]: ", "8: tls.clientCAFile: "}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(dir, "rules.yaml")
			write("rules.yaml", "listen: \"127.0.0.1:0\"\nupstreams: {app: {targets: [\""+up+"\"]}}\nroutes: [{path: /a, upstream: app}]\ntls:\n  listen: \"127.0.0.1:0\"\n"+tc.tls)
			var stdout, stderr bytes.Buffer
			code := Validate([]string{path}, &stdout, &stderr)
			if len(tc.want) == 0 {
				if code != 0 {
					t.Fatalf("validate: exit %d, %s", code, stderr.String())
				}
				return
			}
			lines := strings.Split(strings.TrimSpace(stderr.String()), "\n")
			if code != 1 || len(lines) != len(tc.want) {
				t.Fatalf("validate: exit %d, errors:\n%s\nwant exit 1 and %d lines", code, stderr.String(), len(tc.want))
			}
			for i, w := range tc.want {
				if !strings.HasPrefix(lines[i], path+":"+w) {
					t.Errorf("error %q, want it to start %q", lines[i], path+":"+w)
				}
			}
			_, err := New(Options{Config: path, Admin: "off"})
			if err == nil || !strings.Contains(err.Error(), path+":"+tc.want[0]) {
				t.Errorf("the gateway: %v, want it refused at %s", err, path+":"+tc.want[0])
			}
		})
	}
}
