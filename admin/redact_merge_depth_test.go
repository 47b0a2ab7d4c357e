package admin

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"
)

// A token behind a chain of merged mappings deeper than the alias bound is
// read by the config decoder, so the raw text must not show it: either it
// is masked or the text is withheld. The bound returned "nothing found",
// and the token was served in clear.
func TestDeepMergeSecretNotLeaked(t *testing.T) {
	var b strings.Builder
	b.WriteString("m0: &m0 {token: s3cr3t-value}\n")
	for i := 1; i <= 20; i++ {
		fmt.Fprintf(&b, "m%d: &m%d {<<: *m%d}\n", i, i, i-1)
	}
	b.WriteString("admin: *m20\n")
	data := []byte(b.String())
	var cfg struct {
		Admin struct {
			Token string `yaml:"token"`
		} `yaml:"admin"`
	}
	if err := yaml.Unmarshal(data, &cfg); err != nil || cfg.Admin.Token != "s3cr3t-value" {
		t.Fatalf("decoder read token %q (%v); the test expects it to", cfg.Admin.Token, err)
	}
	text, ok := redactSecrets(data)
	if ok && strings.Contains(text, "s3cr3t-value") {
		t.Fatalf("the admin token is served unmasked:\n%s", text)
	}
}

// Merges that each merge the level below several times make the lookup's
// work grow as fanout^levels; the alias bound limits depth, not work. The
// raw text endpoint must still answer promptly (masked or withheld).
func TestMergeFanoutBounded(t *testing.T) {
	var b strings.Builder
	b.WriteString("l0: &l0 {x: 1}\n")
	for i := 1; i <= 9; i++ {
		refs := strings.TrimSuffix(strings.Repeat(fmt.Sprintf("*l%d, ", i-1), 10), ", ")
		fmt.Fprintf(&b, "l%d: &l%d {<<: [%s]}\n", i, i, refs)
	}
	b.WriteString("admin: {<<: *l9}\n")
	data := []byte(b.String())
	done := make(chan struct{})
	go func() {
		redactSecrets(data)
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("redactSecrets still running after 5s (exponential merge walk)")
	}
}
