package procid

import (
	"os"
	"strconv"
	"strings"
	"testing"
)

// Two ids of one process (as two containers' pid 1 on one hostname would
// have) differ; each names the host and the pid.
func TestNewIsUniquePerCall(t *testing.T) {
	a, b := New(), New()
	if a == b {
		t.Fatalf("two ids are both %q", a)
	}
	host, _ := os.Hostname()
	if want := host + "-" + strconv.Itoa(os.Getpid()) + "-"; host != "" && !strings.HasPrefix(a, want) {
		t.Errorf("id %q, want it to start %q", a, want)
	}
}
