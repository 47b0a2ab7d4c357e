package limiter_test

import (
	"testing"

	"sluice/config"
)

// relate: reads are blocked while writes pass at the threshold; the writes
// themselves are not limited by it.
func TestRelateQPS(t *testing.T) {
	r := qps("read", 5)
	r.Strategy, r.RefResource = config.StrategyRelate, "write"
	f := compile(t, r)
	read, write := f.Checker("read", "default"), f.Checker("write", "default")
	for i := range 4 {
		tok, v := write.Enter(t0+int64(i)*ms, "", 1)
		if v.Blocked {
			t.Fatal("write blocked")
		}
		tok.Exit(t0, false)
	}
	if _, v := read.Enter(t0+10*ms, "", 1); v.Blocked {
		t.Errorf("read blocked with writes at 4/s < 5")
	}
	for i := range 10 {
		if _, v := write.Enter(t0+20*ms+int64(i), "", 1); v.Blocked {
			t.Errorf("write %d blocked by a rule of read", i)
		}
	}
	if _, v := read.Enter(t0+30*ms, "", 1); !v.Blocked {
		t.Errorf("read passed while writes are at 14/s >= 5")
	}
	if _, v := read.Enter(t0+1200*ms, "", 1); v.Blocked {
		t.Errorf("read blocked after the writes' second passed")
	}
}

func TestRelateConcurrency(t *testing.T) {
	r := config.FlowRule{Resource: "read", LimitApp: "default", Grade: config.GradeConcurrency, Count: 2, Strategy: config.StrategyRelate, RefResource: "write"}
	f := compile(t, r)
	read, write := f.Checker("read", "default"), f.Checker("write", "default")
	w1, _ := write.Enter(t0, "", 1)
	w2, _ := write.Enter(t0, "", 1)
	if _, v := read.Enter(t0, "", 1); !v.Blocked {
		t.Errorf("read passed with 2 writes in flight")
	}
	w1.Exit(t0+ms, false)
	if _, v := read.Enter(t0+ms, "", 1); v.Blocked {
		t.Errorf("read blocked with 1 write in flight")
	}
	w2.Exit(t0+ms, false)
}

// chain: the rule applies only to calls entering through its entrance and
// counts only them.
func TestChain(t *testing.T) {
	r := qps("r", 3)
	r.Strategy, r.RefResource = config.StrategyChain, "web"
	f := compile(t, r)
	web, app := f.Checker("r", "web"), f.Checker("r", "app")
	for i := range 10 {
		if _, v := app.Enter(t0, "", 1); v.Blocked {
			t.Fatalf("app call %d blocked by a web chain rule", i)
		}
	}
	for i := range 5 {
		if _, v := web.Enter(t0, "", 1); v.Blocked != (i >= 3) {
			t.Errorf("web call %d: blocked %v", i, v.Blocked)
		}
	}
	st := f.Stats(t0)
	if len(st) != 1 || len(st[0].Entrances) != 2 || st[0].Entrances[0].Name != "app" || st[0].Entrances[0].PassQps != 10 || st[0].Entrances[1].PassQps != 3 || st[0].Entrances[1].BlockQps != 2 {
		t.Errorf("stats %+v", st)
	}
}
