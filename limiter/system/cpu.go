package system

import (
	"bytes"
	"context"
	"errors"
	"math"
	"os"
	"runtime"
	"strconv"
	"sync/atomic"
	"time"
)

// ProcessCPU samples the CPU usage of this process (not of the host): user +
// system CPU time from /proc/self/stat over each sampling period, divided by
// the period and by the number of cores the process may use. 1 means the
// gateway keeps every core busy, whatever else runs on the host; we measure
// the process because that is the capacity the gateway itself can exhaust,
// and because in a container the host's numbers describe other tenants.
//
// Where /proc is missing (not Linux) Usage stays 0, so maxCpuUsage never
// blocks. The zero ProcessCPU is not usable; use NewProcessCPU. Usage is safe
// for concurrent use; Run is called once.
type ProcessCPU struct {
	usage atomic.Uint64 // math.Float64bits of the last sample

	read  func() (time.Duration, error) // process CPU time so far
	cores func() int                    // cores the process may use now

	lastCPU  time.Duration
	lastWall time.Time
	primed   bool
}

var _ CPUUsage = (*ProcessCPU)(nil)

// NewProcessCPU returns a sampler reading /proc/self/stat; call Run to sample.
func NewProcessCPU() *ProcessCPU {
	return &ProcessCPU{read: readProcSelfStat, cores: maxProcs}
}

// maxProcs is the number of cores the process may use: GOMAXPROCS, which
// since Go 1.25 follows a cgroup CPU quota (Kubernetes limits.cpu, docker
// --cpus) and the affinity mask, where runtime.NumCPU ignores the quota: a
// gateway allowed 1 CPU on a 16-core node would read at most 1/16. It is read
// at each sample because the runtime lowers it when the quota changes.
func maxProcs() int { return runtime.GOMAXPROCS(0) }

// Run samples every period until ctx is done. The first sample is taken at
// once; Usage reports 0 until the second.
func (p *ProcessCPU) Run(ctx context.Context, every time.Duration) {
	if every <= 0 {
		every = time.Second
	}
	p.sample(time.Now())
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			p.sample(now)
		}
	}
}

// Usage returns the last sampled usage in 0..1.
func (p *ProcessCPU) Usage() float64 { return math.Float64frombits(p.usage.Load()) }

func (p *ProcessCPU) sample(wall time.Time) {
	cpu, err := p.read()
	if err != nil {
		return
	}
	if p.primed {
		p.usage.Store(math.Float64bits(usage(cpu-p.lastCPU, wall.Sub(p.lastWall), p.cores())))
	}
	p.lastCPU, p.lastWall, p.primed = cpu, wall, true
}

// usage is CPU time over wall time and cores, clamped to 0..1.
func usage(cpu, wall time.Duration, cores int) float64 {
	if wall <= 0 || cores <= 0 {
		return 0
	}
	u := float64(cpu) / float64(wall) / float64(cores)
	return min(max(u, 0), 1)
}

// clockTicks is USER_HZ, the unit of /proc/<pid>/stat times: 100 on every
// Linux architecture Go supports (reading it needs sysconf, i.e. cgo).
const clockTicks = 100

func readProcSelfStat() (time.Duration, error) {
	b, err := os.ReadFile("/proc/self/stat")
	if err != nil {
		return 0, err
	}
	return parseStat(b)
}

// parseStat returns utime + stime of a /proc/<pid>/stat line. The command
// name (field 2) is in parentheses and may itself hold spaces and ')', so
// fields are counted from the last ')'.
func parseStat(b []byte) (time.Duration, error) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, errors.New("system: /proc/self/stat: no ')'")
	}
	f := bytes.Fields(b[i+1:])
	// f[0] is field 3 (state); utime and stime are fields 14 and 15.
	if len(f) < 13 {
		return 0, errors.New("system: /proc/self/stat: too few fields")
	}
	ut, err1 := strconv.ParseUint(string(f[11]), 10, 64)
	st, err2 := strconv.ParseUint(string(f[12]), 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, errors.New("system: /proc/self/stat: " + err.Error())
	}
	return time.Duration(ut+st) * time.Second / clockTicks, nil
}
