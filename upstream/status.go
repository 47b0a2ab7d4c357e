package upstream

import "time"

// UpstreamStatus is what the admin API shows of one upstream.
type UpstreamStatus struct {
	Name    string
	Balance Balance
	// Panic: no target is available, so every target gets traffic.
	Panic bool
	// RequestsPerSecond and RetriesPerSecond are client requests and the
	// retries made for them, over the last 10 s when the upstream retries
	// (its retry budget counts them). An upstream that does not retry
	// sends each request once: its requests are its targets' attempts,
	// over the last second, and it has no retries.
	RequestsPerSecond, RetriesPerSecond float64
	Targets                             []TargetStatus
}

// TargetStatus is what the admin API shows of one target.
type TargetStatus struct {
	URL    string
	Weight int
	// Healthy is the active checks' verdict (true without checks).
	Healthy bool
	// EjectedUntil is when the target's ejection ends, on the Pool's clock;
	// meaningful when Ejected.
	Ejected      bool
	EjectedUntil int64
	// Available: healthy and not ejected; balancing uses it.
	Available bool
	InFlight  int64
	// Attempts sent, failed and sent as retries, per second over the last
	// second.
	RequestsPerSecond, ErrorsPerSecond, RetriesPerSecond float64
}

// Status describes the committed upstreams at now, in the order Commit got
// them.
func (p *Pool) Status(now int64) []UpstreamStatus {
	p.mu.Lock()
	ups := p.current
	p.mu.Unlock()
	out := make([]UpstreamStatus, 0, len(ups))
	for _, u := range ups {
		// Panic is read from the targets, not from the last request's
		// verdict, which stays set until a request comes after a recovery.
		us := UpstreamStatus{Name: u.name, Balance: u.balance, Panic: true}
		if u.retries > 0 {
			sh := u.sh
			sh.mu.Lock()
			window := float64(windowBuckets * ratesWidth / int64(time.Second))
			us.RequestsPerSecond = float64(sh.rates.total(now, cRequests)) / window
			us.RetriesPerSecond = float64(sh.rates.total(now, cRetries)) / window
			sh.mu.Unlock()
		}
		for _, m := range u.members {
			st := m.st
			until := st.ejectedUntil.Load()
			ts := TargetStatus{
				URL:          st.url,
				Weight:       int(m.weight),
				Healthy:      !st.down.Load(),
				Ejected:      now < until,
				EjectedUntil: until,
				Available:    st.available(now),
				InFlight:     st.inFlight.Load(),
			}
			us.Panic = us.Panic && !ts.Available
			st.mu.Lock()
			perSec := float64(time.Second) / float64(windowBuckets*statsWidth)
			ts.RequestsPerSecond = float64(st.stats.total(now, cRequests)) * perSec
			ts.ErrorsPerSecond = float64(st.stats.total(now, cErrors)) * perSec
			ts.RetriesPerSecond = float64(st.stats.total(now, cRetries)) * perSec
			st.mu.Unlock()
			us.Targets = append(us.Targets, ts)
			if u.retries == 0 {
				us.RequestsPerSecond += ts.RequestsPerSecond
			}
		}
		out = append(out, us)
	}
	return out
}
