package system_test

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"

	"sluice/limiter/system"
)

func TestParseStat(t *testing.T) {
	// utime 250 and stime 50 ticks = 3 s; the command holds ") " to confuse a
	// naive split.
	line := "1234 (evil) proc) S 1 1234 1234 0 -1 4194560 500 0 0 0 250 50 0 0 20 0 8 0 100 1000000 200\n"
	got, err := system.ParseStat([]byte(line))
	if err != nil || got != 3*time.Second {
		t.Errorf("ParseStat = %v, %v; want 3s", got, err)
	}
	for _, bad := range []string{"", "1 (x) S 1 2", "1 (x) S 1 2 3 4 5 6 7 8 9 10 x 0"} {
		if _, err := system.ParseStat([]byte(bad)); err == nil {
			t.Errorf("ParseStat(%q): no error", bad)
		}
	}
}

func TestProcessCPUSamples(t *testing.T) {
	var cpu time.Duration
	var fail bool
	p := system.NewProcessCPUFrom(func() (time.Duration, error) {
		if fail {
			return 0, errors.New("gone")
		}
		return cpu, nil
	}, 4)
	t0 := time.Unix(0, 0)
	p.Sample(t0)
	if u := p.Usage(); u != 0 {
		t.Errorf("after one sample: %v, want 0", u)
	}
	cpu = 2 * time.Second // 2 s of CPU in 1 s on 4 cores
	p.Sample(t0.Add(time.Second))
	if u := p.Usage(); u != 0.5 {
		t.Errorf("usage %v, want 0.5", u)
	}
	cpu = 10 * time.Second // more than the cores can do: clamped
	p.Sample(t0.Add(2 * time.Second))
	if u := p.Usage(); u != 1 {
		t.Errorf("usage %v, want 1 (clamped)", u)
	}
	fail = true
	p.Sample(t0.Add(3 * time.Second))
	if u := p.Usage(); u != 1 {
		t.Errorf("a failed read changed usage to %v", u)
	}
}

func TestProcessCPURunStops(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("no /proc")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	p := system.NewProcessCPU()
	p.Run(ctx, time.Hour) // returns at once: ctx is done
	if u := p.Usage(); u < 0 || u > 1 {
		t.Errorf("usage %v out of range", u)
	}
}
