package lifecycle

import (
	"slices"
	"strconv"
	"strings"

	"sluice/admin"
	"sluice/config"
)

// startSetting is a rules.yaml setting that main reads once, at start.
type startSetting struct {
	name string
	// value is the setting as one string; it is logged as value of the
	// redacted file (config.Redacted), so a secret never is.
	value func(c *config.Config) string
	// keep copies the setting from src into dst, so that the rules shown
	// as in force carry the value the process started with.
	keep func(dst, src *config.Config)
}

// startSettings lists every setting read only at start; everything else in
// rules.yaml applies at the reload (admin.token and admin.hosts included,
// see applyAdminToken and applyAdminHosts; server.sendTimeout for new
// connections, see announceLive; the certificate files themselves are watched and
// reloaded, see traffic.watchCerts). A setting main starts reading once
// belongs here.
func startSettings() []startSetting {
	return []startSetting{
		{name: "listen", value: func(c *config.Config) string { return c.Listen },
			keep: func(d, s *config.Config) { d.Listen = s.Listen }},
		{name: "admin.listen", value: (*config.Config).AdminListen,
			keep: func(d, s *config.Config) { d.Admin.Listen = s.Admin.Listen }},
		{name: "log.level", value: func(c *config.Config) string { return c.Log.Level },
			keep: func(d, s *config.Config) { d.Log.Level = s.Log.Level }},
		{name: "log.format", value: func(c *config.Config) string { return c.Log.Format },
			keep: func(d, s *config.Config) { d.Log.Format = s.Log.Format }},
		{name: "tls.listen", value: func(c *config.Config) string { return c.TLS.Listen },
			keep: func(d, s *config.Config) { d.TLS.Listen = s.TLS.Listen }},
		{name: "tls.certificates", value: func(c *config.Config) string {
			pairs := make([]string, len(c.TLS.Certificates))
			for i, p := range c.TLS.Certificates {
				pairs[i] = p.CertFile + "+" + p.KeyFile
			}
			return strings.Join(pairs, ", ")
		}, keep: func(d, s *config.Config) { d.TLS.Certificates = s.TLS.Certificates }},
		{name: "tls.minVersion", value: func(c *config.Config) string { return c.TLS.MinVersion },
			keep: func(d, s *config.Config) { d.TLS.MinVersion = s.TLS.MinVersion }},
		{name: "tls.clientCAFile", value: func(c *config.Config) string { return c.TLS.ClientCAFile },
			keep: func(d, s *config.Config) { d.TLS.ClientCAFile = s.TLS.ClientCAFile }},
		{name: "tls.redirectHttp",
			value: func(c *config.Config) string { return strconv.FormatBool(c.TLS.RedirectHTTP) },
			keep:  func(d, s *config.Config) { d.TLS.RedirectHTTP = s.TLS.RedirectHTTP }},
		{name: "tls.strictSni",
			value: func(c *config.Config) string { return strconv.FormatBool(c.TLS.StrictSNI) },
			keep:  func(d, s *config.Config) { d.TLS.StrictSNI = s.TLS.StrictSNI }},
		{name: "http2.tls",
			value: func(c *config.Config) string { return strconv.FormatBool(c.HTTP2.OverTLS()) },
			keep:  func(d, s *config.Config) { d.HTTP2.TLS = s.HTTP2.TLS }},
		{name: "http2.h2c",
			value: func(c *config.Config) string { return strconv.FormatBool(c.HTTP2.H2C) },
			keep:  func(d, s *config.Config) { d.HTTP2.H2C = s.HTTP2.H2C }},
		// net/http reads these into its servers once; server.sendTimeout is
		// the gateway's own and applies to new connections (announceLive).
		{name: "server.readHeaderTimeout", value: func(c *config.Config) string { return c.Server.ReadHeaderTimeout.String() },
			keep: func(d, s *config.Config) { d.Server.ReadHeaderTimeout = s.Server.ReadHeaderTimeout }},
		{name: "server.idleTimeout",
			value: func(c *config.Config) string { return c.Server.IdleTimeout.String() },
			keep:  func(d, s *config.Config) { d.Server.IdleTimeout = s.Server.IdleTimeout }},
		{name: "server.maxConcurrentStreams",
			value: func(c *config.Config) string { return strconv.Itoa(c.Server.MaxConcurrentStreams) },
			keep:  func(d, s *config.Config) { d.Server.MaxConcurrentStreams = s.Server.MaxConcurrentStreams }},
		{name: "cluster.redis",
			value: func(c *config.Config) string { return c.Cluster.Redis },
			keep:  func(d, s *config.Config) { d.Cluster.Redis = s.Cluster.Redis }},
		{name: "cluster.sentinel",
			value: func(c *config.Config) string { return sentinelSetting(c.Cluster.Sentinel) },
			keep:  func(d, s *config.Config) { d.Cluster.Sentinel = s.Cluster.Sentinel }},
		{name: "cluster.clusterAddrs",
			value: func(c *config.Config) string { return strings.Join(c.Cluster.ClusterAddrs, ",") },
			keep:  func(d, s *config.Config) { d.Cluster.ClusterAddrs = s.Cluster.ClusterAddrs }},
		{name: "cluster.timeout", value: func(c *config.Config) string { return c.Cluster.Timeout.String() },
			keep: func(d, s *config.Config) { d.Cluster.Timeout = s.Cluster.Timeout }},
		{name: "cluster.namespace",
			value: func(c *config.Config) string { return c.Cluster.Namespace },
			keep:  func(d, s *config.Config) { d.Cluster.Namespace = s.Cluster.Namespace }},
		// The rules source is connected once; a reload keeps merging the
		// document of the source the gateway started with.
		{name: "rulesSource.redis",
			value: func(c *config.Config) string { return c.RulesSource.Redis },
			keep:  func(d, s *config.Config) { d.RulesSource.Redis = s.RulesSource.Redis }},
		{name: "rulesSource.sentinel",
			value: func(c *config.Config) string { return sentinelSetting(c.RulesSource.Sentinel) },
			keep:  func(d, s *config.Config) { d.RulesSource.Sentinel = s.RulesSource.Sentinel }},
		{name: "rulesSource.clusterAddrs",
			value: func(c *config.Config) string { return strings.Join(c.RulesSource.ClusterAddrs, ",") },
			keep:  func(d, s *config.Config) { d.RulesSource.ClusterAddrs = s.RulesSource.ClusterAddrs }},
		{name: "rulesSource.key",
			value: func(c *config.Config) string { return c.RulesSource.Key },
			keep:  func(d, s *config.Config) { d.RulesSource.Key = s.RulesSource.Key }},
		{name: "rulesSource.cacheFile",
			value: func(c *config.Config) string { return c.RulesSource.CacheFile },
			keep:  func(d, s *config.Config) { d.RulesSource.CacheFile = s.RulesSource.CacheFile }},
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

// announceSettings is the one place where a reload's settings are compared
// with what is in force; it logs what the reload could not apply and puts
// the admin token and hosts in force. started is the file the process started with
// (start-only settings keep its values), prev the file loaded before next.
func (r *reloader) announceSettings(started, prev, next *config.Config) {
	for _, s := range startSettings() {
		now := s.value(next)
		// Once per change, and not for a change back to the value in force.
		if now == s.value(prev) || now == s.value(started) {
			continue
		}
		old, shown := shownChange(s, started, next)
		r.log.Warn().Str("setting", s.name).Str("old", old).Str("new", shown).
			Msg(s.name + " changed in the rules file: it takes effect at restart")
	}
	r.applyAdminHosts(prev, next) // before the token: a client that sees the token in force sees the hosts too
	r.applyAdminToken(prev, next)
	r.announceLive(prev, next)
	if !r.clusterOn {
		// Once for the clusterMode rules a reload brings, not at every
		// reload that keeps them: the condition lasts until the restart.
		before := map[clusterRule]bool{}
		for _, rule := range clusterRules(prev) {
			before[rule] = true
		}
		for _, rule := range clusterRules(next) {
			if !before[rule] {
				r.log.Warn().Str("resource", rule.resource).
					Msg("clusterMode rule checked locally: the gateway started without cluster rules or a cluster Redis; restart to connect to Redis")
				break
			}
		}
	}
}

// clusterRule names a clusterMode rule by its section and resource: a
// rule edited in place (its count, say) is the same one.
type clusterRule struct{ section, resource string }

// clusterRules lists cfg's clusterMode rules.
func clusterRules(cfg *config.Config) []clusterRule {
	var out []clusterRule
	for _, r := range cfg.FlowRules {
		if r.ClusterMode {
			out = append(out, clusterRule{"flowRules", r.Resource})
		}
	}
	for _, r := range cfg.ParamRules {
		if r.ClusterMode {
			out = append(out, clusterRule{"paramRules", r.Resource})
		}
	}
	return out
}

// shownChange is a start-only setting's value in force (started's) and in
// next, as logged and shown: passwords masked, and a change hidden by the
// mask said to be one.
func shownChange(s startSetting, started, next *config.Config) (old, shown string) {
	old, shown = s.value(started.Redacted()), s.value(next.Redacted())
	if shown == old {
		shown += " (a hidden password changed)"
	}
	return old, shown
}

// inForce is cfg as the process runs it: its start-only settings keep
// started's values, so that GET /api/rules shows what is in force, not a
// listen address the gateway does not listen on.
func inForce(started, cfg *config.Config) *config.Config {
	if started == nil || started == cfg {
		return cfg
	}
	out := *cfg
	for _, s := range startSettings() {
		s.keep(&out, started)
	}
	return &out
}

// pendingRestart lists the start-only settings whose value in cfg differs
// from the one in force, with both values masked as the log has them. A
// setting a flag fixes never differs: the flag replaces the file's value
// at every load (Options.overrides).
func pendingRestart(started, cfg *config.Config) []admin.PendingSetting {
	if started == nil || started == cfg {
		return nil
	}
	var out []admin.PendingSetting
	for _, s := range startSettings() {
		if s.value(cfg) == s.value(started) {
			continue
		}
		old, shown := shownChange(s, started, cfg)
		out = append(out, admin.PendingSetting{Setting: s.name, Old: old, New: shown})
	}
	return out
}

// announceLive logs a reload's change to a setting that applies to what
// opens next: server.sendTimeout bounds the connections and HTTP/2 streams
// opened from the reload on (a connection open before keeps its socket's),
// and the connection caps the connections accepted from then on.
func (r *reloader) announceLive(prev, next *config.Config) {
	if old, now := prev.Server.SendTimeout, next.Server.SendTimeout; old != now {
		r.log.Info().Str("setting", "server.sendTimeout").Str("old", old.String()).Str("new", now.String()).
			Msg("server.sendTimeout changed: it applies to connections and HTTP/2 streams opened from now on")
	}
	for _, c := range []struct {
		name     string
		old, now int
	}{
		{"server.maxConnections", prev.Server.MaxConnections, next.Server.MaxConnections},
		{"server.maxConnectionsPerIP", prev.Server.MaxConnectionsPerIP, next.Server.MaxConnectionsPerIP},
	} {
		if c.old != c.now {
			r.log.Info().Str("setting", c.name).Int("old", c.old).Int("new", c.now).
				Msg(c.name + " changed: it applies to connections accepted from now on (0: the default); none open is closed")
		}
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
