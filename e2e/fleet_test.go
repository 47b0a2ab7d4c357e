package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"sluice/internal/browsertest"
	"sluice/internal/redistest"
	"sluice/internal/skipped"
	"sluice/internal/stallwatch"
)

// A push reaches every gateway within a second. Each version's
// push-to-apply latency is measured per gateway from Redis's own record of
// the push (pushedAt) to the gateway's loadedAt, and the new limit is what
// the gateways then enforce.
func TestFleetPushReachesEveryGateway(t *testing.T) {
	clRedisURL(t)
	s := newFleetSource(t, clSharedRedis)
	up := startUpstream(t, nil)
	s.mustPush(flDoc(up.URL, 100))
	gs := flStart(t, s, 3)
	for i, st := range flWait(t, gs, 2*time.Second, "version 1 in force", func(st flState) bool { return st.Source.Version == 1 }) {
		if st.Source.Name != s.name() || !st.Source.Up || st.Source.FromCache || st.count() != 100 {
			t.Fatalf("gateway %d at start: %+v", i, st)
		}
	}

	const pushes = 30
	var lat []time.Duration
	stalls := stallwatch.Start(t)
	excused := 0
	for i := range pushes {
		stalls.Take()
		v := s.mustPush(flDoc(up.URL, 10+i))
		pushed := s.pushedAt()
		sts := flWait(t, gs, 3*time.Second, fmt.Sprintf("version %d in force", v), func(st flState) bool { return st.Source.Version >= v })
		stall := stalls.Take()
		for j, st := range sts {
			if st.Source.Version != v || st.count() != float64(10+i) {
				t.Fatalf("gateway %d: version %d count %v, want version %d count %d", j, st.Source.Version, st.count(), v, 10+i)
			}
			// pushedAt has whole milliseconds: up to 1ms early.
			d := st.LoadedAt.Sub(pushed)
			if d > time.Second && stall > 250*time.Millisecond {
				// the test itself was not scheduled for stall: the machine,
				// not the gateway, was slow (a CI run with one core busy
				// while another test suite ran: 1.48 s once in 90)
				t.Logf("version %d reached gateway %d after %v while this test stalled %v: not counted", v, j, d, stall)
				excused++
				continue
			}
			lat = append(lat, d)
		}
	}
	p50, p99, worst := percentile(lat, 0.5), percentile(lat, 0.99), percentile(lat, 1)
	t.Logf("push-to-apply over %d pushes x 3 gateways: p50 %v, p99 %v, max %v (%d not counted, the machine stalled)", pushes, p50, p99, worst, excused)
	if excused > pushes*3/10 {
		msg := fmt.Sprintf("%d of %d push-to-apply times came while this test stalled over 250ms: the machine is too busy to measure", excused, pushes*3)
		if !measuringRates() {
			skipped.Skip(t, idleNeed, msg)
		}
		t.Fatal(msg)
	}
	if worst > time.Second {
		t.Errorf("a version took %v to reach a gateway, want within 1s", worst)
	}

	// The rules applied are the rules enforced: count 2 lets 2 of 6 quick
	// calls through, on each gateway.
	v := s.mustPush(flDoc(up.URL, 2))
	flWait(t, gs, 2*time.Second, "count 2 in force", func(st flState) bool { return st.Source.Version == v })
	for i, g := range gs {
		if n := flPasses(t, g, 6); n != 2 {
			t.Errorf("gateway %d passed %d of 6 calls with count 2", i, n)
		}
	}

	// `sluice rules pull` prints what was pushed, and on its last line the
	// version.
	out, err := exec.Command(binary, "rules", "pull", "-config", s.local).Output()
	body, last, _ := strings.Cut(strings.TrimSpace(string(out)), "\n# pulled version ")
	if _, doc := s.stored(); err != nil || body != strings.TrimSpace(doc) || !strings.HasPrefix(last, fmt.Sprintf("%d of %s (", v, s.name())) {
		t.Errorf("sluice rules pull: %v\n%s\nwant the stored document, then a line naming version %d of %s:\n%s", err, out, v, s.name(), doc)
	}

	// Every gateway beats; GET /api/fleet on any of them lists all three on
	// the last version, with their own listen addresses.
	var fleet struct {
		Gateways []struct {
			ID, Listen string
			Version    int64
		}
	}
	poll(t, 10*time.Second, "GET /api/fleet lists three gateways on the last version", func() string {
		_, body := get(t, gs[2].AdminURL+"/api/fleet")
		fleet.Gateways = nil
		if err := json.Unmarshal([]byte(body), &fleet); err != nil {
			return err.Error()
		}
		if len(fleet.Gateways) != 3 {
			return body
		}
		for _, g := range fleet.Gateways {
			if g.Version != v {
				return body
			}
		}
		return ""
	})
	for _, g := range gs {
		found := false
		for _, f := range fleet.Gateways {
			found = found || "http://"+f.Listen == g.URL
		}
		if !found {
			t.Errorf("GET /api/fleet does not list %s: %+v", g.URL, fleet.Gateways)
		}
	}
	// A gateway that stops leaves the fleet at once.
	gs[1].stop()
	poll(t, 10*time.Second, "a stopped gateway leaves the fleet", func() string {
		_, body := get(t, gs[0].AdminURL+"/api/fleet")
		if strings.Count(body, `"id"`) != 2 {
			return body
		}
		return ""
	})
}

