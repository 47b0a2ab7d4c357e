package lifecycle

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"

	"sluice/config"
	"sluice/rulesource"
)

// rulesTimeout bounds one `sluice rules` command's talk with Redis.
const rulesTimeout = 10 * time.Second

// Validate is `sluice validate [rules.yaml]`: every error as FILE:LINE: message.
// The file may also be named with -config, as the gateway and `sluice
// rules` name it; -h prints its usage, any other word that starts with "-"
// is refused rather than read as a file name ("--" ends the flags, for a
// file whose name starts with "-").
func Validate(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("sluice validate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: sluice validate [FILE | -config FILE]\n\nChecks FILE (default rules.yaml) as the gateway would load it and prints every error as FILE:LINE: message. Exit 0: ok; 1: errors; 2: usage.")
	}
	configFlag := fs.String("config", "", "the rules file (the same as FILE)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	args = fs.Args()
	path := "rules.yaml"
	if len(args) > 1 || len(args) == 1 && *configFlag != "" {
		fmt.Fprintf(stderr, "sluice validate: unexpected argument %q: it checks one rules file\n", args[len(args)-1])
		return 2
	}
	switch {
	case len(args) > 0:
		path = args[0]
	case *configFlag != "":
		path = *configFlag
	}
	cfg, err := config.Load(path)
	if err != nil {
		printConfigErrors(stderr, err)
		return 1
	}
	if cfg.TLS.Listen != "" {
		// The certificate files, as the gateway will load them: a pair
		// that does not load stops it from starting.
		if _, err := loadCerts(cfg); err != nil {
			printConfigErrors(stderr, err)
			return 1
		}
	}
	if cfg.NeedsDocument() {
		fmt.Fprintf(stdout, "%s: ok (the gateway's own settings; sluice rules push checks its rules document)\n", path)
		return 0
	}
	fmt.Fprintf(stdout, "%s: ok\n", path)
	return 0
}

