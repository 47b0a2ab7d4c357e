package system

import "time"

// Hooks for the tests of ProcessCPU, which must not depend on real CPU time.

var ParseStat = parseStat

func NewProcessCPUFrom(read func() (time.Duration, error), cores int) *ProcessCPU {
	return &ProcessCPU{read: read, cores: cores}
}

func (p *ProcessCPU) Sample(wall time.Time) { p.sample(wall) }
