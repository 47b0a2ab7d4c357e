// Package lifecycle is one gateway process from start to exit: it builds
// the snapshot the proxy serves from the rules file (build.go), opens and
// serves the listeners, traffic (HTTP, h2c, TLS) and admin (listen.go,
// traffic.go, servers.go), reloads on file changes, admin writes and
// Reload (reload.go), applies each changed setting live or warns that it
// takes effect at restart (settings.go, the one list), keeps the gateway's
// membership of a fleet sharing a rules document (fleet.go), reports the
// TLS certificates (certstatus.go) and the upstreams' statistics
// (upstreamstats.go), and drains on the way out. It also holds the
// `validate` and `rules push|pull` commands (commands.go) and -demo's
// upstreams (demo.go).
//
// Layer 6 of docs/architecture.md: it wires config, limiter, hotparam,
// cluster, upstream, proxy, admin, rulesource and tlsedge, and only package
// main imports it. Package main parses the command line, handles the
// signals and calls New, Run and Reload.
package lifecycle

import (
	"cmp"
	"context"
	"errors"
	"io"
	"strings"
	"time"

	"sluice/config"
)

// maxHeaderBytes bounds a request's header block (net/http adds 4 KiB of
// slack); beyond it the client gets 431.
const maxHeaderBytes = 64 << 10

// Options are what the command line says about a gateway. A flag fixes the
// setting it names: the rules file's value never applies (overrides).
type Options struct {
	Config    string // the rules file
	Listen    string // the traffic address; "": the file's listen, "off": none (tls.listen serves)
	Admin     string // the admin address; "": the file's admin.listen, "off": none
	LogLevel  string // "": the file's log.level
	LogFormat string // "": the file's log.format
	Demo      bool   // also serve the demo upstreams on 127.0.0.1:9001 and :9002
	// Drain is how long Run's shutdown waits for requests in flight.
	Drain time.Duration
	// ReadHeaderTimeout overrides server.readHeaderTimeout; 0: the file's.
	ReadHeaderTimeout time.Duration
	// AdminToken (SLUICE_ADMIN_TOKEN) wins over admin.token; "": the file's.
	// Both are used without surrounding white space.
	AdminToken string
	// Forwarder (SLUICE_FORWARDER) overrides every route's forwarder; "": theirs.
	Forwarder string
	Version   string    // logged at start
	Log       io.Writer // where the log goes, JSON unless a terminal
}

// New loads the rules file (merged with its rules source's document, when
// it names one), builds the gateway with them and opens its listeners, so
// that invalid rules or a taken port stop the start. Nothing is served
// before Run.
func New(o Options) (*Instance, error) {
	if err := o.Check(); err != nil {
		return nil, err
	}
	// A token kept in a file (a Kubernetes Secret) often ends in a line
	// break no client can send, and bearer trims the header's value: kept,
	// such a token could never match (docs/admin.md).
	blankToken := o.AdminToken != "" && strings.TrimSpace(o.AdminToken) == ""
	o.AdminToken = strings.TrimSpace(o.AdminToken)
	// The file's state as it is read: Run's watch starts from it, so an
	// edit made while the gateway starts is not lost.
	data, since, err := config.ReadState(o.Config)
	var cfg *config.Config
	if err == nil {
		cfg, err = o.overrides().Parse(o.Config, data)
	}
	log := newLogger(o.Log, o, cfg)
	if blankToken {
		log.Warn().Str("setting", EnvAdminToken).Msg(EnvAdminToken + " holds only white space: it is ignored, as if unset")
	}
	if err != nil {
		logConfigErrors(log, err, "rules are invalid; not starting")
		return nil, loggedError{errors.New("invalid rules file")}
	}
	// Every other refusal is logged too, as one event in the log's format
	// (a taken port was a plain line on stderr in a JSON log).
	fail := func(err error) (*Instance, error) {
		log.Error().Err(err).Msg("not starting")
		return nil, loggedError{err}
	}
	var fl *fleet
	if cfg.NeedsDocument() {
		if fl, cfg, err = startFleet(o.Config, o.overrides(), cfg, log); err != nil {
			return fail(err)
		}
	}
	inst, err := build(o, cfg, fl, log)
	if err != nil {
		return fail(err)
	}
	inst.reloader.read = since // no goroutine reads it yet
	if o.Demo {
		if inst.stopDemo, err = startDemo(log); err != nil {
			inst.close()
			return fail(err)
		}
	}
	if inst.lns, err = listen(o, cfg, inst); err != nil {
		inst.stopDemo(context.Background())
		inst.close()
		return fail(err)
	}
	// Before Run, so that a SIGHUP (Reload) at any time finds it.
	inst.certs = newCertStatus(inst.lns.traffic, inst.metrics, inst.tlsMetrics, inst.log)
	return inst, nil
}

// loggedError is an error New has logged, as one event.
type loggedError struct{ error }

func (e loggedError) Unwrap() error { return e.error }

// Logged reports whether err, from New, is in the log already: the caller
// need not print it again.
func Logged(err error) bool {
	var l loggedError
	return errors.As(err, &l)
}

// Run serves until ctx is done (SIGINT, SIGTERM), then drains within
// Options.Drain: the rules file is watched and reloaded, the fleet's
// document followed and the heartbeat written meanwhile. It returns early
// with an error if a traffic server fails. It releases what New acquired.
func (inst *Instance) Run(ctx context.Context) error {
	defer inst.close()
	inst.start(ctx)
	go inst.reloader.watch(ctx)
	if inst.fleet != nil {
		go inst.fleet.watch(ctx, inst.reloader.request)
	}
	go func() { <-ctx.Done(); inst.draining.Store(true) }()
	srvs := inst.startServers(ctx, inst.lns)
	plain, secure, adminAddr := inst.Addrs() // as chosen, for a port 0
	if inst.fleet != nil {
		beatDone := make(chan struct{})
		bctx, stopBeat := context.WithCancel(context.WithoutCancel(ctx))
		go func() { inst.fleet.beat(bctx, cmp.Or(plain, secure), inst.rates); close(beatDone) }()
		// After the drain: a gateway that still serves stays in the fleet.
		defer func() { stopBeat(); <-beatDone }()
	}
	inst.log.Info().Str("listen", plain).Str("tls", secure).Str("admin", adminAddr).Str("config", inst.opts.Config).
		Str("version", inst.opts.Version).Msg("sluice started")
	return drain(ctx, srvs, inst.proxy.DrainTunnels, inst.stopDemo, inst.opts.Drain, inst.log)
}

// Reload reads the rules file and the TLS certificate files again and
// applies them, as a change to the files does; main calls it on SIGHUP. It
// returns when the reload is done, with the reasons the rules or a
// certificate in force stay, if they do.
func (inst *Instance) Reload() error {
	inst.log.Info().Msg("SIGHUP: reloading")
	err := inst.reloader.reload()
	if c := inst.lns.traffic.certs; c != nil {
		// Certificate files are reloaded like the rules file: SIGHUP is
		// systemd's ExecReload after a renewal, and the only way in when
		// the file watch could not start.
		err = errors.Join(err, c.ReloadNow(inst.log, inst.certs.report))
	}
	return err
}

// Addrs are the addresses New opened: plain HTTP (h2c), TLS and admin; ""
// for a listener that is off.
func (inst *Instance) Addrs() (plain, secure, admin string) {
	plain, secure = inst.lns.traffic.addrs()
	if inst.lns.admin != nil {
		admin = inst.lns.admin.Addr().String()
	}
	return plain, secure, admin
}
