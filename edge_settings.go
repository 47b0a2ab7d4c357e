package main

import (
	"strconv"
	"strings"

	"sluice/config"
)

// setting is one restart-only setting's name and value as the reload
// compares and logs it.
type setting struct{ name, value string }

// edgeSettings are the listeners' TLS and HTTP/2 settings: the listeners
// are opened once at start, so a reload that changes one of these only
// warns. Certificate *files* are not among them: they are watched and
// reloaded by themselves.
func edgeSettings(c *config.Config) []setting {
	certs := make([]string, len(c.TLS.Certificates))
	for i, ct := range c.TLS.Certificates {
		certs[i] = ct.CertFile + "+" + ct.KeyFile
	}
	return []setting{
		{"tls.listen", c.TLS.Listen},
		{"tls.certificates", strings.Join(certs, ", ")},
		{"tls.minVersion", c.TLS.MinVersion},
		{"tls.clientCAFile", c.TLS.ClientCAFile},
		{"tls.redirectHttp", strconv.FormatBool(c.TLS.RedirectHTTP)},
		{"http2.tls", strconv.FormatBool(c.HTTP2.OverTLS())},
		{"http2.h2c", strconv.FormatBool(c.HTTP2.H2C)},
	}
}
