package admin

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// TLSMetrics exports the served TLS certificates' expiry, so that an alert
// can fire before one expires. Label values are the certificates' names
// (from the configured files), never request data. Safe for concurrent
// use; build it with NewTLSMetrics.
type TLSMetrics struct {
	expiry     *prometheus.GaugeVec // name
	handshakes map[string]prometheus.Counter
	mu         sync.Mutex
	names      map[string]bool // the names last served; guarded by mu
}

// NewTLSMetrics creates the collectors and registers them on reg (nil: not
// registered). reasons are every reason a handshake may fail for
// (tlsedge.HandshakeReasons), each shown from 0.
func NewTLSMetrics(reg prometheus.Registerer, reasons []string) *TLSMetrics {
	m := &TLSMetrics{expiry: prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "sluice_tls_certificate_expiry_timestamp_seconds",
		Help: "Unix time when each served TLS certificate expires (its notAfter), by its first DNS name.",
	}, []string{"name"}), handshakes: make(map[string]prometheus.Counter, len(reasons))}
	failed := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "sluice_tls_handshake_errors_total",
		Help: "TLS handshakes on tls.listen that failed, by reason (not_tls, closed, timeout, unknown_name, version, cipher, client_certificate, certificate_rejected, other).",
	}, []string{"reason"})
	for _, r := range reasons {
		m.handshakes[r] = failed.WithLabelValues(r)
	}
	if reg != nil {
		reg.MustRegister(m.expiry, failed)
	}
	return m
}

// HandshakeFailed counts a failed TLS handshake; reason is one of those
// NewTLSMetrics was given (another is not counted).
func (m *TLSMetrics) HandshakeFailed(reason string) {
	if c := m.handshakes[reason]; c != nil {
		c.Inc()
	}
}

// CertExpiry is one served certificate's name and end.
type CertExpiry struct {
	Name     string
	NotAfter time.Time
}

// Served sets the expiry series to the certificates served now: a name
// that is no longer served loses its series (its old expiry would fire an
// alert for a certificate nobody gets), and a name two certificates share
// shows the earlier expiry, so that an alert fires for whichever ends first.
func (m *TLSMetrics) Served(certs []CertExpiry) {
	first := make(map[string]time.Time, len(certs))
	for _, c := range certs {
		if t, ok := first[c.Name]; !ok || c.NotAfter.Before(t) {
			first[c.Name] = c.NotAfter
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for name := range m.names {
		if _, ok := first[name]; !ok {
			m.expiry.DeleteLabelValues(name)
		}
	}
	m.names = make(map[string]bool, len(first))
	for name, t := range first {
		m.expiry.WithLabelValues(name).Set(float64(t.Unix()))
		m.names[name] = true
	}
}