// Rules is `sluice rules push|pull`: the fleet's rules document in the
// Redis that -config's rulesSource names (docs/fleet.md).
func Rules(args []string, stdout, stderr io.Writer) int {
	usage := func() int {
		fmt.Fprintln(stderr, "usage: sluice rules push [-config rules.yaml] [-base VERSION] FILE\n       sluice rules pull [-config rules.yaml]")
		return 2
	}
	if len(args) == 0 {
		return usage()
	}
	fs := flag.NewFlagSet("sluice rules "+args[0], flag.ContinueOnError)
	fs.SetOutput(stderr)
	cfgPath := fs.String("config", "rules.yaml", "the gateway's rules file, whose rulesSource names the document")
	var base *int64
	switch args[0] {
	case "push":
		base = fs.Int64("base", -1, "the version FILE was edited from; refused if another is stored. Default: the version on FILE's last line, as pull wrote it, else the version stored now")
	case "pull":
	default:
		return usage()
	}
	if err := fs.Parse(args[1:]); err != nil {
		return 2
	}
	if (args[0] == "push") != (fs.NArg() == 1) || fs.NArg() > 1 {
		return usage()
	}
	if base != nil && *base < 0 && flagGiven(fs, "base") {
		// -1 stands for "not given": a negative -base would skip the
		// version check it asks for.
		fmt.Fprintf(stderr, "sluice rules push: -base must be a version (0 or more), got %d\n", *base)
		return 2
	}

	local, err := config.ReadFile(*cfgPath)
	if err != nil {
		printConfigErrors(stderr, err)
		return 1
	}
	cfg, err := config.Parse(*cfgPath, local)
	if err != nil {
		printConfigErrors(stderr, err)
		return 1
	}
	if !cfg.RulesSource.Enabled() {
		fmt.Fprintf(stderr, "%s: names no rulesSource, so there is no fleet document to %s\n", *cfgPath, args[0])
		return 1
	}
	// go-redis logs through its process-wide logger (a Sentinel's master
	// found, a dial failed); the gateway keeps those at debug level, and a
	// command says only its own lines: the errors that matter are returned.
	redis.SetLogger(redisLog{zerolog.Nop()})
	rdb, err := dialSource(cfg.RulesSource)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	defer rdb.Close()
	store := rulesource.New(rdb, cfg.RulesSource.Key)
	name := cfg.RulesSource.Name()
	ctx, cancel := context.WithTimeout(context.Background(), rulesTimeout)
	defer cancel()

	if args[0] == "pull" {
		d, err := store.Pull(ctx)
		switch {
		case err != nil:
			fmt.Fprintln(stderr, err)
			return 1
		case d.Version == 0:
			fmt.Fprintf(stderr, "%s: no rules document is stored yet (sluice rules push FILE stores one)\n", name)
			return 1
		}
		// Its last line names the version, so that pushing the edited
		// file back is refused if another writer stored one since.
		_, _ = stdout.Write(rulesource.Pulled(d, name))
		fmt.Fprintf(stderr, "%s: version %d%s\n", name, d.Version, pushedAgo(d))
		return 0
	}

	file := fs.Arg(0)
	raw, err := readDoc(file)
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", file, err)
		return 1
	}
	doc, pulledAt, pulledFrom, pulled := rulesource.SplitPulled(raw)
	// The same checks as the gateways run on the document they pull, with
	// FILE's own name and lines in the messages.
	if _, err := config.ParseWithDocument(*cfgPath, local, file, doc); err != nil {
		printConfigErrors(stderr, err)
		fmt.Fprintf(stderr, "%s: not pushed: nothing was stored\n", file)
		return 1
	}
	basedOn := *base
	switch {
	case basedOn >= 0:
		// -base says it.
	case pulled && pulledFrom != name:
		fmt.Fprintf(stderr, "%s: its pull line says it was pulled from %s, not %s: pass -base VERSION to push it here, or delete that line\n%s: not pushed: nothing was stored\n",
			file, pulledFrom, name, file)
		return 1
	case pulled:
		basedOn = pulledAt
	default:
		// A file written from scratch is based on whatever is stored.
		if basedOn, err = store.Version(ctx); err != nil {
			fmt.Fprintln(stderr, err)
			return 1
		}
		if basedOn > 0 {
			fmt.Fprintf(stderr, "%s: names no version it was edited from (pull writes one on its last line; or -base): it replaces version %d\n", file, basedOn)
		}
	}
	d, err := store.Push(ctx, doc, basedOn)
	if err != nil {
		fmt.Fprintln(stderr, err)
		if errors.Is(err, rulesource.ErrConflict) {
			fmt.Fprintf(stderr, "%s: not pushed: nothing was stored\n", file)
		}
		return 1
	}
	fmt.Fprintf(stdout, "%s: pushed as version %d of %s\n", file, d.Version, name)
	return 0
}

// readDoc reads a document to push, refusing what no gateway would take.
func readDoc(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if st, err := f.Stat(); err == nil && st.Size() > config.MaxDocumentBytes {
		return nil, errors.New(config.TooLarge("file", st.Size()))
	}
	data, err := io.ReadAll(io.LimitReader(f, config.MaxDocumentBytes+1))
	if err != nil {
		return nil, err
	}
	if len(data) > config.MaxDocumentBytes {
		return nil, errors.New(config.TooLarge("file", -1))
	}
	return data, nil
}

func pushedAgo(d rulesource.Doc) string {
	if d.PushedAt.IsZero() {
		return ""
	}
	return ", pushed " + d.PushedAt.UTC().Format(time.RFC3339)
}

// printConfigErrors prints one problem per line, FILE:LINE: message.
func printConfigErrors(w io.Writer, err error) {
	var es config.Errors
	if errors.As(err, &es) {
		for _, e := range es {
			fmt.Fprintln(w, e.String())
		}
		return
	}
	fmt.Fprintln(w, err)
}

// flagGiven reports whether the command line set the flag name.
func flagGiven(fs *flag.FlagSet, name string) (given bool) {
	fs.Visit(func(f *flag.Flag) { given = given || f.Name == name })
	return given
}
