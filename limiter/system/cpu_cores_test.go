package system_test

import (
	"runtime"
	"testing"
	"time"

	"sluice/limiter/system"
)

// CPU usage is over the cores the process may use, GOMAXPROCS (which follows
// a cgroup CPU quota), read at each sample: a gateway limited to one CPU on a
// many-core node that keeps its one core busy reads 1, so maxCpuUsage 0.8
// blocks; had it been divided by the host's cores it would read 1/NumCPU and
// never block. Setting GOMAXPROCS stands in for a quota (and for the runtime
// changing it when the quota changes); the test is not parallel for that.
func TestProcessCPUDividesByGOMAXPROCS(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	var cpu time.Duration
	p := system.NewProcessCPUReading(func() (time.Duration, error) { return cpu, nil })
	t0 := time.Unix(0, 0)
	p.Sample(t0)
	for i, tt := range []struct {
		procs int
		cpu   time.Duration // CPU time used in the second
		want  float64
	}{
		{1, time.Second, 1},
		{1, time.Second / 2, 0.5},
		{4, 2 * time.Second, 0.5},
		{4, 3 * time.Second, 0.75},
		{2, 2 * time.Second, 1},
	} {
		runtime.GOMAXPROCS(tt.procs)
		cpu += tt.cpu
		p.Sample(t0.Add(time.Duration(i+1) * time.Second))
		if u := p.Usage(); u != tt.want {
			t.Errorf("GOMAXPROCS %d, %v of CPU in 1 s: usage %v, want %v", tt.procs, tt.cpu, u, tt.want)
		}
	}
}
