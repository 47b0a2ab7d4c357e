package rulesource_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"sluice/config"
	"sluice/rulesource"
)

const src = "redis://127.0.0.1:6379/0/sluice:rules"

func TestCacheRoundTrip(t *testing.T) {
	dir := t.TempDir()
	c := rulesource.NewCache(filepath.Join(dir, "rules.yaml.lastgood"), src)
	if _, _, err := c.Load(); !errors.Is(err, rulesource.ErrNoCache) {
		t.Fatalf("Load of no file: %v, want ErrNoCache", err)
	}
	pushed := time.UnixMilli(1_780_000_000_123)
	for _, d := range []rulesource.Doc{
		{Version: 7, Text: []byte("routes:\n  - path: /a\n"), PushedAt: pushed},
		{Version: 8, Text: []byte("routes: []\n")},
	} {
		if err := c.Save(d); err != nil {
			t.Fatal(err)
		}
		got, file, err := c.Load()
		if err != nil {
			t.Fatal(err)
		}
		if got.Version != d.Version || string(got.Text) != string(d.Text) || !got.PushedAt.Equal(d.PushedAt) {
			t.Fatalf("Load = %+v, want %+v", got, d)
		}
		// The file is the text after one comment line: it parses as the
		// document, one line lower.
		first, rest, _ := strings.Cut(string(file), "\n")
		if !strings.HasPrefix(first, "# ") || rest != string(d.Text) {
			t.Fatalf("cache file is %q", file)
		}
	}
	// Only the cache file is left: the temporary file was renamed over it.
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Fatalf("%d files in the directory, want 1: %v", len(ents), ents)
	}
}

func TestCacheRefusesWhatItDidNotWrite(t *testing.T) {
	cases := []struct {
		name, want string
		edit       func(path string)
	}{
		{"another source", "holds the rules of", func(p string) {
			if err := rulesource.NewCache(p, "redis://other:6379/0/k").Save(rulesource.Doc{Version: 1, Text: []byte("a: 1\n")}); err != nil {
				t.Fatal(err)
			}
		}},
		{"edited by hand", "changed after the gateway wrote it", func(p string) {
			b, _ := os.ReadFile(p)
			os.WriteFile(p, append(b, "b: 2\n"...), 0o644)
		}},
		{"no header", "not the header", func(p string) { os.WriteFile(p, []byte("a: 1\n"), 0o644) }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "cache")
			c := rulesource.NewCache(p, src)
			if err := c.Save(rulesource.Doc{Version: 1, Text: []byte("a: 1\n")}); err != nil {
				t.Fatal(err)
			}
			tc.edit(p)
			if _, _, err := c.Load(); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Load: %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

// A document saved by a Windows editor starts with a UTF-8 byte order mark,
// which YAML allows only at the start of the stream. Its cache must still
// read as the document, or a gateway that starts while Redis is down would
// refuse the last good rules it wrote itself.
func TestCacheOfADocumentWithAByteOrderMark(t *testing.T) {
	gateway := []byte("rulesSource:\n  redis: redis://127.0.0.1:6379/0\n  key: sluice:rules\n")
	doc := rulesource.Doc{Version: 3, Text: []byte("\ufeffupstreams:\n  up:\n    targets: [\"http://127.0.0.1:9001\"]\nroutes:\n  - path: /a\n    upstream: up\n")}
	if _, err := config.ParseWithDocument("rules.yaml", gateway, src, doc.Text); err != nil {
		t.Fatalf("the document itself: %v", err)
	}
	c := rulesource.NewCache(filepath.Join(t.TempDir(), "rules.last-good.yaml"), src)
	if err := c.Save(doc); err != nil {
		t.Fatal(err)
	}
	got, file, err := c.Load()
	if err != nil || got.Version != doc.Version || string(got.Text) != string(doc.Text) || got.SHA() != doc.SHA() {
		t.Fatalf("Load = %+v, %v; want %+v", got, err, doc)
	}
	if _, err := config.ParseWithDocument("rules.yaml", gateway, c.Path(), file); err != nil {
		t.Fatalf("the cache file does not read as the document: %v", err)
	}
}
