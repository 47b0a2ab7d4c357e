package main

import (
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"sluice/cluster"
	"sluice/config"
	"sluice/internal/redistest"
	"sluice/proxy"
)

// recipeBlock is a fenced yaml block of docs/recipes.md with the heading
// it sits under.
var recipeBlock = regexp.MustCompile("(?s)```yaml\n(.*?)```")

// recipes returns docs/recipes.md's yaml blocks by the "## " heading above
// them.
func recipes(t *testing.T) map[string]string {
	t.Helper()
	b, err := os.ReadFile("docs/recipes.md")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	heading := ""
	text := string(b)
	for _, loc := range recipeBlock.FindAllStringSubmatchIndex(text, -1) {
		before := text[:loc[0]]
		if i := strings.LastIndex(before, "\n## "); i >= 0 {
			heading, _, _ = strings.Cut(before[i+4:], "\n")
		}
		if _, dup := out[heading]; dup {
			t.Fatalf("docs/recipes.md: two yaml blocks under %q", heading)
		}
		out[heading] = text[loc[2]:loc[3]]
	}
	return out
}

// TestRecipes: every rules.yaml snippet of docs/recipes.md validates, and
// the maintenance redirect sends browsers to the status page once the
// service answers 503, while API clients get the JSON 503.
func TestRecipes(t *testing.T) {
	all := recipes(t)
	if len(all) == 0 {
		t.Fatal("docs/recipes.md has no yaml blocks")
	}
	for name, doc := range all {
		if _, err := config.Parse("recipes.md ("+name+")", []byte(doc)); err != nil {
			t.Errorf("recipe %q does not validate:\n%v", name, err)
		}
	}

	doc, ok := all["Maintenance redirect"]
	if !ok {
		t.Fatal(`docs/recipes.md has no "Maintenance redirect" recipe`)
	}
	down := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "maintenance", http.StatusServiceUnavailable)
	}))
	defer down.Close()
	cfg, err := config.Parse("maintenance.yaml", []byte(strings.ReplaceAll(doc, "http://127.0.0.1:9001", down.URL)))
	if err != nil {
		t.Fatal(err)
	}
	g := proxy.New(proxy.Deps{Log: zerolog.Nop()})
	if err := g.Load(cfg); err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	for _, c := range []struct{ path, status, location, body string }{
		{"/shop/cart", "302", "https://status.example.com/maintenance", ""},
		{"/api/shop/cart", "503", "", `{"error":"down for maintenance","resource":"shop-api"}`},
	} {
		var w *httptest.ResponseRecorder
		// Five 503s from the service open the breaker; the sixth call is blocked.
		for range 6 {
			w = httptest.NewRecorder()
			g.ServeHTTP(w, httptest.NewRequest("GET", c.path, nil))
		}
		got := fmt.Sprintf("%d %s %s %s", w.Code, w.Header().Get("Location"), w.Header().Get("X-Sluice-Blocked"), w.Body.String())
		if want := fmt.Sprintf("%s %s degrade %s", c.status, c.location, c.body); got != want {
			t.Errorf("GET %s with the service down: %q, want %q", c.path, got, want)
		}
	}
}