// Whatever does not validate changes nothing on any gateway: a push of an
// invalid file is refused before anything is stored; a stale editor write
// gets 409; an invalid document written into Redis by hand leaves every
// gateway on the last good rules and each says why, with redis:// positions.
func TestFleetRefusesWhatDoesNotValidate(t *testing.T) {
	t.Parallel()
	clRedisURL(t)
	s := newFleetSource(t, clSharedRedis)
	up := startUpstream(t, nil)
	s.mustPush(flDoc(up.URL, 50))
	gs := flStart(t, s, 3)
	flWait(t, gs, 2*time.Second, "version 1", func(st flState) bool { return st.Source.Version == 1 })

	// 1. An invalid push: refused with FILE:LINE messages, nothing stored.
	bad := flDoc(up.URL, 50) + "  - resource: nope\n    count: -1\n"
	v, out := s.push(bad)
	want := []string{
		"FILE:12: flowRules[1].resource: unknown resource \"nope\": no route has it (resources: f)",
		"FILE:13: flowRules[1].count: must be > 0, got -1",
		"FILE: not pushed: nothing was stored",
	}
	if v != 0 || strings.TrimSpace(out) != strings.Join(want, "\n") {
		t.Fatalf("push of an invalid file: version %d, output:\n%s\nwant:\n%s", v, out, strings.Join(want, "\n"))
	}
	if sv, doc := s.stored(); sv != 1 || doc != strings.TrimSpace(flDoc(up.URL, 50)) {
		t.Fatalf("after the refused push Redis holds version %d:\n%s", sv, doc)
	}
	// A push based on a version that is no longer stored is refused too.
	if v, out := s.push(flDoc(up.URL, 60), "-base", "0"); v != 0 || !strings.Contains(out, "version 1 is stored") {
		t.Fatalf("push -base 0 over version 1: version %d\n%s", v, out)
	}

	// 2. The editor on gateway 0 reads version 1; meanwhile the CLI pushes
	// version 2; the editor's write based on version 1 gets 409 with the
	// current ETag, and stores nothing.
	_, raw := get(t, gs[0].AdminURL+"/api/rules/raw")
	var rawDoc struct {
		ETag    string
		Version int64
	}
	if err := json.Unmarshal([]byte(raw), &rawDoc); err != nil || rawDoc.ETag != `"v1"` {
		t.Fatalf("GET /api/rules/raw: %s", raw)
	}
	v2 := s.mustPush(flDoc(up.URL, 40))
	edit := func(ifMatch string) (int, string, string) {
		req, _ := http.NewRequest("PUT", gs[0].AdminURL+"/api/rules/flowRules/0", strings.NewReader(`{"count": 7}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("If-Match", ifMatch)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header.Get("ETag"), string(b)
	}
	if code, etag, body := edit(rawDoc.ETag); code != http.StatusConflict || etag != fmt.Sprintf(`"v%d"`, v2) {
		t.Fatalf("stale editor write: %d (ETag %s) %s; want 409 and ETag \"v%d\"", code, etag, body, v2)
	}
	if sv, _ := s.stored(); sv != v2 {
		t.Fatalf("after the 409 Redis holds version %d, want %d", sv, v2)
	}
	// Based on the current version, the edit is stored and reaches all three.
	code, etag, body := edit(fmt.Sprintf(`"v%d"`, v2))
	if code != 200 || etag != fmt.Sprintf(`"v%d"`, v2+1) {
		t.Fatalf("editor write based on v%d: %d %s %s", v2, code, etag, body)
	}
	v3 := v2 + 1
	flWait(t, gs, 2*time.Second, "the edited version", func(st flState) bool { return st.Source.Version == v3 && st.count() == 7 })

	// 3. An invalid document written straight into Redis, behind the CLI's
	// back: every gateway keeps version v3 and reports the document's
	// errors at their redis:// lines.
	failedBefore := make([]float64, len(gs))
	for i, g := range gs {
		failedBefore[i] = flMetric(t, g, `sluice_rules_reloads_total{result="failed"}`)
	}
	byHand := flDoc(up.URL, 7) + "  - resource: f\n    count: -3\n    grade: qpss\n"
	s.cli("HSET", s.key, "version", fmt.Sprint(v3+1), "doc", byHand)
	wantErr := []string{
		s.name() + ":13: flowRules[1].count: must be > 0, got -3",
		s.name() + ":14: flowRules[1].grade: must be one of qps, concurrency, got \"qpss\"",
	}
	sts := flWait(t, gs, 2*time.Second, "the invalid document reported", func(st flState) bool { return st.LastError != "" })
	for i, st := range sts {
		if st.LastError != strings.Join(wantErr, "\n") || st.Source.Version != v3 || st.count() != 7 {
			t.Errorf("gateway %d: lastError %q, version %d, count %v; want the errors above, version %d and count 7 kept",
				i, st.LastError, st.Source.Version, st.count(), v3)
		}
		if got := flMetric(t, gs[i], `sluice_rules_reloads_total{result="failed"}`); got != failedBefore[i]+1 {
			t.Errorf("gateway %d: failed reloads %v -> %v, want one more", i, failedBefore[i], got)
		}
		if got := flMetric(t, gs[i], "sluice_rules_version"); got != float64(v3) {
			t.Errorf("gateway %d: sluice_rules_version %v, want %d", i, got, v3)
		}
		if ev := gs[i].logs.Find("reload failed", 0); ev == nil || !strings.Contains(fmt.Sprint(ev["errors"]), wantErr[0]) {
			t.Errorf("gateway %d logged no failed reload naming %s: %v", i, wantErr[0], ev)
		}
		if n := flPasses(t, gs[i], 3); n != 3 {
			t.Errorf("gateway %d passed %d of 3 calls under count 7", i, n)
		}
	}

	// While the document is refused, an operator rotates gateway 0's admin
	// token in its own file: the file applies with the document in force
	// (the new token works, the old one is refused), and the document's
	// errors stay reported.
	reload := func(token string) int {
		code, _, _ := admDo(t, "POST", gs[0].AdminURL+"/api/reload", "", "Authorization: Bearer "+token)
		return code
	}
	gs[0].writeRules(s.gatewayFile() + "admin:\n  token: first\n")
	flWait(t, gs[:1], 3*time.Second, "admin.token set in the file", func(flState) bool { return reload("first") == 202 && reload("none") == 401 })
	gs[0].writeRules(s.gatewayFile() + "admin:\n  token: second\n")
	flWait(t, gs[:1], 3*time.Second, "admin.token rotated in the file", func(flState) bool { return reload("second") == 202 })
	if code := reload("first"); code != 401 {
		t.Errorf("the old token after the rotation: %d, want 401", code)
	}
	if st := flRules(t, gs[0], "second"); st.LastError != strings.Join(wantErr, "\n") || st.Source.Version != v3 || st.count() != 7 {
		t.Errorf("gateway 0 after the rotation: lastError %q, version %d, count %v; want the document's errors, version %d, count 7",
			st.LastError, st.Source.Version, st.count(), v3)
	}
	// Now that it has a token, a reader without it is told that the
	// document failed, not what its messages quote of it.
	if st := flRules(t, gs[0]); !strings.HasPrefix(st.LastError, "the last reload failed (2 errors)") {
		t.Errorf("gateway 0's lastError for a reader without the token: %q, want the count of errors only", st.LastError)
	}

	// A valid push after it clears the error everywhere.
	v5 := s.mustPush(flDoc(up.URL, 9))
	flWait(t, gs, 2*time.Second, "the next valid version", func(st flState) bool {
		return st.Source.Version == v5 && st.LastError == "" && st.count() == 9
	})
}

// A gateway that starts while Redis is down serves the last good rules from
// its cache and says so; when Redis comes back (empty: restarted), changes
// flow again without a restart.
func TestFleetGatewayStartsWithRedisDown(t *testing.T) {
	rs := clStartRedis(t)
	s := newFleetSource(t, rs.addr())
	up := startUpstream(t, nil)
	s.mustPush(flDoc(up.URL, 4))
	g := startGateway(t, s.gatewayFile())
	flWait(t, []*gateway{g}, 2*time.Second, "version 1", func(st flState) bool { return st.Source.Version == 1 })
	cache := strings.TrimSuffix(g.Rules, ".yaml") + ".last-good.yaml"
	poll(t, 10*time.Second, "the last good rules written beside the rules file", func() string {
		if b, err := os.ReadFile(cache); err != nil || !strings.Contains(string(b), "count: 4") {
			return fmt.Sprintf("%s: %v %q", cache, err, b)
		}
		return ""
	})
	g.stop()

	rs.kill()
	g = startGatewayFile(t, g.Rules)
	ev := g.waitLog("serving the last good rules from the cache", time.Second)
	t.Logf("log: %v", ev["message"])
	st := flRules(t, g)
	if !st.Ready || !st.Source.FromCache || st.Source.Up || st.Source.Version != 1 || st.count() != 4 {
		t.Fatalf("started with Redis down: %+v", st)
	}
	if _, body := get(t, g.AdminURL+"/readyz"); !strings.HasPrefix(body, "ready: serving the last good rules from "+cache+" (version 1)") {
		t.Errorf("/readyz says %q", body)
	}
	if v := flMetric(t, g, "sluice_rules_from_cache"); v != 1 {
		t.Errorf("sluice_rules_from_cache %v, want 1", v)
	}
	if v := metric(t, g, "sluice_rules_source_last_seen_seconds"); v != "+Inf" {
		t.Errorf("sluice_rules_source_last_seen_seconds %s, want +Inf (never seen)", v)
	}
	if n := flPasses(t, g, 6); n != 4 {
		t.Errorf("from the cache: %d of 6 calls passed, want 4 (count 4)", n)
	}

	// Redis is back, empty. The gateway finds it and reports the missing
	// document, still serving the cached rules; a push then applies as usual.
	rs.start()
	// Reaching the source and reporting its missing document are two
	// steps (a CI run read the state between them, 1 ms apart): wait for
	// the report.
	st = flWait(t, []*gateway{g}, 5*time.Second, "the source reached and the missing document reported", func(st flState) bool {
		return st.Source.Up && strings.Contains(st.LastError, "the key holds no rules document")
	})[0]
	if st.count() != 4 || !st.Source.FromCache {
		t.Errorf("with Redis back but empty: %+v; want the cached rules kept and the missing document reported", st)
	}
	v := s.mustPush(flDoc(up.URL, 8))
	pushed := s.pushedAt()
	st = flWait(t, []*gateway{g}, 2*time.Second, "the push after the outage", func(st flState) bool {
		return st.Source.Version == v && st.count() == 8 && st.LastError == ""
	})[0]
	t.Logf("after Redis came back: version %d applied %v after its push", v, st.LoadedAt.Sub(pushed))
	if st.Source.FromCache {
		t.Error("still from the cache after a push applied")
	}
	if _, body := get(t, g.AdminURL+"/readyz"); body != "ready" {
		t.Errorf("/readyz once the source's document applies: %q", body)
	}
	if g.cmd.Process.Pid == 0 || g.exitErr != nil {
		t.Fatal("the gateway restarted")
	}
	if b, _ := os.ReadFile(cache); !strings.Contains(string(b), "count: 8") {
		t.Errorf("the cache was not refreshed with the new version:\n%s", b)
	}
}

// 200 pushes within 60 s (one every 50 ms, so 10 s) while three gateways
// serve load, from before the first push until every gateway has the last
// version: every answer is a 200 or a 429, every gateway ends on the last
// version, and the limit under load holds throughout, since each push
// changes another rule and a rule whose definition did not change keeps its
// window across a reload. Each gateway's log says how long after its push
// each version applied.
func TestFleetPushesUnderLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("SKIPPED in -short: a 10 s load run")
	}
	clRedisURL(t)
	s := newFleetSource(t, clSharedRedis)
	up := startUpstream(t, nil)
	doc := func(i int) string {
		return rulesFor(up.URL, fmt.Sprintf(`routes:
  - path: /f
    upstream: up
    resource: f
  - path: /g
    upstream: up
    resource: g
flowRules:
  - resource: f
    count: 30
  - resource: g
    count: %d
`, 10+i))
	}
	s.mustPush(doc(0))
	gs := flStart(t, s, 3)
	flWait(t, gs, 2*time.Second, "version 1", func(st flState) bool { return st.Source.Version == 1 })

	const pushes, every = 200, 50 * time.Millisecond
	targets := make([]target, len(gs))
	for i, g := range gs {
		targets[i] = to(g.URL + "/f")
	}
	// 40 calls a second to each gateway's f, limited to 30 a second, from
	// before the first push until every gateway has the last version (60 s
	// at most, the time the 200 pushes have).
	const rate, count = 40.0, 30.0
	done, stopLoad := make(chan *result, 1), make(chan struct{})
	var stopOnce sync.Once
	endLoad := func() { stopOnce.Do(func() { close(stopLoad) }) }
	defer endLoad()
	go func() {
		done <- run(t, load{Rate: rate * 3, Duration: 60 * time.Second, Workers: 32, Targets: targets, MaxLag: clMaxLag, Stop: stopLoad})
	}()
	var last int64
	start := time.Now()
	for i := range pushes {
		time.Sleep(time.Until(start.Add(time.Duration(i) * every)))
		v, out := s.push(doc(i + 1))
		if v == 0 {
			t.Fatalf("push %d refused:\n%s", i, out)
		}
		last = v
	}
	took := time.Since(start)
	sts := flWait(t, gs, 2*time.Second, "the last version", func(st flState) bool { return st.Source.Version == last })
	endLoad()
	res := <-done
	res.checkLag(t)
	res.only200And429(t, "under 200 pushes")
	st := res.statuses()
	t.Logf("%d pushes in %v; load: %d answers, %d x 200, %d x 429; last version %d on all %d gateways",
		pushes, took.Round(time.Millisecond), len(res.hits), st[200], st[429], last, len(sts))
	if took > 60*time.Second {
		t.Errorf("200 pushes took %v, want within 60s", took)
	}
	// The load's length: its last send was due 1/120 s before the next.
	secs := (res.hits[len(res.hits)-1].due + time.Second/(3*rate)).Seconds()
	for i := range gs {
		passed := res.only(i).count(200)
		t.Logf("gateway %d: %d passes in %.0f s at %.0f/s offered, count %.0f", i, passed, secs, rate, count)
		if lo, hi := 0.9*count*secs, count*(secs+1); float64(passed) < lo || float64(passed) > hi {
			t.Errorf("gateway %d passed %d, want %.0f..%.0f: the limit must hold through the pushes", i, passed, lo, hi)
		}
	}

	// Push-to-apply per gateway, from the gateways' logs.
	var lat []time.Duration
	applied := make([]int, len(gs))
	for i, g := range gs {
		for _, ev := range g.logs.Events("rules document in force") {
			if ms, ok := ev["sincePush"].(float64); ok && ev["version"].(float64) > 1 {
				lat = append(lat, time.Duration(ms*float64(time.Millisecond)))
				applied[i]++
			}
		}
	}
	t.Logf("versions applied per gateway %v (a version superseded before its reload is skipped); push-to-apply p50 %v, p99 %v, max %v",
		applied, percentile(lat, 0.5), percentile(lat, 0.99), percentile(lat, 1))
	if p99 := percentile(lat, 0.99); p99 > time.Second {
		t.Errorf("push-to-apply p99 %v under load, want within 1s", p99)
	}
}

// The fleet view of real gateways in headless Chromium: gateway 0's
// dashboard lists both gateways with their version and rates and the
// fleet's totals; its editor saves the next version, which both apply.
func TestFleetDashboardInRealBrowser(t *testing.T) {
	chromium := browsertest.Chromium(t)
	clRedisURL(t)
	s := newFleetSource(t, clSharedRedis)
	up := startUpstream(t, nil)
	s.mustPush(flDoc(up.URL, 3))
	gs := flStart(t, s, 2)
	flWait(t, gs, 2*time.Second, "version 1", func(st flState) bool { return st.Source.Version == 1 })
	// 20 calls a second to each gateway under count 3: passes and blocks
	// for the view to show, from each gateway's heartbeat.
	loadDone := make(chan struct{})
	stopLoad := make(chan struct{})
	go func() {
		defer close(loadDone)
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stopLoad:
				return
			case <-tick.C:
			}
			for _, g := range gs {
				if resp, err := http.Get(g.URL + "/f"); err == nil {
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
			}
		}
	}()
	defer func() { close(stopLoad); <-loadDone }()

	bctx := browsertest.Tab(t, chromium, 60*time.Second)
	poll := func(what, js string) { t.Helper(); browsertest.Poll(t, bctx, 15*time.Second, what, js) }
	if err := chromedp.Do(bctx, chromedp.Navigate(gs[0].AdminURL+"/")); err != nil {
		t.Fatal(err)
	}
	poll("both gateways listed on version 1", `document.querySelectorAll('#fleet-table tr[data-gateway]').length === 2 &&
		[...document.querySelectorAll('#fleet-table [data-k="version"]')].every((td) => td.textContent === "v1")`)
	for _, g := range gs {
		addr := strings.TrimPrefix(g.URL, "http://")
		if !strings.Contains(browsertest.Text(t, bctx, `#fleet-table`), addr) {
			t.Errorf("the fleet view does not list %s", addr)
		}
	}
	if got := browsertest.Text(t, bctx, `[data-total="gateways"] .v`); got != "2" {
		t.Errorf("fleet total of gateways %q, want 2", got)
	}
	poll("each gateway's pass and block rates shown", `[...document.querySelectorAll('#fleet-table tr[data-gateway]')].every((tr) =>
		parseFloat(tr.querySelector('[data-k="passQps"]').textContent) > 0 && parseFloat(tr.querySelector('[data-k="blockQps"]').textContent) > 0) &&
		parseFloat(document.querySelector('[data-total="pass/s"] .v').textContent) > 0`)

	count := chromedp.CSS(`#editor-fields input[name="count"]`)
	if err := chromedp.Do(bctx,
		chromedp.WaitVisible(count),
		chromedp.SetValue(chromedp.CSS(`#rule-select`), "flowRules/0"),
		chromedp.SetValue(count, "5"),
		chromedp.Click(chromedp.CSS(`#save`)),
		chromedp.WaitVisible(chromedp.CSS(`#result.ok`)),
	); err != nil {
		t.Fatalf("save in the editor: %v", err)
	}
	flWait(t, gs, 2*time.Second, "the version saved in the editor", func(st flState) bool { return st.Source.Version == 2 && st.count() == 5 })
	poll("both gateways shown on version 2", `[...document.querySelectorAll('#fleet-table [data-k="version"]')].filter((td) => td.textContent === "v2").length === 2`)
	t.Logf("fleet view: %s", browsertest.Text(t, bctx, `#fleet-panel`))
}

// A rules document over 8 MiB never reaches a gateway: `sluice rules push`
// refuses the file from its size and stores nothing, and one written
// straight into Redis is refused by every gateway from its length (HSTRLEN)
// before it is read, with the key and the limit on /api/rules; the rules
// in force keep serving.
func TestFleetRefusesOversizedDocument(t *testing.T) {
	t.Parallel()
	clRedisURL(t)
	s := newFleetSource(t, clSharedRedis)
	up := startUpstream(t, nil)
	s.mustPush(flDoc(up.URL, 50))
	gs := flStart(t, s, 1)
	flWait(t, gs, 2*time.Second, "version 1", func(st flState) bool { return st.Source.Version == 1 })

	big := filepath.Join(t.TempDir(), "big.yaml")
	if err := os.WriteFile(big, []byte(flDoc(up.URL, 60)+"# "+strings.Repeat("x", 9<<20)+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	fi, _ := os.Stat(big)
	out, err := exec.Command(binary, "rules", "push", "-config", s.local, big).CombinedOutput()
	want := fmt.Sprintf("%s: file is %d bytes, over the 8 MiB limit of a rules document", big, fi.Size())
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 || !strings.Contains(string(out), want) {
		t.Errorf("sluice rules push of a 9 MiB file: %v, output:\n%s\nwant exit 1 and %s", err, out, want)
	}
	if v, _ := s.stored(); v != 1 {
		t.Fatalf("after the refused push Redis holds version %d, want 1", v)
	}

	// Behind the CLI's back: redis-cli -x reads the value from stdin.
	host, port, _ := strings.Cut(s.addr, ":")
	cli := exec.Command("redis-cli", "-h", host, "-p", port, "-x", "HSET", s.key, "doc")
	f, err := os.Open(big)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cli.Stdin = f
	if out, err := cli.CombinedOutput(); err != nil {
		t.Fatalf("redis-cli -x HSET: %v: %s", err, out)
	}
	s.cli("HSET", s.key, "version", "2")
	size, _ := strconv.ParseInt(s.cli("HSTRLEN", s.key, "doc"), 10, 64)
	if size <= 8<<20 {
		t.Fatalf("redis-cli stored a document of %d bytes, want the 9 MiB file", size)
	}
	wantErr := fmt.Sprintf("the document at %s is %d bytes, over the 8 MiB limit of a rules document", s.key, size)
	st := flWait(t, gs, 5*time.Second, "the oversized document reported", func(st flState) bool { return strings.Contains(st.LastError, wantErr) })
	if st[0].Source.Version != 1 || st[0].count() != 50 {
		t.Errorf("after the oversized document: version %d, count %v; want version 1 and count 50 kept", st[0].Source.Version, st[0].count())
	}
	if n := flPasses(t, gs[0], 3); n != 3 {
		t.Errorf("passed %d of 3 calls under count 50", n)
	}
}

// A pull-edit-push cycle is a compare-and-set with the commands of SPEC §10
// alone, no flag: the file pull prints names its version on its last line,
// so pushing it back after another writer stored a version is refused
// (exit 1, nothing stored) and the other write is not lost. The line never
// reaches Redis, -base still overrides it, and a file pulled from another
// source is not pushed on that source's version.
func TestRulesPullEditPushIsCompareAndSet(t *testing.T) {
	t.Parallel()
	clRedisURL(t)
	s := newFleetSource(t, clSharedRedis)
	const up = "http://127.0.0.1:1"
	pull := func() string {
		t.Helper()
		out, err := exec.Command(binary, "rules", "pull", "-config", s.local).Output()
		if err != nil {
			t.Fatalf("sluice rules pull: %v", err)
		}
		return string(out)
	}
	s.mustPush(flDoc(up, 10))

	alice := pull() // Alice starts from version 1 ...
	if v, out := s.push(flDoc(up, 20)); v != 2 || !strings.Contains(out, "it replaces version 1") {
		t.Fatalf("Bob's push of a file written from scratch: version %d\n%s", v, out) // ... Bob stores version 2 ...
	}
	edited := strings.Replace(alice, "count: 10", "count: 11", 1)
	if v, out := s.push(edited); v != 0 || !strings.Contains(out, "based on version 1, but version 2 is stored") || !strings.Contains(out, "nothing was stored") {
		t.Fatalf("Alice's push of version 1 edited over version 2: version %d\n%s", v, out) // ... and Alice's is refused.
	}
	// A rule appended after the pull line leaves it in the middle: still
	// version 1, still refused (read only as the last line, the file named
	// no version and replaced Bob's).
	appended := alice + "  - resource: f\n    grade: concurrency\n    count: 1000\n"
	if v, out := s.push(appended); v != 0 || !strings.Contains(out, "based on version 1, but version 2 is stored") {
		t.Fatalf("Alice's push with a rule appended after the pull line: version %d\n%s", v, out)
	}
	if v, doc := s.stored(); v != 2 || !strings.Contains(doc, "count: 20") {
		t.Fatalf("after the refused push Redis holds version %d:\n%s", v, doc)
	}

	// Pulled again and edited, it goes in; Redis holds the edit without the line.
	edited = strings.Replace(pull(), "count: 20", "count: 21", 1)
	if v, out := s.push(edited); v != 3 {
		t.Fatalf("push of version 2 edited: %s", out)
	}
	if _, doc := s.stored(); strings.Contains(doc, "# pulled") || strings.TrimSpace(doc) != strings.TrimSpace(strings.Replace(flDoc(up, 20), "count: 20", "count: 21", 1)) {
		t.Errorf("Redis holds:\n%s\nwant the edited document without pull's line", doc)
	}

	// -base overrides the line; a file pulled elsewhere needs it.
	if v, out := s.push(edited, "-base", "3"); v != 4 {
		t.Fatalf("push -base 3 of a file pulled at version 2: %s", out)
	}
	elsewhere := strings.Replace(pull(), " of "+s.name(), " of redis://staging:6379/0/rules", 1)
	if v, out := s.push(elsewhere); v != 0 || !strings.Contains(out, "pulled from redis://staging:6379/0/rules") {
		t.Fatalf("push of a file pulled from another source: version %d\n%s", v, out)
	}
}

// `sluice rules push` and `pull` reach a document behind Sentinels, and say
// only their own lines: go-redis's process-wide log ("redis: ... sentinel:
// selected addr ...") is the gateway's debug log, not the command's stderr.
func TestRulesCommandsThroughSentinel(t *testing.T) {
	t.Parallel()
	sen := redistest.StartSentinels(t, redistest.SentinelOptions{})
	local := filepath.Join(t.TempDir(), "gw.yaml")
	key := "e2e-fleet:" + clNamespace(t)
	gw := fmt.Sprintf("rulesSource:\n  sentinel:\n    masterName: %s\n    addrs: [%s]\n  key: %q\n", sen.MasterName, strings.Join(sen.Addrs(), ", "), key)
	if err := os.WriteFile(local, []byte(gw), 0o644); err != nil {
		t.Fatal(err)
	}
	doc := filepath.Join(t.TempDir(), "doc.yaml")
	if err := os.WriteFile(doc, []byte(flDoc("http://127.0.0.1:1", 7)), 0o644); err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) (stdout, stderr string) {
		t.Helper()
		var o, e strings.Builder
		cmd := exec.Command(binary, args...)
		cmd.Stdout, cmd.Stderr = &o, &e
		if err := cmd.Run(); err != nil {
			t.Fatalf("sluice %v: %v\n%s%s", args, err, o.String(), e.String())
		}
		return o.String(), e.String()
	}
	out, errs := run("rules", "push", "-config", local, doc)
	if !strings.Contains(out, "pushed as version 1 of redis-sentinel://") || errs != "" {
		t.Errorf("push: stdout %q, stderr %q; want version 1 and nothing on stderr", out, errs)
	}
	out, errs = run("rules", "pull", "-config", local)
	if !strings.HasPrefix(out, flDoc("http://127.0.0.1:1", 7)) || strings.Count(errs, "\n") != 1 || !strings.Contains(errs, ": version 1") {
		t.Errorf("pull: stdout %q, stderr %q; want the document, and one line naming version 1", out, errs)
	}
}
