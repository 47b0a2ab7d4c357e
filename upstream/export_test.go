package upstream

// Probing reports how many health probes run.
func (p *Pool) Probing() int { return p.probing() }
