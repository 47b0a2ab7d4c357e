package upstream

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/url"
	"time"
)

// ProbeFunc sends one health probe to url and reports whether it was good.
// It must return by the time timeout has passed or ctx has ended.
type ProbeFunc func(ctx context.Context, url string, timeout time.Duration) bool

// HTTPProbe returns a ProbeFunc that sends GET url and calls the probe good
// when a 2xx or 3xx status arrives within the timeout (redirects are not
// followed). A nil client gets one that opens a new connection for each
// probe, so a probe also tests that the target accepts connections and
// leaves nothing behind.
func HTTPProbe(client *http.Client) ProbeFunc {
	if client == nil {
		client = &http.Client{
			Transport: &http.Transport{
				Proxy:             nil,
				DialContext:       (&net.Dialer{}).DialContext,
				DisableKeepAlives: true,
			},
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		}
	}
	return func(ctx context.Context, target string, timeout time.Duration) bool {
		ctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
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
