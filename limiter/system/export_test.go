package system

import "time"

// Hooks for the tests of ProcessCPU, which must not depend on real CPU time.

var ParseStat = parseStat

func NewProcessCPUFrom(read func() (time.Duration, error), cores int) *ProcessCPU {
	return &ProcessCPU{read: read, cores: func() int { return cores }}
}

// NewProcessCPUReading is NewProcessCPU (its count of cores) with read in
// place of /proc/self/stat.
func NewProcessCPUReading(read func() (time.Duration, error)) *ProcessCPU {
	p := NewProcessCPU()
	p.read = read
	return p
}

func (p *ProcessCPU) Sample(wall time.Time) { p.sample(wall) }
