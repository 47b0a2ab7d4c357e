package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// fleetSource is one rules document in a Redis, as the tests see it.
type fleetSource struct {
	t     *testing.T
	addr  string // host:port of the Redis
	key   string
	local string // a gateway file naming it, for sluice rules push|pull
}

// newFleetSource names a fresh key (under e2e-fleet-) in the Redis at addr
// and removes it, with the fleet's heartbeat keys, at the end.
func newFleetSource(t *testing.T, addr string) *fleetSource {
	t.Helper()
	s := &fleetSource{t: t, addr: addr, key: "e2e-fleet:" + clNamespace(t)}
	s.local = filepath.Join(t.TempDir(), "pusher.yaml")
	if err := os.WriteFile(s.local, []byte(s.gatewayFile()), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = s.cliErr("DEL", s.key, "{"+s.key+"}:fleet:seen", "{"+s.key+"}:fleet:beats")
	})
	return s
}

func (s *fleetSource) url() string { return "redis://" + s.addr + "/0" }

// name is how gateways name the document in messages.
func (s *fleetSource) name() string { return "redis://" + s.addr + "/0/" + s.key }

// gatewayFile is a fleet gateway's own rules file: listen and admin come
// from the harness's flags, the rest from the document.
func (s *fleetSource) gatewayFile() string {
	return fmt.Sprintf("rulesSource:\n  redis: %s\n  key: %q\n", s.url(), s.key)
}

// cliErr runs redis-cli against the source's Redis.
func (s *fleetSource) cliErr(args ...string) (string, error) {
	host, port, _ := strings.Cut(s.addr, ":")
	out, err := exec.Command("redis-cli", append([]string{"-h", host, "-p", port}, args...)...).CombinedOutput()
	return strings.TrimSpace(string(out)), err
}

func (s *fleetSource) cli(args ...string) string {
	s.t.Helper()
	out, err := s.cliErr(args...)
	if err != nil {
		s.t.Fatalf("redis-cli %v: %v: %s", args, err, out)
	}
	return out
}

// stored is the version and text in Redis now.
func (s *fleetSource) stored() (int64, string) {
	s.t.Helper()
	v, _ := strconv.ParseInt(s.cli("HGET", s.key, "version"), 10, 64)
	return v, s.cli("HGET", s.key, "doc")
}

// pushedAt is when Redis stored the version in force now (Unix ms).
func (s *fleetSource) pushedAt() time.Time {
	s.t.Helper()
	ms, err := strconv.ParseInt(s.cli("HGET", s.key, "pushedAt"), 10, 64)
	if err != nil {
		s.t.Fatalf("pushedAt: %v", err)
	}
	return time.UnixMilli(ms)
}

var pushedVersion = regexp.MustCompile(`pushed as version (\d+) of `)

// push runs `sluice rules push` with doc; it returns the new version, or 0
// and the command's output when the push was refused.
func (s *fleetSource) push(doc string, args ...string) (int64, string) {
	s.t.Helper()
	file := filepath.Join(s.t.TempDir(), "doc.yaml")
	if err := os.WriteFile(file, []byte(doc), 0o644); err != nil {
		s.t.Fatal(err)
	}
	all := append(append([]string{"rules", "push", "-config", s.local}, args...), file)
	out, err := exec.Command(binary, all...).CombinedOutput()
	m := pushedVersion.FindSubmatch(out)
	if err != nil || m == nil {
		return 0, strings.ReplaceAll(string(out), file, "FILE")
	}
	v, _ := strconv.ParseInt(string(m[1]), 10, 64)
	return v, string(out)
}

// mustPush is push that must succeed.
func (s *fleetSource) mustPush(doc string) int64 {
	s.t.Helper()
	v, out := s.push(doc)
	if v == 0 {
		s.t.Fatalf("sluice rules push refused a valid document:\n%s", out)
	}
	return v
}

// flDoc is a rules document: route /f (resource f) to the upstream, with
// one qps rule of count.
func flDoc(upURL string, count int) string {
	return rulesFor(upURL, fmt.Sprintf(`routes:
  - path: /f
    upstream: up
    resource: f
flowRules:
  - resource: f
    count: %d
`, count))
}

// flStart starts n gateways, each with its own copy of the source's
// gateway file (so each keeps its own last-good cache beside it).
func flStart(t *testing.T, s *fleetSource, n int) []*gateway {
	t.Helper()
	gs := make([]*gateway, n)
	for i := range gs {
		gs[i] = startGateway(t, s.gatewayFile())
	}
	return gs
}

// flState is what GET /api/rules says of the rules in force.
type flState struct {
	Ready     bool
	LoadedAt  time.Time
	LastError string
	Config    struct {
		FlowRules []struct{ Count float64 }
	}
	Source struct {
		Name      string
		Version   int64
		Up        bool
		FromCache bool
	}
}

// flRules reads GET /api/rules, with the admin token when one is given.
func flRules(t *testing.T, g *gateway, token ...string) flState {
	t.Helper()
	var hdr []string
	for _, tok := range token {
		hdr = append(hdr, "Authorization: Bearer "+tok)
	}
	code, body, _ := admDo(t, "GET", g.AdminURL+"/api/rules", "", hdr...)
	var st flState
	if err := json.Unmarshal([]byte(body), &st); code != 200 || err != nil {
		t.Fatalf("GET /api/rules: %d %v", code, err)
	}
	return st
}

// flCount is the count of the flow rule in force.
func (st flState) count() float64 {
	if len(st.Config.FlowRules) == 0 {
		return -1
	}
	return st.Config.FlowRules[0].Count
}

// flWait polls every gateway until cond holds for each, or fails after within.
func flWait(t *testing.T, gs []*gateway, within time.Duration, what string, cond func(flState) bool) []flState {
	t.Helper()
	deadline := time.Now().Add(within)
	out := make([]flState, len(gs))
	for i, g := range gs {
		poll(t, time.Until(deadline), fmt.Sprintf("gateway %d: %s", i, what), func() string {
			out[i] = flRules(t, g)
			if !cond(out[i]) {
				return fmt.Sprintf("now %+v", out[i])
			}
			return ""
		})
	}
	return out
}

// flPasses sends n GETs to /f one after another and counts the 200s; any
// answer but 200 and 429 fails the test.
func flPasses(t *testing.T, g *gateway, n int) int {
	t.Helper()
	ok := 0
	for range n {
		resp, _ := get(t, g.URL+"/f")
		switch resp.StatusCode {
		case 200:
			ok++
		case 429:
		default:
			t.Fatalf("GET /f: %d, want 200 or 429", resp.StatusCode)
		}
	}
	return ok
}

// flMetric is the value of one series of the gateway's /metrics.
func flMetric(t *testing.T, g *gateway, series string) float64 {
	t.Helper()
	v, ok := metrics(t, g)[series]
	if !ok {
		t.Fatalf("no metric %s", series)
	}
	return v
}
