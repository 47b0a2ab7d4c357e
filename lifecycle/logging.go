package lifecycle

import (
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"sluice/config"
)

// Check refuses a -log-level or -log-format value that log.level or
// log.format would refuse in the file (config.LogLevels, the one list):
// falling back to info or JSON would hide the mistake. main exits 2 on it
// before anything starts, and New refuses it too. The error names the flag.
func (o Options) Check() error {
	var errs []string
	for _, f := range []struct {
		flag, value string
		allowed     []string
	}{
		{"-log-level", o.LogLevel, config.LogLevels()},
		{"-log-format", o.LogFormat, config.LogFormats()},
	} {
		if f.value != "" && !slices.Contains(f.allowed, f.value) {
			errs = append(errs, fmt.Sprintf("%s: must be one of %s, got %q", f.flag, strings.Join(f.allowed, ", "), f.value))
		}
	}
	// server.readHeaderTimeout refuses these in the file; the flags too (a
	// negative -read-header-timeout was the file's value, unsaid).
	if o.ReadHeaderTimeout < 0 || o.ReadHeaderTimeout > time.Hour {
		errs = append(errs, fmt.Sprintf("-read-header-timeout: must be > 0 and <= 1h, got %s", o.ReadHeaderTimeout))
	}
	if o.Drain < 0 {
		errs = append(errs, fmt.Sprintf("-drain-timeout: must be >= 0, got %s", o.Drain))
	}
	if len(errs) == 0 {
		return nil
	}
	return errors.New(strings.Join(errs, "; "))
}

// LogChoices are the values -log-level and -log-format take, for their
// usage text: "trace|debug|info|warn|error" and "json|console".
func LogChoices() (levels, formats string) {
	return strings.Join(config.LogLevels(), "|"), strings.Join(config.LogFormats(), "|")
}

// newLogger builds the zerolog logger: flags override the file.
func newLogger(w io.Writer, o Options, cfg *config.Config) zerolog.Logger {
	level, format := "info", ""
	if cfg != nil {
		if cfg.Log.Level != "" {
			level = cfg.Log.Level
		}
		format = cfg.Log.Format
	}
	if o.LogLevel != "" {
		level = o.LogLevel
	}
	if tty := isTerminal(w); logFormat(o.LogFormat, format, tty) == "console" {
		// Colours only on a terminal: a file, docker logs or journald
		// would keep the escape codes.
		w = zerolog.ConsoleWriter{Out: w, TimeFormat: "15:04:05.000", NoColor: !tty}
	}
	lvl, err := zerolog.ParseLevel(level)
	if err != nil || level == "" {
		lvl = zerolog.InfoLevel
	}
	return zerolog.New(w).Level(lvl).Hook(msTime{})
}

// msTime stamps each event with its time to the millisecond, in UTC
// (RFC 3339): zerolog's own Timestamp writes whole seconds unless its
// package-wide TimeFieldFormat is changed, and the access and block lines
// of one second could not be put in order.
type msTime struct{}

func (msTime) Run(e *zerolog.Event, _ zerolog.Level, _ string) {
	var buf [len("2006-01-02T15:04:05.000Z")]byte
	e.Bytes(zerolog.TimestampFieldName, time.Now().UTC().AppendFormat(buf[:0], "2006-01-02T15:04:05.000Z07:00"))
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// logFormat is the format the logs are written in: -log-format, else the
// file's log.format, else console on a terminal and JSON elsewhere. A
// format the user wrote is kept on a terminal too: someone who asked for
// JSON (to pipe through jq, say) gets JSON.
func logFormat(flagValue, fileValue string, tty bool) string {
	switch {
	case flagValue != "":
		return flagValue
	case fileValue != "":
		return fileValue
	case tty:
		return "console"
	}
	return "json"
}
