package admin_test

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"sluice/admin"
)

// TestTLSExpiryFollowsTheServedCertificates: the expiry series are those of
// the certificates served now. A renewal that changes a certificate's name
// drops the old name's series (its old expiry would page someone for a
// certificate no longer served), and two certificates with one first name
// show the one that expires first.
func TestTLSExpiryFollowsTheServedCertificates(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := admin.NewTLSMetrics(reg, nil)
	srv := admin.New(admin.Options{Registry: reg})
	soon, later := time.Unix(1_800_000_000, 0), time.Unix(1_900_000_000, 0)

	m.Served([]admin.CertExpiry{{Name: "old.example.com", NotAfter: soon}})
	m.Served([]admin.CertExpiry{
		{Name: "shop.example.com", NotAfter: later},
		{Name: "shop.example.com", NotAfter: soon}, // expires first
	})
	text := scrape(t, srv)
	if strings.Contains(text, "old.example.com") {
		t.Errorf("a certificate no longer served still has an expiry series:\n%s", grepLines(text, "tls_certificate"))
	}
	if want := `sluice_tls_certificate_expiry_timestamp_seconds{name="shop.example.com"} 1.8e+09`; !strings.Contains(text, want) {
		t.Errorf("want %s (the earlier of the two), got:\n%s", want, grepLines(text, "tls_certificate"))
	}
}

func grepLines(text, sub string) string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
