package lifecycle

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
)

// adminGet is the body of GET http://addr+path, which must answer 200.
func adminGet(t *testing.T, addr, path string) []byte {
	t.Helper()
	resp, err := http.Get("http://" + addr + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %v\n%s", path, resp.StatusCode, err, b)
	}
	return b
}

// TestReloadForgetsRenamedResources: renaming the only route's resource
// (and its API group) reload after reload leaves /api/resources listing
// the names in force only, and /metrics no series of an old name; an
// audit found 15 renames listing 18 resources and keeping about 60 series
// per name ever used. The resource in force keeps its counts, and a
// request that entered on an old name and ends after the renames brings
// none of its series back.
func TestReloadForgetsRenamedResources(t *testing.T) {
	entered, release := make(chan struct{}), make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Has("hold") {
			close(entered)
			<-release
		}
		_, _ = io.WriteString(w, "up")
	}))
	t.Cleanup(srv.Close)
	up := srv.URL
	rules := func(i int) string {
		return fmt.Sprintf("routes: [{path: /a, upstream: app, resource: res-%d}]\n"+
			"apiGroups: [{name: group-%d, match: [{prefix: /a}]}]\n"+
			"flowRules: [{resource: res-%d, count: 1000}]\n"+
			"degradeRules: [{resource: res-%d, strategy: errorCount, threshold: 100, minRequestAmount: 1, statIntervalMs: 60000, retryTimeoutMs: 60000}]\n", i, i, i, i)
	}
	path, write := rulesFile(t, up, rules(1))
	inst, addr := running(t, Options{Config: path, Admin: "127.0.0.1:0"})
	_, _, admin := inst.Addrs()
	const renames = 5
	held := make(chan int, 1)
	for i := 1; i <= renames; i++ {
		if i == 2 {
			go func() { held <- status(t, addr, "/a?hold") }() // entered on res-1, ends on res-5
			<-entered
		}
		if i > 1 {
			write(rules(i))
			if err := inst.Reload(); err != nil {
				t.Fatalf("reload %d: %v", i, err)
			}
		}
		if c := status(t, addr, "/a"); c != http.StatusOK {
			t.Fatalf("GET /a with res-%d: %d", i, c)
		}
	}
	// The same rules again: res-5 keeps its counts across the reload.
	write(rules(renames) + "# again\n")
	if err := inst.Reload(); err != nil {
		t.Fatal(err)
	}
	close(release)
	if c := <-held; c != http.StatusOK {
		t.Fatalf("the request held across the renames: %d", c)
	}

	var res struct {
		Resources []struct {
			Resource string  `json:"resource"`
			PassQps  float64 `json:"passQps"`
		} `json:"resources"`
	}
	if err := json.Unmarshal(adminGet(t, admin, "/api/resources"), &res); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, r := range res.Resources {
		names = append(names, r.Resource)
	}
	slices.Sort(names)
	if want := []string{"group-5", "res-5"}; !slices.Equal(names, want) {
		t.Errorf("/api/resources lists %v, want %v", names, want)
	}

	metrics := string(adminGet(t, admin, "/metrics"))
	stale := map[string]int{} // metric{resource} -> series
	for _, line := range strings.Split(metrics, "\n") {
		name, labels, ok := strings.Cut(line, "{")
		_, res, has := strings.Cut(labels, `resource="`)
		res, _, _ = strings.Cut(res, `"`)
		if ok && has && strings.HasPrefix(name, "sluice_") && res != "res-5" && res != "group-5" {
			stale[name+"{"+res+"}"]++
		}
	}
	if len(stale) > 0 {
		t.Errorf("/metrics keeps the series of resources no longer configured (metric{resource}: series): %v", stale)
	}
	for _, want := range []string{
		`sluice_requests_total{resource="res-5",result="pass"} 1`,
		`sluice_requests_total{resource="group-5",result="pass"} 1`,
		`sluice_concurrency{resource="res-5"} 0`,
		`sluice_circuit_state{resource="res-5"} 0`,
	} {
		if !strings.Contains(metrics, want+"\n") {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}
