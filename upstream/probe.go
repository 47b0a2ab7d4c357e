package upstream

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/url"
	"time"
)

// Probe is one health probe to send.
type Probe struct {
	URL string
	// Protocol is the upstream's: "http1" (or ""), "h2c" (HTTP/2 with prior
	// knowledge) or "h2" (HTTP/2 over TLS), so that a target serving only
	// HTTP/2 is probed as it is served.
	Protocol string
	Timeout  time.Duration
}

// ProbeFunc sends one health probe and reports whether it was good. It
// must return by the time the probe's timeout has passed or ctx has ended.
type ProbeFunc func(ctx context.Context, p Probe) bool

// HTTPProbe returns a ProbeFunc that sends GET and calls the probe good
// when a 2xx or 3xx status arrives within the timeout (redirects are not
// followed). Each probe opens a new connection, so it also tests that the
// target accepts connections, and leaves nothing behind.
func HTTPProbe() ProbeFunc {
	clients := map[string]*http.Client{}
	for _, proto := range []string{"http1", "h2c", "h2"} {
		t := &http.Transport{Proxy: nil, DialContext: (&net.Dialer{}).DialContext, DisableKeepAlives: true}
		var p http.Protocols
		switch proto {
		case "h2c":
			p.SetUnencryptedHTTP2(true)
			t.Protocols = &p
		case "h2":
			p.SetHTTP2(true)
			t.Protocols = &p
			t.ForceAttemptHTTP2 = true
		}
		clients[proto] = &http.Client{
			Transport:     t,
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		}
	}
	return func(ctx context.Context, p Probe) bool {
		client := clients[p.Protocol]
		if client == nil {
			client = clients["http1"]
		}
		ctx, cancel := context.WithTimeout(ctx, p.Timeout)
		defer cancel()
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.URL, nil)
		if err != nil {
			return false
		}
		req.Header.Set("User-Agent", "sluice-health-check")
		resp, err := client.Do(req)
		if err != nil {
			return false
		}
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4<<10))
		resp.Body.Close()
		return resp.StatusCode >= 200 && resp.StatusCode < 400
	}
}

// probeURL is the health path on the target's scheme and host (the
// target's own path, if any, is not prefixed: the path is absolute).
func probeURL(target *url.URL, path string) string {
	u := url.URL{Scheme: target.Scheme, Host: target.Host}
	ref, err := url.Parse(path)
	if err != nil {
		u.Path = path
		return u.String()
	}
	return u.ResolveReference(ref).String()
}
