package skipped

import (
	"io/fs"
	"testing"
)

func TestSummary(t *testing.T) {
	reset()
	defer reset()
	if s := Summary(); s != "" {
		t.Fatalf("nothing skipped: %q", s)
	}
	const redis = "Redis (redis-server not installed)"
	for _, name := range []string{"TestA", "TestB/sub", "TestB/other", "TestC", "TestD", "TestE", "TestF"} {
		record(redis, name)
	}
	t.Run("sub", func(t *testing.T) { Skip(t, "chromium", "no chromium") })
	want := "SKIPPED: 6 tests need " + redis + ": TestA, TestB, TestC, TestD, TestE, ... (go test -v lists them)\n" +
		"SKIPPED: 1 test needs chromium: TestSummary\n"
	if s := Summary(); s != want {
		t.Fatalf("summary:\n%s\nwant:\n%s", s, want)
	}
}

// TestOutlives: the summary is appended to the go command's stderr only
// where the go command's own later writes cannot overwrite it.
func TestOutlives(t *testing.T) {
	const (
		appended = "pos:\t120\nflags:\t02102001\nmnt_id:\t30\nino:\t5\n" // 2>> log
		truncate = "pos:\t120\nflags:\t0100001\nmnt_id:\t30\nino:\t5\n"  // > log
	)
	for _, tt := range []struct {
		name   string
		mode   fs.FileMode
		fdinfo string
		want   bool
	}{
		{"terminal", fs.ModeDevice | fs.ModeCharDevice | 0o620, "pos:\t0\nflags:\t02\n", true},
		{"pipe", fs.ModeNamedPipe | 0o600, "pos:\t0\nflags:\t01\n", true},
		{"file opened for appending", 0o644, appended, true},
		{"file opened with >", 0o644, truncate, false},
		{"file, fdinfo without flags", 0o644, "pos:\t0\n", false},
	} {
		if got := outlives(tt.mode, tt.fdinfo); got != tt.want {
			t.Errorf("%s: outlives = %v, want %v", tt.name, got, tt.want)
		}
	}
}
