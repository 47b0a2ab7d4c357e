// Command sluice is an HTTP reverse-proxy gateway with Sentinel-style flow
// control, configured by one live-reloaded rules.yaml. main wires the
// packages: config -> (limiter, hotparam, cluster) -> proxy, and admin.
package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"sluice/config"
	"sluice/proxy"
)

// maxHeaderBytes bounds a request's header block (net/http adds 4 KiB of
// slack); beyond it the client gets 431.
const maxHeaderBytes = 64 << 10

// version is set at build time with -ldflags "-X main.version=…".
var version = "dev"

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 {
		switch args[0] {
		case "version":
			fmt.Fprintf(stdout, "sluice %s\n", version)
			return 0
		case "validate":
			return validate(args[1:], stdout, stderr)
		case "rules":
			return rulesCmd(args[1:], stdout, stderr)
		}
	}
	fs := flag.NewFlagSet("sluice", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var o options
	fs.StringVar(&o.config, "config", "rules.yaml", "rules file")
	fs.StringVar(&o.listen, "listen", "", "traffic listen address (overrides the file's listen)")
	fs.StringVar(&o.admin, "admin", "", `admin listen address (overrides admin.listen; "off" turns it off)`)
	fs.StringVar(&o.logLevel, "log-level", "", "log level: debug|info|warn|error (overrides log.level)")
	fs.StringVar(&o.logFormat, "log-format", "", "log format: json|console (overrides log.format)")
	fs.BoolVar(&o.demo, "demo", false, "also start the built-in demo upstreams on 127.0.0.1:9001 and :9002")
	fs.DurationVar(&o.drain, "drain-timeout", 15*time.Second, "how long shutdown waits for in-flight requests")
	fs.DurationVar(&o.readHeader, "read-header-timeout", 0, "how long a client may take to send its request headers, a slowloris guard (overrides server.readHeaderTimeout, default 10s)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "sluice: unexpected argument %q: a subcommand (validate, rules, version) comes before any flag, and the gateway takes flags only; see sluice -h\n", fs.Arg(0))
		return 2
	}
	o.envToken = os.Getenv(envAdminToken)
	o.forwarder = os.Getenv(envForwarder)
	if err := proxy.CheckForwarder(o.forwarder); err != nil {
		fmt.Fprintf(stderr, "sluice: %s: %v\n", envForwarder, err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := serve(ctx, o, stderr); err != nil {
		fmt.Fprintf(stderr, "sluice: %v\n", err)
		return 1
	}
	return 0
}

type options struct {
	config, listen, admin, logLevel, logFormat string
	demo                                       bool
	drain                                      time.Duration
	readHeader                                 time.Duration // 0: server.readHeaderTimeout
	envToken                                   string        // SLUICE_ADMIN_TOKEN
	forwarder                                  string        // SLUICE_FORWARDER
}

// envForwarder names the environment variable that, when set, overrides
// every route's `forwarder:` (auto | standard | fast), e.g. to run a whole
// test suite forced one way.
const envForwarder = "SLUICE_FORWARDER"

// validate is `sluice validate [rules.yaml]`: every error as FILE:LINE: message.
func validate(args []string, stdout, stderr io.Writer) int {
	path := "rules.yaml"
	if len(args) > 1 {
		fmt.Fprintf(stderr, "sluice validate: unexpected argument %q: it checks one rules file\n", args[1])
		return 2
	}
	if len(args) > 0 {
		path = args[0]
	}
	cfg, err := config.Load(path)
	if err != nil {
		printConfigErrors(stderr, err)
		return 1
	}
	if cfg.NeedsDocument() {
		fmt.Fprintf(stdout, "%s: ok (the gateway's own settings; sluice rules push checks its rules document)\n", path)
		return 0
	}
	fmt.Fprintf(stdout, "%s: ok\n", path)
	return 0
}

// serve runs the gateway until ctx is done (SIGINT, SIGTERM): it builds the
// gateway from the rules file, opens the listeners, serves, then drains.
func serve(ctx context.Context, o options, stderr io.Writer) error {
	// SIGHUP is ours from the start to the exit: unhandled, its default
	// action would kill the process, cutting a drain in progress.
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)

	cfg, err := config.Load(o.config)
	log := newLogger(stderr, o, cfg)
	if err != nil {
		logConfigErrors(log, err, "rules are invalid; not starting")
		return errors.New("invalid rules file")
	}
	var fl *fleet
	if cfg.NeedsDocument() {
		if fl, cfg, err = startFleet(o.config, cfg, log); err != nil {
			log.Error().Err(err).Msg("not starting")
			return err
		}
	}
	gw, err := build(ctx, o, cfg, fl, log)
	if err != nil {
		return err
	}
	defer gw.close()
	go gw.reloader.watch(ctx, hup)
	if fl != nil {
		go fl.watch(ctx, gw.reloader.request)
	}

	stopDemo := func(context.Context) {}
	if o.demo {
		if stopDemo, err = startDemo(log); err != nil {
			return err
		}
	}
	lns, err := listen(o, cfg, gw)
	if err != nil {
		return err
	}
	srvs := gw.startServers(ctx, lns)
	plain, secure := lns.traffic.addrs()
	if fl != nil {
		beatDone := make(chan struct{})
		bctx, stopBeat := context.WithCancel(context.WithoutCancel(ctx))
		go func() { fl.beat(bctx, cmp.Or(plain, secure), gw.rates); close(beatDone) }()
		// After the drain: a gateway that still serves stays in the fleet.
		defer func() { stopBeat(); <-beatDone }()
	}
	log.Info().Str("listen", plain).Str("tls", secure).Str("admin", o.adminAddr(cfg)).Str("config", o.config).
		Str("version", version).Msg("sluice started")
	return drain(ctx, srvs, stopDemo, o.drain, log)
}
