package proxy_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/rs/zerolog"

	"sluice/config"
	"sluice/proxy"
	ups "sluice/upstream"
)

// upCounter counts the upstream events a gateway reports, by target.
type upCounter struct {
	mu       sync.Mutex
	answered map[string]map[int]int
	ejected  map[string]int
	retries  int
}

func (c *upCounter) Upstream(string) ups.UpstreamObserver { return upCounterUp{c} }
func (c *upCounter) Target(_, target string) ups.TargetObserver {
	return upCounterTarget{c, target}
}

type upCounterUp struct{ c *upCounter }

func (o upCounterUp) Retried()  { o.c.mu.Lock(); o.c.retries++; o.c.mu.Unlock() }
func (o upCounterUp) Panicked() {}

type upCounterTarget struct {
	c      *upCounter
	target string
}

func (o upCounterTarget) Answered(code int) {
	o.c.mu.Lock()
	defer o.c.mu.Unlock()
	if o.c.answered[o.target] == nil {
		o.c.answered[o.target] = map[int]int{}
	}
	o.c.answered[o.target][code]++
}
func (o upCounterTarget) Ejected() { o.c.mu.Lock(); o.c.ejected[o.target]++; o.c.mu.Unlock() }

func (c *upCounter) count(target string, code int) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.answered[target][code]
}

func upstreamGateway(t *testing.T, fwd, rules string) (string, *upCounter, *proxy.Gateway) {
	t.Helper()
	cfg, err := config.Parse("balance.yaml", []byte(rules))
	if err != nil {
		t.Fatal(err)
	}
	uc := &upCounter{answered: map[string]map[int]int{}, ejected: map[string]int{}}
	g := proxy.New(proxy.Deps{Log: zerolog.Nop(), Forwarder: fwd, Upstreams: uc})
	if err := g.Load(cfg); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(g.Close)
	srv := httptest.NewServer(g)
	t.Cleanup(srv.Close)
	return srv.URL, uc, g
}

// TestEjectedTargetGetsNothing: a refused target fails consecutiveFailures
// attempts (each retried elsewhere, so clients see none), is ejected, and
// gets no more attempts; the API shows it ejected, and each attempt it got
// is counted as an error (code 0).
func TestEjectedTargetGetsNothing(t *testing.T) {
	for _, fwd := range []string{"standard", "fast"} {
		good := newCountingUp(t, "ok")
		bad := refusedURL(t)
		gw, uc, g := upstreamGateway(t, fwd, fmt.Sprintf(`
upstreams:
  up:
    targets: [%q, %q]
    retries: 1
    passive: { consecutiveFailures: 3, ejectFor: 1h, maxEjectedPercent: 50 }
routes:
  - path: /*
    upstream: up
`, bad, good.url()))
		for i := range 40 {
			if st, _ := send(t, "GET", gw+"/x", "", false); st != 200 {
				t.Fatalf("%s: request %d: %d, want 200", fwd, i, st)
			}
		}
		if n := uc.count(bad, 0); n != 3 {
			t.Errorf("%s: the refused target got %d attempts, want 3 (then ejected)", fwd, n)
		}
		if uc.ejected[bad] != 1 || good.count("GET") != 40 {
			t.Errorf("%s: ejections %d, good target served %d of 40", fwd, uc.ejected[bad], good.count("GET"))
		}
		st := g.Upstreams(g.Now())[0]
		if tgt := st.Targets[0]; tgt.URL != bad || !tgt.Ejected || tgt.Available {
			t.Errorf("%s: status of the refused target: %+v", fwd, tgt)
		}
	}
}

// TestHashOnSendsKeysToOneTarget: balance hash on a header keeps each key
// on one target; keys spread over all of them; requests without the
// header are served round robin.
func TestHashOnSendsKeysToOneTarget(t *testing.T) {
	for _, fwd := range []string{"standard", "fast"} {
		var us []*countingUp
		for range 3 {
			us = append(us, newCountingUp(t, "ok"))
		}
		gw, uc, _ := upstreamGateway(t, fwd, fmt.Sprintf(`
upstreams:
  up:
    targets: [%q, %q, %q]
    balance: hash
    hashOn: header:X-User
routes:
  - path: /*
    upstream: up
`, us[0].url(), us[1].url(), us[2].url()))
		owner := map[string]string{}
		for round := range 3 {
			for u := range 30 {
				user := fmt.Sprint("user-", u)
				before := snapshot(uc, us)
				req, _ := http.NewRequest("GET", gw+"/x", nil)
				req.Header.Set("X-User", user)
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				got := changed(before, snapshot(uc, us))
				if round == 0 {
					owner[user] = got
				} else if owner[user] != got {
					t.Fatalf("%s: %s went to %s, before to %s", fwd, user, got, owner[user])
				}
			}
		}
		used := map[string]bool{}
		for _, o := range owner {
			used[o] = true
		}
		if len(used) != 3 {
			t.Errorf("%s: 30 keys used %d of 3 targets", fwd, len(used))
		}
		before := snapshot(uc, us)
		seen := map[string]bool{}
		for range 3 {
			send(t, "GET", gw+"/x", "", false)
			now := snapshot(uc, us)
			seen[changed(before, now)] = true
			before = now
		}
		if len(seen) != 3 {
			t.Errorf("%s: requests without the key went to %d targets, want 3 (round robin)", fwd, len(seen))
		}
	}
}

func snapshot(uc *upCounter, us []*countingUp) map[string]int {
	m := map[string]int{}
	for _, u := range us {
		m[u.url()] = uc.count(u.url(), 200)
	}
	return m
}

func changed(before, after map[string]int) string {
	for k, v := range after {
		if before[k] != v {
			return k
		}
	}
	return ""
}
