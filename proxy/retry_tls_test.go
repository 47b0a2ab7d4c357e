package proxy_test

import (
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
)

// TestRetryAfterUntrustedCertificate: an https:// target whose certificate
// the gateway does not trust (expired, self-signed, another host's) fails
// in the TLS handshake, before anything is sent: like a refused
// connection, any method goes on to another target, on both forwarders.
func TestRetryAfterUntrustedCertificate(t *testing.T) {
	var untrustedGot atomic.Int64
	untrusted := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		untrustedGot.Add(1)
	}))
	untrusted.Config.ErrorLog = log.New(io.Discard, "", 0) // its handshake errors are the point
	untrusted.StartTLS()
	t.Cleanup(untrusted.Close)
	for _, fwd := range []string{"standard", "fast"} {
		for _, method := range []string{"GET", "POST"} {
			good := newCountingUp(t, "ok")
			gw, cnt, _ := retryGateway(t, fwd, 1, untrusted.URL, good.url())
			body := ""
			if method == "POST" {
				body = "order=1"
			}
			if st, _ := send(t, method, gw+"/x", body, false); st != 200 {
				t.Errorf("%s %s: client got %d, want 200 from the other target", fwd, method, st)
			}
			if n := good.count(method); n != 1 {
				t.Errorf("%s %s: the good target saw %d, want 1", fwd, method, n)
			}
			if pass, errs := cnt.counts(); pass+errs != 1 {
				t.Errorf("%s %s: resource counted %d passes + %d errors for 1 request", fwd, method, pass, errs)
			}
		}
	}
	if n := untrustedGot.Load(); n != 0 {
		t.Errorf("the untrusted target served %d requests, want 0", n)
	}
}
