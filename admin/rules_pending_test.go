package admin_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"sluice/admin"
)

// TestRulesListPendingRestart: GET /api/rules names the start-only settings
// the rules file changed, with the value in force and the file's, so that
// an operator sees what waits for a restart; none: no pendingRestart key.
func TestRulesListPendingRestart(t *testing.T) {
	var pending []admin.PendingSetting
	srv := admin.New(admin.Options{State: func() admin.State {
		return admin.State{Ready: true, Path: "rules.yaml", PendingRestart: pending}
	}})
	get := func() map[string]json.RawMessage {
		t.Helper()
		rec := httptest.NewRecorder()
		srv.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "http://127.0.0.1:9090/api/rules?config=false", nil))
		if rec.Code != http.StatusOK {
			t.Fatalf("GET /api/rules: %d %s", rec.Code, rec.Body)
		}
		var body map[string]json.RawMessage
		if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
			t.Fatal(err)
		}
		return body
	}
	if body := get(); body["pendingRestart"] != nil {
		t.Errorf("nothing pending: pendingRestart %s, want the key left out", body["pendingRestart"])
	}
	pending = []admin.PendingSetting{{Setting: "listen", Old: ":8080", New: ":8081"}}
	const want = `[{"setting":"listen","old":":8080","new":":8081"}]`
	if got := string(get()["pendingRestart"]); got != want {
		t.Errorf("pendingRestart %s, want %s", got, want)
	}
}
