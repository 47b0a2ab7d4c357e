package lifecycle

import (
	"context"
	"errors"
	"maps"
	"reflect"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"sluice/admin"
	"sluice/config"
	"sluice/proxy"
)

// reloader turns rules.yaml changes (file watch, SIGHUP, admin writes) into
// gateway snapshots, keeping the last good one when a new file is invalid.
type reloader struct {
	path    string
	opts    Options // the flags that fix settings, SLUICE_ADMIN_TOKEN
	gw      *proxy.Gateway
	log     zerolog.Logger
	metrics *admin.Metrics
	// clusterOn: a Redis token service was started (cluster settings are read at start).
	clusterOn bool
	// setToken puts a new admin token in force; nil while the admin
	// listener is off. Set before the first apply.
	setToken func(token string)
	// setHosts puts a new admin.hosts in force; nil while the admin
	// listener is off. Set before the first apply.
	setHosts func(hosts []string)
	// fleet is the rules source whose document is merged with the file;
	// nil: the file alone holds the rules.
	fleet *fleet

	mu sync.Mutex // serialises reloads; the fields below have their own locks (statMu, readMu)
	// statMu guards the status, which state reads without waiting for a
	// reload: /readyz and /api/rules waited for the whole of one (1.9 s
	// for 30,000 routes; a Kubernetes probe's 1 s timeout failed 3 of 30
	// during a storm of 10,000-route files).
	statMu     sync.Mutex
	started    *config.Config // the first rules loaded: start-only settings keep its values
	loadedAt   time.Time
	lastReload time.Time
	lastError  string
	now        chan struct{}
	// read is the file's state (config.ReadState) when it was last read,
	// by New at first: the watch reports any change from it, even one made
	// before the watch was in place, and a watch event for a state already
	// read asks for no reload (an admin edit both writes the file and asks
	// for one). Guarded by readMu, not mu: the watch reads it while a
	// reload runs.
	readMu sync.Mutex
	read   string
}

func newReloader(o Options, gw *proxy.Gateway, log zerolog.Logger, m *admin.Metrics) *reloader {
	return &reloader{path: o.Config, opts: o, gw: gw, log: log, metrics: m, now: make(chan struct{}, 1)}
}

// apply swaps in cfg; it returns why the gateway did not take it.
func (r *reloader) apply(cfg *config.Config) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.applyLocked(cfg, nil)
}

func (r *reloader) applyLocked(cfg *config.Config, err error) error {
	t := time.Now()
	if err == nil {
		err = r.swapLocked(cfg)
	}
	r.statMu.Lock()
	r.lastReload = t
	if err != nil {
		r.lastError = err.Error()
	} else {
		r.lastError, r.loadedAt = "", t
	}
	r.statMu.Unlock()
	if err != nil {
		r.metrics.Reload(false, t)
		logConfigErrors(r.log, err, "reload failed: the previous rules stay in force")
		return err
	}
	r.metrics.Reload(true, t)
	return nil
}

// swapLocked puts cfg in force: the gateway's snapshot, the admin token and
// the warnings for settings that apply only at restart.
func (r *reloader) swapLocked(cfg *config.Config) error {
	prev := r.gw.Current()
	if err := r.gw.Load(cfg); err != nil {
		return err
	}
	if prev == nil {
		r.statMu.Lock()
		r.started = cfg
		r.statMu.Unlock()
		r.applyAdminHosts(nil, cfg)
		r.applyAdminToken(nil, cfg)
	} else {
		r.announceSettings(r.started, prev.Config, cfg)
	}
	// Export every breaker's state from the start (and after edits reset
	// them), not only after its first change; drop the series of the
	// resources the new rules no longer name, so that renames do not add
	// series for ever.
	cur := r.gw.Current()
	states := cur.Breakers.States()
	for res, st := range states {
		r.metrics.CircuitState(res, int(st))
	}
	r.metrics.RetainCircuits(slices.Collect(maps.Keys(states)))
	r.metrics.RetainResources(cur.Resources())
	r.log.Info().Str("config", r.path).Int("routes", len(cfg.Routes)).Int("flowRules", len(cfg.FlowRules)).
		Int("paramRules", len(cfg.ParamRules)).Int("degradeRules", len(cfg.DegradeRules)).
		Int("authorityRules", len(cfg.AuthorityRules)).Msg("rules loaded")
	return nil
}

