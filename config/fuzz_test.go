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
	for _, name := range files {
		if data, err := os.ReadFile(name); err == nil && len(data) < 64<<10 {
			f.Add(data)
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
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
		if len(cfg.Routes) == 0 {
			t.Fatal("valid config without routes")
		}
		if _, err := cfg.BlockResponse.BodyTemplate(); err != nil {
			t.Fatalf("valid config with a bad body template: %v", err)
		}
	})
}
