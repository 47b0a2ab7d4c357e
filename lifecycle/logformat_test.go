package lifecycle

import "testing"

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