// reload reads the file again (merged with the newest rules document, with
// a rules source) and applies it; it returns why the rules in force stay.
func (r *reloader) reload() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	// One read: the state noted is that of the bytes loaded, so that a
	// write after it is a change to the watch (WatchLoaded).
	data, st, err := config.ReadState(r.path)
	r.readMu.Lock()
	r.read = st
	r.readMu.Unlock()
	if err != nil {
		return r.applyLocked(nil, err)
	}
	if r.fleet == nil {
		cfg, err := r.opts.overrides().Parse(r.path, data)
		if err == nil && cfg.NeedsDocument() {
			// Serving the file's own settings alone would drop every route.
			err = config.Errors{{File: r.path, Msg: "rulesSource was added: it takes effect at restart; the rules in force stay"}}
		}
		return r.applyLocked(cfg, err)
	}
	cfg, doc, err := r.fleet.merge(r.path, data)
	if err != nil {
		// The newest document is refused, but the file may have changed
		// meanwhile (a rotated admin.token): it applies with the document
		// in force, and the document's errors are still reported below.
		if kept, _, kerr := r.fleet.mergeInForce(r.path, data); kerr == nil && (r.gw.Current() == nil || !reflect.DeepEqual(kept, r.gw.Current().Config)) {
			if serr := r.swapLocked(kept); serr != nil {
				logConfigErrors(r.log, serr, "the rules file with the document in force did not load")
			} else {
				r.statMu.Lock()
				r.loadedAt = time.Now()
				r.statMu.Unlock()
			}
		}
	}
	if err := r.applyLocked(cfg, err); err != nil {
		return err
	}
	r.fleet.accepted(doc)
	r.logDocument(doc)
	return nil
}

// logDocument says which version of the rules document a load applied
// and, when its push time is known, how long after the push.
func (r *reloader) logDocument(d document) {
	ev := r.log.Info().Str("document", d.name).Int64("version", d.doc.Version)
	if !d.doc.PushedAt.IsZero() {
		ev = ev.Dur("sincePush", time.Since(d.doc.PushedAt))
	}
	ev.Msg("rules document in force")
}

// request asks for a reload soon (admin writes); it never blocks.
func (r *reloader) request() {
	select {
	case r.now <- struct{}{}:
	default:
	}
}

// loaded is the file's state when it was last read, which the watch
// compares with: the writes an admin edit makes, for which the edit has
// asked already, are not reported again once it has been read.
func (r *reloader) loaded() string {
	r.readMu.Lock()
	defer r.readMu.Unlock()
	return r.read
}

// watch reloads on file changes and requests until ctx is done.
func (r *reloader) watch(ctx context.Context) {
	go func() {
		// A look at the file in a state other than the one last read
		// (loaded) asks for a reload.
		if err := config.WatchLoaded(ctx, r.path, r.loaded, 100*time.Millisecond, r.log, r.request); err != nil && ctx.Err() == nil {
			r.log.Error().Err(err).Msg("cannot watch the rules file; reload with SIGHUP")
		}
	}()
	for {
		select {
		case <-ctx.Done():
			return
		case <-r.now:
			_ = r.reload() // logged, and shown on /api/rules
		}
	}
}

// state is what the admin API shows about the rules in force.
func (r *reloader) state() admin.State {
	r.statMu.Lock()
	st := admin.State{Path: r.path, LoadedAt: r.loadedAt, LastError: r.lastError, LastReload: r.lastReload}
	started := r.started
	r.statMu.Unlock()
	if s := r.gw.Current(); s != nil && started != nil {
		st.Ready, st.Config = true, inForce(started, s.Config)
		st.PendingRestart = pendingRestart(started, s.Config)
	}
	if r.fleet != nil {
		st.Source = r.fleet.state()
	}
	return st
}

// logConfigErrors logs one event per error so each carries its file:line.
func logConfigErrors(log zerolog.Logger, err error, msg string) {
	var es config.Errors
	if errors.As(err, &es) {
		lines := make([]string, len(es))
		for i, e := range es {
			lines[i] = e.String()
		}
		log.Error().Strs("errors", lines).Msg(msg)
		return
	}
	log.Error().Str("errors", strings.TrimSpace(err.Error())).Msg(msg)
}
