package lifecycle

import (
	"bytes"
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestLogFormat: -log-format wins, then the file's log.format; only a
// format nobody wrote follows the terminal. A file that says json is
// obeyed on a terminal too (someone piping the logs through jq).
func TestLogFormat(t *testing.T) {
	tests := []struct {
		flag, file string
		tty        bool
		want       string
	}{
		{"", "", false, "json"},
		{"", "", true, "console"},
		{"", "json", true, "json"},
		{"", "console", false, "console"},
		{"json", "console", true, "json"},
		{"console", "json", false, "console"},
	}
	for _, tt := range tests {
		if got := logFormat(tt.flag, tt.file, tt.tty); got != tt.want {
			t.Errorf("logFormat(flag %q, file %q, tty %v) = %q, want %q", tt.flag, tt.file, tt.tty, got, tt.want)
		}
	}
}

// TestLogLines: a JSON line carries its time to the millisecond (whole
// seconds could not order the access and block lines of one second), and
// console lines written to a file carry no colour escape codes, which
// files, docker logs and journald would keep.
func TestLogLines(t *testing.T) {
	var buf bytes.Buffer
	log := newLogger(&buf, Options{LogFormat: "json"}, nil)
	log.Info().Msg("one")
	var line struct{ Time string }
	if err := json.Unmarshal(buf.Bytes(), &line); err != nil {
		t.Fatal(err)
	}
	at, err := time.Parse("2006-01-02T15:04:05.000Z07:00", line.Time)
	if err != nil || time.Since(at).Abs() > time.Minute {
		t.Errorf("time %q: %v, want now to the millisecond", line.Time, err)
	}

	buf.Reset()
	log = newLogger(&buf, Options{LogFormat: "console"}, nil)
	log.Info().Str("k", "v").Msg("two")
	if got := buf.String(); strings.Contains(got, "\x1b[") || !strings.Contains(got, "two") || !strings.Contains(got, "k=v") {
		t.Errorf("console line off a terminal = %q, want it without escape codes", got)
	}
	if got := buf.String(); !regexp.MustCompile(`^\d\d:\d\d:\d\d\.\d\d\d INF`).MatchString(got) {
		t.Errorf("console line = %q, want it to start with the time to the millisecond", got)
	}
}