// TestRecipeDailyQuotas: the free/paid plan recipe on the local Redis: a
// free key passes its 100 calls of the day and is then refused with
// Retry-After and RateLimit t at the seconds to midnight in Berlin (as this
// test's clock computes them, within 3 s) and w the day's length; a paid
// key passes past 100.
func TestRecipeDailyQuotas(t *testing.T) {
	doc, ok := recipes(t)["Free and paid plans: daily quotas by API key"]
	if !ok {
		t.Fatal(`docs/recipes.md has no "Free and paid plans: daily quotas by API key" recipe`)
	}
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().In(berlin)
	start := time.Date(now.Year(), now.Month(), now.Day(), 0, 0, 0, 0, berlin)
	midnight := time.Date(now.Year(), now.Month(), now.Day()+1, 0, 0, 0, 0, berlin)
	if time.Until(midnight) < 2*time.Minute {
		t.Skip("within two minutes of midnight in Berlin: the quota would reset during the test")
	}
	if c, err := net.DialTimeout("tcp", "127.0.0.1:6379", time.Second); err != nil {
		redistest.Missing(t, "no redis at 127.0.0.1:6379: "+err.Error())
	} else {
		c.Close()
	}
	up := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	defer up.Close()
	ns := fmt.Sprintf("recipe-%d", time.Now().UnixNano()) // a day's count of this run only
	doc = strings.NewReplacer("http://127.0.0.1:9001", up.URL, "namespace: plans", "namespace: "+ns).Replace(doc)
	cfg, err := config.Parse("plans.yaml", []byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	svc, err := cluster.New(cluster.Options{Redis: cfg.Cluster.RedisTarget, Namespace: cfg.Cluster.Namespace, Log: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Close()
	g := proxy.New(proxy.Deps{Log: zerolog.Nop(), Cluster: svc})
	if err := g.Load(cfg); err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	call := func(key string) *httptest.ResponseRecorder {
		w := httptest.NewRecorder()
		r := httptest.NewRequest("GET", "/v1/orders", nil)
		r.Header.Set("X-API-Key", key)
		g.ServeHTTP(w, r)
		return w
	}
	for i := range 100 {
		if w := call("k-free-1"); w.Code != 200 {
			t.Fatalf("free key, call %d of 100: %d", i+1, w.Code)
		}
	}
	sent := time.Now()
	w := call("k-free-1")
	want := int64(midnight.Sub(sent).Seconds())
	ra, _ := strconv.ParseInt(w.Header().Get("Retry-After"), 10, 64)
	if w.Code != 429 || ra < want-3 || ra > want+3 {
		t.Errorf("free key, call 101: %d Retry-After %q, want 429 and about %d s (midnight in Berlin)", w.Code, w.Header().Get("Retry-After"), want)
	}
	m := regexp.MustCompile(`;t=(\d+)`).FindStringSubmatch(w.Header().Get("RateLimit"))
	if m == nil {
		t.Fatalf("RateLimit %q has no t", w.Header().Get("RateLimit"))
	}
	if tsec, _ := strconv.ParseInt(m[1], 10, 64); tsec < want-3 || tsec > want+3 {
		t.Errorf("RateLimit %q: t=%d, want about %d", w.Header().Get("RateLimit"), tsec, want)
	}
	if p, day := w.Header().Get("RateLimit-Policy"), int64(midnight.Sub(start).Seconds()); !strings.Contains(p, fmt.Sprintf(";q=100;w=%d", day)) {
		t.Errorf("RateLimit-Policy %q, want q=100 and w=%d (the day in Berlin)", p, day)
	}
	for i := range 101 {
		if w := call("k-paid-7f3a"); w.Code != 200 {
			t.Fatalf("paid key, call %d: %d", i+1, w.Code)
		}
	}
}

// TestRecipeLoginLockout: the login lockout recipe: successful logins
// cost nothing; after five 401s from one address, its next attempt (with
// the right password) is 429 and never reaches the service; another
// address and the office's item are not locked out by them.
func TestRecipeLoginLockout(t *testing.T) {
	doc, ok := recipes(t)["Login lockout"]
	if !ok {
		t.Fatal(`docs/recipes.md has no "Login lockout" recipe`)
	}
	var reached atomic.Int64
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reached.Add(1)
		if r.Header.Get("X-Password") != "right" {
			w.WriteHeader(http.StatusUnauthorized)
		}
	}))
	defer up.Close()
	g := loadRecipe(t, strings.ReplaceAll(doc, "http://127.0.0.1:9001", up.URL))
	login := func(addr, password string) int {
		w := httptest.NewRecorder()
		r := httptest.NewRequest("POST", "/login", nil)
		r.RemoteAddr = addr + ":50000"
		r.Header.Set("X-Password", password)
		g.ServeHTTP(w, r)
		return w.Code
	}
	for i, want := range []int{401, 200, 401, 200, 200, 401, 401, 200, 401} {
		password := "wrong"
		if want == 200 {
			password = "right"
		}
		if got := login("198.51.100.9", password); got != want {
			t.Fatalf("attempt %d: %d, want %d", i, got, want)
		}
	}
	before := reached.Load()
	if got := login("198.51.100.9", "right"); got != 429 || reached.Load() != before {
		t.Fatalf("after five failures: %d (the service reached: %v), want 429 before the service", got, reached.Load() != before)
	}
	if got := login("198.51.100.10", "right"); got != 200 {
		t.Fatalf("another address: %d, want 200", got)
	}
	for i := range 6 {
		if got := login("203.0.113.7", "wrong"); got != 401 {
			t.Fatalf("the office, failure %d: %d, want 401 (its item allows 50)", i, got)
		}
	}
}

// TestRecipeLLMTokenBudget: the LLM token budget recipe: a key spends its
// 100,000 tokens by the figures of the answers, the call that overdraws
// passes, the next is 429 before the service; X-Tokens-Used never reaches
// the client.
func TestRecipeLLMTokenBudget(t *testing.T) {
	doc, ok := recipes(t)["LLM token budget"]
	if !ok {
		t.Fatal(`docs/recipes.md has no "LLM token budget" recipe`)
	}
	var reached atomic.Int64
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reached.Add(1)
		w.Header().Set("X-Tokens-Used", r.URL.Query().Get("used"))
	}))
	defer up.Close()
	g := loadRecipe(t, strings.ReplaceAll(doc, "http://127.0.0.1:9001", up.URL))
	call := func(key, used string) *httptest.ResponseRecorder {
		w := httptest.NewRecorder()
		r := httptest.NewRequest("POST", "/v1/chat/completions?used="+used, nil)
		r.Header.Set("Authorization", key)
		g.ServeHTTP(w, r)
		return w
	}
	for i, st := range []struct {
		used string
		want int
	}{{"60000", 200}, {"39999", 200}, {"25000", 200}, {"10", 429}} {
		w := call("Bearer sk-1", st.used)
		if w.Code != st.want {
			t.Fatalf("call %d (%s tokens): %d, want %d", i, st.used, w.Code, st.want)
		}
		if v, ok := w.Header()["X-Tokens-Used"]; ok {
			t.Fatalf("call %d: the client got X-Tokens-Used: %q", i, v)
		}
	}
	if reached.Load() != 3 {
		t.Fatalf("the service was reached %d times, want 3", reached.Load())
	}
	if w := call("Bearer sk-team-research", "500000"); w.Code != 200 {
		t.Fatalf("the research key (1,000,000 an hour): %d", w.Code)
	}
}

// loadRecipe serves a recipe's rules.
func loadRecipe(t *testing.T, doc string) *proxy.Gateway {
	t.Helper()
	cfg, err := config.Parse("recipe.yaml", []byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	g := proxy.New(proxy.Deps{Log: zerolog.Nop()})
	if err := g.Load(cfg); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	return g
}
