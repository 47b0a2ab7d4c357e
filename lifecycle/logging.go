package lifecycle

import (
	"io"
	"os"

	"github.com/rs/zerolog"

	"sluice/config"
)

// newLogger builds the zerolog logger: flags override the file; JSON unless
// asked for console or stderr is a terminal.
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
	switch {
	case o.LogFormat != "":
		format = o.LogFormat
	case isTerminal(w):
		format = "console"
	}
	if format == "console" {
		w = zerolog.ConsoleWriter{Out: w, TimeFormat: "15:04:05.000"}
	}
	lvl, err := zerolog.ParseLevel(level)
	if err != nil || level == "" {
		lvl = zerolog.InfoLevel
	}
	return zerolog.New(w).Level(lvl).With().Timestamp().Logger()
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}
