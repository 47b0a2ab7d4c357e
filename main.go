// Command sluice is an HTTP reverse-proxy gateway with Sentinel-style flow
// control, configured by one live-reloaded rules.yaml. main parses the
// command line, handles the signals and hands the rest to package
// lifecycle, which wires config -> (limiter, hotparam, cluster) -> proxy,
// and admin. Layer 7 of docs/architecture.md: it imports lifecycle, and
// proxy to check SLUICE_FORWARDER.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"
	// The IANA zone database, built in (about 450 KB): a calendar quota's
	// timezone must load the same on every gateway, in the alpine image
	// (no zoneinfo) and in a scratch container alike. A machine's own
	// zoneinfo, where there is one, is still read first.
	_ "time/tzdata"

	"sluice/lifecycle"
	"sluice/proxy"
)

// version is set at build time with -ldflags "-X main.version=…".
var version = "dev"

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 {
		switch args[0] {
		case "version":
			if len(args) > 1 {
				fmt.Fprintf(stderr, "sluice version: unexpected argument %q: it takes none\n", args[1])
				return 2
			}
			fmt.Fprintf(stdout, "sluice %s\n", version)
			return 0
		case "validate":
			return lifecycle.Validate(args[1:], stdout, stderr)
		case "rules":
			return lifecycle.Rules(args[1:], stdout, stderr)
		}
	}
	fs := flag.NewFlagSet("sluice", flag.ContinueOnError)
	fs.SetOutput(stderr)
	o := lifecycle.Options{Version: version, Log: stderr}
	fs.StringVar(&o.Config, "config", "rules.yaml", "rules file")
	fs.StringVar(&o.Listen, "listen", "", `traffic listen address (overrides the file's listen; "off" turns the plain listener off, with tls.listen set)`)
	fs.StringVar(&o.Admin, "admin", "", `admin listen address (overrides admin.listen; "off" turns it off)`)
	levels, formats := lifecycle.LogChoices()
	fs.StringVar(&o.LogLevel, "log-level", "", "log level: "+levels+" (overrides log.level)")
	fs.StringVar(&o.LogFormat, "log-format", "", "log format: "+formats+" (overrides log.format)")
	fs.BoolVar(&o.Demo, "demo", false, "also start the built-in demo upstreams on 127.0.0.1:9001 and :9002")
	fs.DurationVar(&o.Drain, "drain-timeout", 15*time.Second, "how long shutdown waits for in-flight requests")
	fs.DurationVar(&o.ReadHeaderTimeout, "read-header-timeout", 0, "how long a client may take to send its request headers, a slowloris guard (overrides server.readHeaderTimeout, default 10s)")
	fs.Usage = func() {
		fmt.Fprint(stderr, `usage: sluice [flags]           run the gateway
       sluice validate [FILE]   check a rules file as the gateway would load it
       sluice rules push|pull   store or print a fleet's rules document (sluice rules -h)
       sluice version           print the version

flags:
`)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0 // asked for, as sluice validate -h
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "sluice: unexpected argument %q: a subcommand (validate, rules, version) comes before any flag, and the gateway takes flags only; see sluice -h\n", fs.Arg(0))
		return 2
	}
	if err := o.Check(); err != nil {
		fmt.Fprintf(stderr, "sluice: %v\n", err)
		return 2
	}
	o.AdminToken = os.Getenv(lifecycle.EnvAdminToken)
	o.Forwarder = os.Getenv(envForwarder)
	if err := proxy.CheckForwarder(o.Forwarder); err != nil {
		fmt.Fprintf(stderr, "sluice: %s: %v\n", envForwarder, err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	// The first SIGINT or SIGTERM starts the drain; a second one (Ctrl-C
	// again, an operator who will not wait) takes the signal's default
	// action and ends the process at once, as Caddy does. It was ignored:
	// nothing but SIGKILL cut a drain short.
	go func() {
		<-ctx.Done()
		stop()
	}()
	if err := serve(ctx, o); err != nil {
		if !lifecycle.Logged(err) { // else one event in the log's format says it
			fmt.Fprintf(stderr, "sluice: %v\n", err)
		}
		return 1
	}
	return 0
}

// envForwarder names the environment variable that, when set, overrides
// every route's `forwarder:` (auto | standard | fast), e.g. to run a whole
// test suite forced one way.
const envForwarder = "SLUICE_FORWARDER"

// serve runs the gateway until ctx is done (SIGINT, SIGTERM), reloading
// its rules on SIGHUP.
func serve(ctx context.Context, o lifecycle.Options) error {
	// SIGHUP is ours from the start to the exit: unhandled, its default
	// action would kill the process, cutting a drain in progress. One that
	// comes while the gateway starts is taken once it has; one during the
	// drain is ignored.
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)

	inst, err := lifecycle.New(o)
	if err != nil {
		return err
	}
	done := make(chan struct{})
	defer close(done)
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case <-done:
				return
			case <-hup:
				_ = inst.Reload() // logged, and shown on /api/rules
			}
		}
	}()
	return inst.Run(ctx)
}
