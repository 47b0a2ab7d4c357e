//go:build unix

package admin_test

import (
	"os"
	"syscall"
	"testing"
)

// A gateway run as root that saves a file owned by the operator's deploy
// user leaves it owned by that user, not by root.
func TestEditKeepsOwner(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to give the file another owner")
	}
	f := newFixture(t, "")
	if err := os.Chown(f.path, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	if code, body, _ := f.do(t, "PUT", "/api/rules/flowRules/0",
		map[string]string{"If-Match": f.etag(t), "Content-Type": "application/json"}, `{"count": 7}`); code != 200 {
		t.Fatalf("PUT: %d %s", code, body)
	}
	fi, err := os.Stat(f.path)
	if err != nil {
		t.Fatal(err)
	}
	if st := fi.Sys().(*syscall.Stat_t); st.Uid != 65534 || st.Gid != 65534 {
		t.Errorf("after the save rules.yaml is owned by %d:%d, want 65534:65534 as before", st.Uid, st.Gid)
	}
}
