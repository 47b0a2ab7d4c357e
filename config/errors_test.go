package config_test

import (
	"strings"
	"testing"

	"sluice/config"
)

// TestErrorIsOneLine: `sluice validate`, the log and the editor's 422 take
// each line of Errors.Error for one FILE:LINE: problem, so a control
// character from the file (a quoted key "bad\nkey") must not break one.
func TestErrorIsOneLine(t *testing.T) {
	for _, tt := range []struct {
		name string
		e    config.Error
		want string
	}{
		{"a plain field", config.Error{File: "r.yaml", Line: 4, Field: "routes[0].path", Msg: "is required"},
			"r.yaml:4: routes[0].path: is required"},
		{"a key with a line break", config.Error{File: "r.yaml", Line: 4, Field: "bad\nkey", Msg: "unknown field"},
			`r.yaml:4: "bad\nkey": unknown field`},
		{"a nested key with a tab", config.Error{File: "r.yaml", Line: 7, Field: "upstreams.a\tb", Msg: "unknown field"},
			`r.yaml:7: "upstreams.a\tb": unknown field`},
		{"a message with a line break", config.Error{File: "r.yaml", Line: 2, Msg: "invalid YAML: one\ntwo"},
			`r.yaml:2: invalid YAML: one\ntwo`},
		{"a file name with a carriage return", config.Error{File: "r\r.yaml", Msg: "file does not exist"},
			`r\r.yaml: file does not exist`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.e.String(); got != tt.want {
				t.Errorf("String() = %q, want %q", got, tt.want)
			}
		})
	}
}

// TestUnknownKeyWithALineBreakIsOneError: the whole path from the file to
// the message, for the quoted key "bad\nkey".
func TestUnknownKeyWithALineBreakIsOneError(t *testing.T) {
	data := "listen: \"127.0.0.1:0\"\nupstreams: {app: {targets: [\"http://127.0.0.1:1\"]}}\n" +
		"routes: [{path: /a, upstream: app}]\n\"bad\\nkey\": 1\n"
	_, err := config.Parse("r.yaml", []byte(data))
	if err == nil {
		t.Fatal("Parse accepted an unknown key")
	}
	for _, line := range strings.Split(err.Error(), "\n") {
		if !strings.HasPrefix(line, "r.yaml:4: ") {
			t.Errorf("line %q is not r.yaml:4: message; all:\n%s", line, err)
		}
	}
}
