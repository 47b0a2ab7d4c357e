package lifecycle

import (
	"slices"
	"strconv"
	"strings"

	"sluice/config"
)

// startSetting is a rules.yaml setting that main reads once, at start.
type startSetting struct {
	name string
	// flagged reports whether a command-line flag fixes the setting: the
	// file's value then never applies, at reload or at restart.
	flagged func(o Options) bool
	// value is the setting as one string; it is logged as value of the
	// redacted file (config.Redacted), so a secret never is.
	value func(c *config.Config) string
}

// startSettings lists every setting read only at start; everything else in
// rules.yaml applies at the reload (admin.token and admin.hosts included,
// see applyAdminToken and applyAdminHosts; server.sendTimeout for new
// connections, see announceLive; the certificate files themselves are watched and
// reloaded, see traffic.watchCerts). A setting main starts reading once
// belongs here.
func startSettings() []startSetting {
	return []startSetting{
		{name: "listen", flagged: func(o Options) bool { return o.Listen != "" },
			value: func(c *config.Config) string { return c.Listen }},
		{name: "admin.listen", flagged: func(o Options) bool { return o.Admin != "" },
			value: (*config.Config).AdminListen},
		{name: "log.level", flagged: func(o Options) bool { return o.LogLevel != "" },
			value: func(c *config.Config) string { return c.Log.Level }},
		{name: "log.format", flagged: func(o Options) bool { return o.LogFormat != "" },
			value: func(c *config.Config) string { return c.Log.Format }},
		{name: "tls.listen", flagged: never, value: func(c *config.Config) string { return c.TLS.Listen }},
		{name: "tls.certificates", flagged: never, value: func(c *config.Config) string {
			pairs := make([]string, len(c.TLS.Certificates))
			for i, p := range c.TLS.Certificates {
				pairs[i] = p.CertFile + "+" + p.KeyFile
			}
			return strings.Join(pairs, ", ")
		}},
		{name: "tls.minVersion", flagged: never, value: func(c *config.Config) string { return c.TLS.MinVersion }},
		{name: "tls.clientCAFile", flagged: never, value: func(c *config.Config) string { return c.TLS.ClientCAFile }},
		{name: "tls.redirectHttp", flagged: never,
			value: func(c *config.Config) string { return strconv.FormatBool(c.TLS.RedirectHTTP) }},
		{name: "http2.tls", flagged: never,
			value: func(c *config.Config) string { return strconv.FormatBool(c.HTTP2.OverTLS()) }},
		{name: "http2.h2c", flagged: never,
			value: func(c *config.Config) string { return strconv.FormatBool(c.HTTP2.H2C) }},
		// net/http reads these into its servers once; server.sendTimeout is
		// the gateway's own and applies to new connections (announceLive).
		{name: "server.readHeaderTimeout", flagged: func(o Options) bool { return o.ReadHeaderTimeout > 0 },
			value: func(c *config.Config) string { return c.Server.ReadHeaderTimeout.String() }},
		{name: "server.idleTimeout", flagged: never,
			value: func(c *config.Config) string { return c.Server.IdleTimeout.String() }},
		{name: "server.maxConcurrentStreams", flagged: never,
			value: func(c *config.Config) string { return strconv.Itoa(c.Server.MaxConcurrentStreams) }},
		{name: "cluster.redis", flagged: never,
			value: func(c *config.Config) string { return c.Cluster.Redis }},
		{name: "cluster.sentinel", flagged: never,
			value: func(c *config.Config) string { return sentinelSetting(c.Cluster.Sentinel) }},
		{name: "cluster.clusterAddrs", flagged: never,
			value: func(c *config.Config) string { return strings.Join(c.Cluster.ClusterAddrs, ",") }},
		{name: "cluster.namespace", flagged: never,
			value: func(c *config.Config) string { return c.Cluster.Namespace }},
		// The rules source is connected once; a reload keeps merging the
		// document of the source the gateway started with.
		{name: "rulesSource.redis", flagged: never,
			value: func(c *config.Config) string { return c.RulesSource.Redis }},
		{name: "rulesSource.sentinel", flagged: never,
			value: func(c *config.Config) string { return sentinelSetting(c.RulesSource.Sentinel) }},
		{name: "rulesSource.clusterAddrs", flagged: never,
			value: func(c *config.Config) string { return strings.Join(c.RulesSource.ClusterAddrs, ",") }},
		{name: "rulesSource.key", flagged: never,
			value: func(c *config.Config) string { return c.RulesSource.Key }},
		{name: "rulesSource.cacheFile", flagged: never,
			value: func(c *config.Config) string { return c.RulesSource.CacheFile }},
	}
}

