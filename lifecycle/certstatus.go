package lifecycle

import (
	"sync"
	"time"

	"github.com/rs/zerolog"

	"sluice/admin"
)

// certStatus reports the TLS certificates the way a rules file is
// reported: a renewal that does not load counts as a failed reload and
// shows in /api/rules (tlsError) until the certificates load again, and
// each served certificate's expiry is a metric.
type certStatus struct {
	tr      *traffic
	metrics *admin.Metrics
	expiry  *admin.TLSMetrics
	log     zerolog.Logger

	mu      sync.Mutex
	lastErr string
}

func newCertStatus(tr *traffic, m *admin.Metrics, expiry *admin.TLSMetrics, log zerolog.Logger) *certStatus {
	c := &certStatus{tr: tr, metrics: m, expiry: expiry, log: log}
	c.export()
	return c
}

func (c *certStatus) export() {
	if c.tr.certs == nil {
		return
	}
	var served []admin.CertExpiry
	for _, ci := range c.tr.certs.Certificates() {
		served = append(served, admin.CertExpiry{Name: ci.Name, NotAfter: ci.NotAfter})
	}
	c.expiry.Served(served)
}

// report records one reload of the certificate files (a pair that did not
// load is named at its line in the rules file: loadCerts).
func (c *certStatus) report(err error) {
	c.export()
	c.mu.Lock()
	defer c.mu.Unlock()
	if err != nil {
		c.lastErr = err.Error()
		c.metrics.Reload(false, time.Now())
		return
	}
	c.lastErr = ""
}

// state adds the certificates' last error to what the reloader reports.
func (c *certStatus) state(rules func() admin.State) func() admin.State {
	return func() admin.State {
		st := rules()
		c.mu.Lock()
		st.TLSError = c.lastErr
		c.mu.Unlock()
		return st
	}
}
