package config_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sluice/config"
)

// FuzzParse: whatever the bytes, Parse never panics, returns either a Config
// or a non-empty Errors, and every error names the file.
func FuzzParse(f *testing.F) {
	files, _ := filepath.Glob("testdata/*.yaml")
	fleet, _ := filepath.Glob("testdata/fleet/*.yaml")
	files = append(files, fleet...)
	for _, name := range files {
		if data, err := os.ReadFile(name); err == nil && len(data) < 64<<10 {
			f.Add(data)
		}
	}
	gateway, err := os.ReadFile("testdata/fleet/gateway.yaml")
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		// The same bytes as a fleet's rules document: each error names the
		// document or the gateway's file, and a valid merge is servable.
		if cfg, err := config.ParseWithDocument("g.yaml", gateway, "redis://h/0/k", data); err != nil {
			var es config.Errors
			if !errors.As(err, &es) || len(es) == 0 {
				t.Fatalf("document: error %v (%T) is not a non-empty config.Errors", err, err)
			}
			for _, e := range es {
				if (e.File != "redis://h/0/k" && e.File != "g.yaml") || e.Msg == "" {
					t.Fatalf("document: malformed error %+v", e)
				}
			}
		} else if len(cfg.Routes) == 0 || cfg.NeedsDocument() {
			t.Fatal("a valid merge without routes")
		}

		cfg, err := config.Parse("f.yaml", data)
		if (cfg == nil) == (err == nil) {
			t.Fatalf("Parse = %v, %v: want exactly one of Config and error", cfg, err)
		}
		if err != nil {
			var es config.Errors
			if !errors.As(err, &es) || len(es) == 0 {
				t.Fatalf("error %v (%T) is not a non-empty config.Errors", err, err)
			}
			for _, e := range es {
				if e.File != "f.yaml" || e.Msg == "" || !strings.HasPrefix(e.String(), "f.yaml") {
					t.Fatalf("malformed error %+v", e)
				}
			}
			return
		}
		// A valid config is usable as the proxy will use it.
		if len(cfg.Routes) == 0 && !cfg.NeedsDocument() {
			t.Fatal("valid config without routes")
		}
		if _, err := cfg.BlockResponse.BlockBody(); err != nil {
			t.Fatalf("valid config with a bad body template: %v", err)
		}
	})
}
