package rulesource

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"regexp"
	"strconv"
	"time"

	"sluice/config"
	"sluice/internal/atomicfile"
)

// Cache is the last document that validated, kept in one file so that a
// gateway that starts while Redis is down serves it. The file is the
// document's text after one comment line naming its source, version and
// hash, so it reads (and validates) as the document itself, with every line
// number one higher. It is safe for concurrent use.
type Cache struct {
	path   string
	source string // the source's name, e.g. redis://127.0.0.1:6379/0/sluice:rules
}

// NewCache returns the cache at path for the document of source.
func NewCache(path, source string) *Cache { return &Cache{path: path, source: source} }

// Path is the cache file.
func (c *Cache) Path() string { return c.path }

var cacheHeader = regexp.MustCompile(`^# sluice: last good rules of (\S+) version (\d+) sha256 ([0-9a-f]{64}) pushedAt (-?\d+)\b.*\n`)

// Save writes d atomically: a reader sees the old cache or the new one.
func (c *Cache) Save(d Doc) error {
	var pushed int64
	if !d.PushedAt.IsZero() {
		pushed = d.PushedAt.UnixMilli()
	}
	var b bytes.Buffer
	// YAML allows a byte order mark only at the start of the stream: it
	// stays first, before the header.
	text, bom := bytes.CutPrefix(d.Text, byteOrderMark)
	if bom {
		b.Write(byteOrderMark)
	}
	fmt.Fprintf(&b, "# sluice: last good rules of %s version %d sha256 %s pushedAt %d (written by the gateway; edits are lost)\n",
		c.source, d.Version, d.SHA(), pushed)
	b.Write(text)
	if err := atomicfile.Write(c.path, b.Bytes(), 0o644); err != nil {
		return fmt.Errorf("rulesource: saving the last good rules: %w", err)
	}
	return nil
}

var byteOrderMark = []byte("\ufeff")

// ErrNoCache is returned by Load when there is no cache file.
var ErrNoCache = errors.New("rulesource: no last good rules saved")

// Load reads the cache. It returns the document and the whole file (the
// header line and the text), which is what a caller validates so that line
// numbers match the file. A cache of another source, or whose text does not
// match its hash, is an error.
func (c *Cache) Load() (Doc, []byte, error) {
	f, err := os.Open(c.path)
	if errors.Is(err, fs.ErrNotExist) {
		return Doc{}, nil, ErrNoCache
	}
	if err != nil {
		return Doc{}, nil, fmt.Errorf("rulesource: reading the last good rules: %w", err)
	}
	defer f.Close()
	// The header line, then at most a document's bytes.
	data, err := io.ReadAll(io.LimitReader(f, config.MaxDocumentBytes+4096))
	if err != nil {
		return Doc{}, nil, fmt.Errorf("rulesource: reading the last good rules: %w", err)
	}
	rest, bom := bytes.CutPrefix(data, byteOrderMark)
	m := cacheHeader.FindSubmatch(rest)
	if m == nil {
		return Doc{}, nil, fmt.Errorf("rulesource: %s: the first line is not the header sluice writes", c.path)
	}
	if string(m[1]) != c.source {
		return Doc{}, nil, fmt.Errorf("rulesource: %s holds the rules of %s, not of %s", c.path, m[1], c.source)
	}
	v, _ := strconv.ParseInt(string(m[2]), 10, 64)
	d := Doc{Version: v, Text: rest[len(m[0]):]}
	if bom {
		d.Text = append([]byte("\ufeff"), d.Text...)
	}
	if ms, _ := strconv.ParseInt(string(m[4]), 10, 64); ms != 0 {
		d.PushedAt = time.UnixMilli(ms)
	}
	if d.SHA() != string(m[3]) {
		return Doc{}, nil, fmt.Errorf("rulesource: %s was changed after the gateway wrote it (its hash does not match)", c.path)
	}
	return d, data, nil
}
