package admin

import (
	"encoding/json"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestResourcesTopAndHistoryFilter: /api/resources?top=N lists the N
// most active resources and how many there are; /api/history&resource=R
// only R's samples, so that a page over a document of thousands of
// resources fetches what it draws.
func TestResourcesTopAndHistoryFilter(t *testing.T) {
	stats := make([]ResourceStats, 5)
	for i := range stats {
		stats[i] = ResourceStats{Resource: "r" + strconv.Itoa(i), NodeStats: NodeStats{PassQps: float64(i)}}
	}
	srv := New(Options{Stats: func() []ResourceStats { return stats }})
	srv.hist.record(time.Now(), stats)
	get := func(target string, v any) {
		t.Helper()
		rec := httptest.NewRecorder()
		srv.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "http://127.0.0.1:9090"+target, nil))
		if rec.Code != 200 {
			t.Fatalf("GET %s: %d %s", target, rec.Code, rec.Body)
		}
		if err := json.Unmarshal(rec.Body.Bytes(), v); err != nil {
			t.Fatal(err)
		}
	}
	var res struct {
		Resources      []ResourceStats `json:"resources"`
		ResourcesTotal int             `json:"resourcesTotal"`
	}
	get("/api/resources?top=2", &res)
	if len(res.Resources) != 2 || res.Resources[0].Resource != "r4" || res.Resources[1].Resource != "r3" || res.ResourcesTotal != 5 {
		t.Errorf("?top=2 = %+v (total %d), want r4, r3 of 5", res.Resources, res.ResourcesTotal)
	}
	if stats[0].Resource != "r0" {
		t.Error("serving ?top= reordered the slice Stats returned")
	}
	var hist struct {
		Resources []seriesJSON `json:"resources"`
	}
	get("/api/history?resource=r1&resource=r3", &hist)
	if len(hist.Resources) != 2 || hist.Resources[0].Resource != "r1" || hist.Resources[1].Resource != "r3" {
		t.Errorf("&resource=r1&resource=r3 = %+v", hist.Resources)
	}
}

// TestRulesWithoutConfig: GET /api/rules?config=false leaves the
// rules out and keeps the rest.
func TestRulesWithoutConfig(t *testing.T) {
	srv := New(Options{State: func() State {
		return State{Ready: true, Config: map[string]any{"flowRules": []int{1}}, Cluster: map[string]any{"up": true}}
	}})
	rec := httptest.NewRecorder()
	srv.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "http://127.0.0.1:9090/api/rules?config=false", nil))
	var got map[string]any
	if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	if got["config"] != nil || got["cluster"] == nil || got["ready"] != true {
		t.Errorf("?config=false = %v, want config null, cluster and ready kept", got)
	}
}

// TestRawRulesMasksMergedSecrets: /api/rules/raw (an open read)
// masks a secret the config decoder reads through a YAML merge key or from
// a repeated key, as it masks one written plainly.
func TestRawRulesMasksMergedSecrets(t *testing.T) {
	const head = "upstreams: { up: { targets: [\"http://127.0.0.1:9001\"] } }\nroutes: [{ path: \"/a\", upstream: up, resource: a }]\n"
	for _, doc := range []string{
		head + "cluster:\n  <<: { redis: \"redis://:hunter2@127.0.0.1:6380/0\" }\n",
		head + "admin:\n  <<: { token: hunter2 }\n",
		head + "admin:\n  <<: [{ listen: \"127.0.0.1:9090\" }, { token: hunter2 }]\n",
		head + "rulesSource: &src\n  redis: \"redis://:hunter2@127.0.0.1:6380/0/rules\"\ncluster:\n  <<: *src\n",
		head + "admin: { token: \"hunter2\" }\n\"admin\": { listen: \"127.0.0.1:9090\" }\n",
	} {
		text, ok := redactSecrets([]byte(doc))
		if ok && strings.Contains(text, "hunter2") {
			t.Errorf("the secret shows in the raw rules:\n%s", text)
		}
	}
}
