package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRunRefusesWhatItCannotUse: leftover or unknown arguments, a bad
// -log-level or -log-format and a bad SLUICE_FORWARDER exit 2 with a message, before anything starts (the
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
		{"validate with an unknown flag", []string{"validate", "-strict", missing}, "", "flag provided but not defined: -strict"},
		{"a bad SLUICE_FORWARDER", []string{"-config", missing}, "bogus", "SLUICE_FORWARDER"},
		// log.level and log.format refuse these in the file; the flags too.
		{"an unknown -log-level", []string{"-config", missing, "-log-level", "loud"}, "", `-log-level: must be one of trace, debug, info, warn, error, got "loud"`},
		{"-log-level warning", []string{"-config", missing, "-log-level", "warning"}, "", `-log-level: must be one of trace, debug, info, warn, error, got "warning"`},
		{"an unknown -log-format", []string{"-config", missing, "-log-format", "fancy"}, "", `-log-format: must be one of json, console, got "fancy"`},
		{"a negative -read-header-timeout", []string{"-config", missing, "-read-header-timeout", "-1s"}, "", `-read-header-timeout: must be > 0 and <= 1h, got -1s`},
		{"a negative -drain-timeout", []string{"-config", missing, "-drain-timeout", "-1s"}, "", `-drain-timeout: must be >= 0, got -1s`},
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

// TestValidatePrintsOneErrorPerLine: SPEC 2 `sluice validate` prints
// "every error as FILE:LINE: message", one a line, even for a quoted key
// holding a line break ("bad\nkey").
func TestValidatePrintsOneErrorPerLine(t *testing.T) {
	path := filepath.Join(t.TempDir(), "rules.yaml")
	data := "listen: \"127.0.0.1:0\"\nupstreams: {app: {targets: [\"http://127.0.0.1:1\"]}}\n" +
		"routes: [{path: /a, upstream: app}]\n\"bad\\nkey\": 1\n"
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	if code := run([]string{"validate", path}, &stdout, &stderr); code != 1 {
		t.Fatalf("validate: exit %d, want 1", code)
	}
	want := path + `:4: "bad\nkey": unknown field`
	if got := strings.TrimRight(stderr.String(), "\n"); got != want {
		t.Errorf("validate printed:\n%s\nwant:\n%s", got, want)
	}
}

// TestValidateHelp: `sluice validate -h` prints its usage and exits 0; it
// used to look for a rules file named "-h". "--" still lets a file whose
// name starts with "-" be checked.
func TestValidateHelp(t *testing.T) {
	for _, arg := range []string{"-h", "-help", "--help"} {
		var stdout, stderr bytes.Buffer
		if code := run([]string{"validate", arg}, &stdout, &stderr); code != 0 {
			t.Errorf("validate %s: exit %d, want 0; stderr:\n%s", arg, code, stderr.String())
		}
		if !strings.Contains(stderr.String(), "usage: sluice validate [FILE | -config FILE]") {
			t.Errorf("validate %s printed %q, want its usage", arg, stderr.String())
		}
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "-rules.yaml")
	if err := os.WriteFile(path, []byte("upstreams: {app: {targets: [\"http://127.0.0.1:9001\"]}}\nroutes: [{path: /, upstream: app}]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Chdir(dir)
	var stdout, stderr bytes.Buffer
	if code := run([]string{"validate", "--", "-rules.yaml"}, &stdout, &stderr); code != 0 {
		t.Errorf("validate -- -rules.yaml: exit %d, want 0; stderr:\n%s", code, stderr.String())
	}
	if !strings.Contains(stdout.String(), "-rules.yaml: ok") {
		t.Errorf("validate -- -rules.yaml printed %q", stdout.String())
	}
}

// TestValidateTakesConfig: `sluice validate -config FILE` checks FILE, as
// the gateway and `sluice rules push|pull` name it with -config; it was
// refused (exit 2, "flag provided but not defined"). FILE and -config
// together are one file too many.
func TestValidateTakesConfig(t *testing.T) {
	dir := t.TempDir()
	good, bad := filepath.Join(dir, "good.yaml"), filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(good, []byte("upstreams: {app: {targets: [\"http://127.0.0.1:9001\"]}}\nroutes: [{path: /, upstream: app}]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bad, []byte("routes: [{path: /, upstream: nowhere}]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		code int
		out  string
	}{
		{[]string{"validate", "-config", good}, 0, good + ": ok"},
		{[]string{"validate", "-config=" + bad}, 1, bad + ":1:"},
		{[]string{"validate", "-config", good, bad}, 2, "unexpected argument"},
	} {
		var stdout, stderr bytes.Buffer
		code := run(c.args, &stdout, &stderr)
		if out := stdout.String() + stderr.String(); code != c.code || !strings.Contains(out, c.out) {
			t.Errorf("sluice %q: exit %d, printed %q; want %d and %q", c.args, code, out, c.code, c.out)
		}
	}
}

// TestHelp: `sluice -h` exits 0, as `sluice validate -h` does, and names
// the subcommands besides the flags (it exited 2 and listed flags only); a
// flag it does not know still exits 2.
func TestHelp(t *testing.T) {
	for _, c := range []struct {
		arg  string
		code int
	}{{"-h", 0}, {"-help", 0}, {"--help", 0}, {"-bogus", 2}} {
		var stdout, stderr bytes.Buffer
		if code := run([]string{c.arg}, &stdout, &stderr); code != c.code {
			t.Errorf("sluice %s: exit %d, want %d", c.arg, code, c.code)
		}
		for _, want := range []string{"sluice validate [FILE]", "sluice rules push|pull", "sluice version", "-config"} {
			if !strings.Contains(stderr.String(), want) {
				t.Errorf("sluice %s printed no %q:\n%s", c.arg, want, stderr.String())
			}
		}
	}
}

// TestVersionTakesNoArgument: `sluice version extra` is a usage error, as
// every other command's stray argument is; it printed the version.
func TestVersionTakesNoArgument(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := run([]string{"version"}, &stdout, &stderr); code != 0 || !strings.HasPrefix(stdout.String(), "sluice ") {
		t.Errorf("sluice version: exit %d, printed %q", code, stdout.String())
	}
	stdout.Reset()
	if code := run([]string{"version", "extra"}, &stdout, &stderr); code != 2 || stdout.Len() != 0 {
		t.Errorf("sluice version extra: exit %d, printed %q; want 2 and nothing", code, stdout.String())
	}
}
