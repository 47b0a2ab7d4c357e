package lifecycle

import (
	"context"
	"time"

	"sluice/admin"
	"sluice/config"
	"sluice/hotparam"
	"sluice/limiter"
)

// newAdmin builds the admin API, metrics and dashboard. Its token is set by
// the reloader at each load (reloader.setToken); the editor checks an edit
// with checkRules, as the reload does.
func newAdmin(inst *Instance) *admin.Server {
	gw := inst.proxy
	o := admin.Options{
		Log:        inst.log,
		Registry:   inst.registry,
		State:      inst.adminState,
		ConfigPath: inst.reloader.path,
		Validate:   inst.opts.checkRules,
		Reload:     inst.reloader.request,
		Now:        time.Now,
		Stats: func() []admin.ResourceStats {
			s := gw.Current()
			if s == nil {
				return nil
			}
			return adminStats(s.Flow.Stats(gw.Now()))
		},
		Upstreams: func() []admin.UpstreamStats { return adminUpstreams(gw) },
		Params: func(res string, values []string, top int) ([]hotparam.RuleState, bool) {
			s := gw.Current()
			if s == nil || !hasResource(s.Config, res) {
				return nil, false
			}
			return s.Params.For(res).Report(gw.Now(), values, top), true
		},
		LiftParam: func(ctx context.Context, res, value string) (admin.Lifted, bool, error) {
			s := gw.Current()
			if s == nil || !hasResource(s.Config, res) {
				return admin.Lifted{}, false, nil
			}
			n, err := s.Params.For(res).Forget(ctx, value)
			return admin.Lifted{Rules: n, Credential: readsCredential(s.Config, res)}, true, err
		},
		PartitionKey: gw.PartitionKey,
	}
	if inst.fleet != nil {
		// The editor writes the fleet's document, not this gateway's file.
		o.Document = fleetDoc{f: inst.fleet, path: inst.reloader.path}
		o.Fleet = inst.fleet.gateways
	}
	return admin.New(o)
}

// rates is the gateway's pass and block rate now, over every route's
// resource (an API group's would count its requests again), for its
// heartbeat.
func (inst *Instance) rates() (pass, block float64) {
	s := inst.proxy.Current()
	if s == nil {
		return 0, 0
	}
	for _, r := range s.Flow.Stats(inst.proxy.Now()) {
		if s.IsGroup(r.Resource) {
			continue
		}
		pass += r.Node.PassQps
		block += r.Node.BlockQps
	}
	return pass, block
}

// checkRules is the one check of a rules file: what it accepts, the
// gateway builds. The reload reaches it through Overrides.Load, the editor
// directly; both with the command line's listeners in place of the file's,
// so that an edit is not refused for a value the flags replace.
// `sluice validate` checks the file as written (config.Load).
func (o Options) checkRules(path string, data []byte) error {
	_, err := o.overrides().Parse(path, data)
	return err
}

// hasResource reports whether a route or an API group of cfg has res, the
// resources a rule may name.
// readsCredential reports whether a param rule of res reads a credential.
func readsCredential(cfg *config.Config, res string) bool {
	for i := range cfg.ParamRules {
		if pr := &cfg.ParamRules[i]; pr.Resource == res && pr.Param.Credential() {
			return true
		}
	}
	return false
}

func hasResource(cfg *config.Config, res string) bool {
	for _, r := range cfg.Routes {
		if r.Resource == res {
			return true
		}
	}
	for _, g := range cfg.APIGroups {
		if g.Name == res {
			return true
		}
	}
	return false
}

func adminStats(in []limiter.ResourceStats) []admin.ResourceStats {
	out := make([]admin.ResourceStats, len(in))
	for i, r := range in {
		out[i] = admin.ResourceStats{Resource: r.Resource, NodeStats: admin.NodeStats(r.Node),
			Origins: named(r.Origins), Entrances: named(r.Entrances)}
	}
	return out
}

func named(in []limiter.NamedStats) []admin.NamedStats {
	out := make([]admin.NamedStats, len(in))
	for i, n := range in {
		out[i] = admin.NamedStats{Name: n.Name, NodeStats: admin.NodeStats(n.NodeStats)}
	}
	return out
}
