package main

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"
)

// TestRunRefusesWhatItCannotUse: leftover or unknown arguments and a bad
// SLUICE_FORWARDER exit 2 with a message, before anything starts (the
// gateway here would fail on its missing rules file, with exit 1).
func TestRunRefusesWhatItCannotUse(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "missing.yaml")
	tests := []struct {
		name      string
		args      []string
		forwarder string
		want      string
	}{
		{"a subcommand after a flag", []string{"-config", missing, "validate"}, "", `unexpected argument "validate"`},
		{"a leftover word", []string{"-config", missing, "--", "extra"}, "", `unexpected argument "extra"`},
		{"an unknown flag", []string{"-config", missing, "-bogus"}, "", "flag provided but not defined: -bogus"},
		{"validate with two files", []string{"validate", missing, "other.yaml"}, "", `unexpected argument "other.yaml"`},
		{"a bad SLUICE_FORWARDER", []string{"-config", missing}, "bogus", "SLUICE_FORWARDER"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv(envForwarder, tt.forwarder)
			var stdout, stderr bytes.Buffer
			if code := run(tt.args, &stdout, &stderr); code != 2 {
				t.Errorf("run(%q) = %d, want 2; stderr:\n%s", tt.args, code, stderr.String())
			}
			if !strings.Contains(stderr.String(), tt.want) {
				t.Errorf("stderr %q does not say %q", stderr.String(), tt.want)
			}
		})
	}
}
