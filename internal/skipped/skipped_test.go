package skipped

import "testing"

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
