package admin

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// TLSMetrics exports the served TLS certificates' expiry, so that an alert
// can fire before one expires. Label values are the certificates' names
// (from the configured files), never request data. Safe for concurrent
// use; build it with NewTLSMetrics.
type TLSMetrics struct {
	expiry *prometheus.GaugeVec // name
}

// NewTLSMetrics creates the collectors and registers them on reg (nil: not
// registered).
func NewTLSMetrics(reg prometheus.Registerer) *TLSMetrics {
	m := &TLSMetrics{expiry: prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "sluice_tls_certificate_expiry_timestamp_seconds",
		Help: "Unix time when each served TLS certificate expires (its notAfter), by its first DNS name.",
	}, []string{"name"})}
	if reg != nil {
		reg.MustRegister(m.expiry)
	}
	return m
}

// Certificate sets the expiry of the certificate served for name.
func (m *TLSMetrics) Certificate(name string, notAfter time.Time) {
	m.expiry.WithLabelValues(name).Set(float64(notAfter.Unix()))
}
