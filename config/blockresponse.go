package config

import (
	"net/url"
	"strings"
)

// applyRouteDefaults gives each route what it leaves out from the
// top level: server.maxBodyBytes, and every field of blockResponse the
// route's own blockResponse does not set (SPEC §4: a route's
// blockResponse overrides the top-level fields it sets). It runs after
// the top-level blockResponse has its defaults.
func (c *checker) applyRouteDefaults() {
	cfg := c.cfg
	top := cfg.BlockResponse
	for i := range cfg.Routes {
		r, p := &cfg.Routes[i], idx("routes", i)
		if !c.has(p + ".maxBodyBytes") {
			r.MaxBodyBytes = cfg.Server.MaxBodyBytes
		}
		b, bp := &r.BlockResponse, p+".blockResponse"
		if !c.has(bp + ".status") {
			b.Status = top.Status
		}
		if !c.has(bp + ".contentType") {
			b.ContentType = top.ContentType
		}
		if !c.has(bp + ".body") {
			b.Body = top.Body
		}
		if !c.has(bp + ".redirect") {
			b.Redirect = top.Redirect
		}
		if b.RateLimitHeaders == nil {
			b.RateLimitHeaders = top.RateLimitHeaders
		}
		if !c.has(bp + ".legacyHeaders") {
			b.LegacyHeaders = top.LegacyHeaders
		}
	}
}

// blockResponse checks the top-level blockResponse, then the fields each
// route's own blockResponse sets (a field it takes from the top level was
// checked there), and the routes' maxBodyBytes.
func (c *checker) blockResponse(ix routeIndex) {
	c.checkBlockResponse("blockResponse", c.cfg.BlockResponse, ix.order, func(string) bool { return true })
	for i, r := range c.cfg.Routes {
		p := idx("routes", i)
		if c.has(p + ".maxBodyBytes") {
			c.nonNegative(p+".maxBodyBytes", float64(r.MaxBodyBytes))
		}
		bp := p + ".blockResponse"
		if !c.has(bp) {
			continue
		}
		c.checkBlockResponse(bp, r.BlockResponse, []string{r.Resource}, func(f string) bool { return c.has(bp + "." + f) })
	}
}

// checkBlockResponse checks the fields of b that set reports as given;
// the body is rendered for resources.
func (c *checker) checkBlockResponse(path string, b BlockResponse, resources []string, set func(field string) bool) {
	if set("status") && (b.Status < 400 || b.Status > 599) {
		c.add(path+".status", "must be an HTTP error status in 400..599, got %d", b.Status)
	}
	if set("contentType") && b.ContentType == "" {
		c.add(path+".contentType", "must not be empty")
	}
	if set("body") {
		if msg := checkBodyTemplate(b.Body, resources); msg != "" {
			c.add(path+".body", "%s", msg)
		}
	}
	if set("redirect") && b.Redirect != "" {
		if msg := checkRedirect(b.Redirect); msg != "" {
			c.add(path+".redirect", "%s", msg)
		}
	}
}

// checkRedirect accepts what a Location header may carry to any client:
// an absolute http(s) URL with a host, or a path on this host ("/down.html").
func checkRedirect(s string) string {
	const want = "must be an absolute http:// or https:// URL or a path starting with \"/\", got "
	if strings.ContainsAny(s, " \t\r\n") || strings.ContainsFunc(s, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
		return want + quote(s)
	}
	u, err := url.Parse(s)
	if err != nil {
		return want + quote(s)
	}
	if u.Scheme == "" {
		// A path; "//host/x" would be read as another host by a browser.
		if !strings.HasPrefix(s, "/") || strings.HasPrefix(s, "//") || u.Host != "" {
			return want + quote(s)
		}
		return ""
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return want + quote(s)
	}
	return ""
}