// sentinelSetting is a sentinel setting in one line, its set fields only.
func sentinelSetting(s *config.Sentinel) string {
	if s == nil {
		return ""
	}
	parts := []string{"masterName=" + s.MasterName, "addrs=" + strings.Join(s.Addrs, ",")}
	for _, f := range [][2]string{{"username", s.Username}, {"password", s.Password},
		{"sentinelUsername", s.SentinelUsername}, {"sentinelPassword", s.SentinelPassword}} {
		if f[1] != "" {
			parts = append(parts, f[0]+"="+f[1])
		}
	}
	if s.DB != 0 {
		parts = append(parts, "db="+strconv.Itoa(s.DB))
	}
	if s.TLS {
		parts = append(parts, "tls=true")
	}
	return strings.Join(parts, " ")
}

func never(Options) bool { return false }

// announceSettings is the one place where a reload's settings are compared
// with what is in force; it logs what the reload could not apply and puts
// the admin token and hosts in force. started is the file the process started with
// (start-only settings keep its values), prev the file loaded before next.
func (r *reloader) announceSettings(started, prev, next *config.Config) {
	for _, s := range startSettings() {
		now := s.value(next)
		// Once per change, and not for a change back to the value in force.
		if s.flagged(r.opts) || now == s.value(prev) || now == s.value(started) {
			continue
		}
		old, shown := s.value(started.Redacted()), s.value(next.Redacted())
		if shown == old {
			shown += " (a hidden password changed)"
		}
		r.log.Warn().Str("setting", s.name).Str("old", old).Str("new", shown).
			Msg(s.name + " changed in the rules file: it takes effect at restart")
	}
	r.applyAdminHosts(prev, next) // before the token: a client that sees the token in force sees the hosts too
	r.applyAdminToken(prev, next)
	r.announceLive(prev, next)
	if !r.clusterOn {
		if res, ok := next.ClusterRule(); ok {
			r.log.Warn().Str("resource", res).
				Msg("clusterMode rule checked locally: the gateway started without cluster rules or a cluster Redis; restart to connect to Redis")
		}
	}
}

// announceLive logs a reload's change to a setting that applies to what
// opens next: server.sendTimeout bounds the connections and HTTP/2 streams
// opened from the reload on (a connection open before keeps its socket's).
func (r *reloader) announceLive(prev, next *config.Config) {
	if old, now := prev.Server.SendTimeout, next.Server.SendTimeout; old != now {
		r.log.Info().Str("setting", "server.sendTimeout").Str("old", old.String()).Str("new", now.String()).
			Msg("server.sendTimeout changed: it applies to connections and HTTP/2 streams opened from now on")
	}
}

// adminToken is the admin token in force with cfg: SLUICE_ADMIN_TOKEN wins
// over admin.token. Either is trimmed of surrounding white space (New trims
// the variable): a token read from a file often ends in a line break, which
// no client sends and bearer trims from the header, so it could never match.
func (o Options) adminToken(cfg *config.Config) string {
	if o.AdminToken != "" {
		return o.AdminToken
	}
	return strings.TrimSpace(cfg.Admin.Token)
}

// applyAdminToken puts next's admin token in force at once, so that a
// rotated token works and the old one is refused from this reload on. It
// never logs a token. prev is nil at the first load.
func (r *reloader) applyAdminToken(prev, next *config.Config) {
	if r.setToken == nil {
		return // the admin listener is off
	}
	tok := r.opts.adminToken(next)
	r.setToken(tok)
	if prev == nil {
		return
	}
	prevTok := strings.TrimSpace(prev.Admin.Token)
	if strings.TrimSpace(next.Admin.Token) == prevTok {
		return
	}
	if r.opts.AdminToken != "" {
		r.log.Warn().Str("setting", "admin.token").
			Msg("admin.token changed in the rules file, but " + EnvAdminToken + " overrides it: the token in force is unchanged")
		return
	}
	ev := r.log.Info().Str("setting", "admin.token").Bool("required", tok != "")
	switch {
	case tok == "":
		ev.Msg("admin.token removed: writes need no token and are accepted only from this machine (a loopback peer)")
	case prevTok == "":
		ev.Msg("admin.token set: writes need it from now on")
	default:
		ev.Msg("admin.token changed: the new token is in force, the old one is refused")
	}
}

// applyAdminHosts puts next's admin.hosts in force at once: the admin
// listener answers to those Host names, besides IP addresses and localhost,
// from this reload on. prev is nil at the first load.
func (r *reloader) applyAdminHosts(prev, next *config.Config) {
	if r.setHosts == nil {
		return // the admin listener is off
	}
	r.setHosts(next.Admin.Hosts)
	if prev == nil || slices.Equal(prev.Admin.Hosts, next.Admin.Hosts) {
		return
	}
	r.log.Info().Str("setting", "admin.hosts").Strs("hosts", next.Admin.Hosts).
		Msg("admin.hosts changed: the admin listener answers to these names from now on, besides IP addresses and localhost")
}
