package config

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"gopkg.in/yaml.v3"

	"sluice/internal/atomicfile"
)

// MaxDocumentBytes is the largest rules document sluice takes (8 MiB): a
// rules file, a rulesSource's document in Redis, a file pushed with `sluice
// rules push` or the result of an edit in the admin editor. A larger one is
// refused before it is read whole, with TooLarge's message.
const MaxDocumentBytes = 8 << 20

// TooLarge is the message for a rules document over MaxDocumentBytes: what
// names the document ("file", "the document at sluice:rules") and size is
// its size in bytes, or -1 when it is only known to be over.
func TooLarge(what string, size int64) string {
	if size < 0 {
		return fmt.Sprintf("%s is over the %d MiB limit of a rules document", what, MaxDocumentBytes>>20)
	}
	return fmt.Sprintf("%s is %d bytes, over the %d MiB limit of a rules document", what, size, MaxDocumentBytes>>20)
}

// Defaults used by lifecycle and the docs.
const (
	DefaultListen      = ":8080"
	DefaultAdminListen = "127.0.0.1:9090"
)

// LogLevels are the values log.level takes, and -log-level with it: the
// one list, so that the file and the command line refuse the same values.
func LogLevels() []string { return []string{"trace", "debug", "info", "warn", "error"} }

// LogFormats are the values log.format and -log-format take.
func LogFormats() []string { return []string{"json", "console"} }

// Load reads, decodes strictly, defaults and validates the file at path. On
// failure it returns an Errors listing every problem found, each with its
// file:line and field path. It is safe to call from any goroutine. It
// checks the file as written (`sluice validate`); a gateway loads with
// Overrides.Load.
func Load(path string) (*Config, error) { return Overrides{}.Load(path) }

// Overrides are settings given outside the rules file, on the gateway's
// command line (-listen, -admin), that replace the file's. Their Load,
// Parse and LoadWithDocument put them in the Config after the defaults and
// before validation: the listeners are checked as the gateway opens them,
// and a file value they replace is neither checked nor used (SPEC 2:
// "Flags override the file's listen / admin.listen"). The zero Overrides
// replaces nothing.
type Overrides struct {
	Listen      *string // nil: the file's listen; "": the plain listener off
	AdminListen *string // nil: the file's admin.listen; "": the admin listener off
	LogLevel    string  // "": the file's log.level
	LogFormat   string  // "": the file's log.format
	// ReadHeaderTimeout replaces server.readHeaderTimeout; 0: the file's.
	ReadHeaderTimeout time.Duration
}

// Load is the package's Load with ov applied.
func (ov Overrides) Load(path string) (*Config, error) {
	data, err := ReadFile(path)
	if err != nil {
		return nil, err
	}
	return ov.Parse(path, data)
}

// replaces reports whether ov gives the setting at path (or one above it).
func (ov Overrides) replaces(path string) bool {
	for p := path; p != ""; p = parent(p) {
		switch {
		case p == "listen" && ov.Listen != nil, p == "admin.listen" && ov.AdminListen != nil,
			p == "log.level" && ov.LogLevel != "", p == "log.format" && ov.LogFormat != "",
			p == "server.readHeaderTimeout" && ov.ReadHeaderTimeout > 0:
			return true
		}
	}
	return false
}

// applyOverrides puts the overrides in cfg, and forgets what the file said
// of the settings they replace, even a value that did not decode: the
// value checked from here on is the command line's.
func (c *checker) applyOverrides() {
	ov := c.over
	if ov.Listen != nil {
		c.cfg.Listen = *ov.Listen
	}
	if ov.AdminListen != nil {
		s := *ov.AdminListen
		c.cfg.Admin.Listen = &s
	}
	if ov.LogLevel != "" {
		c.cfg.Log.Level = ov.LogLevel
	}
	if ov.LogFormat != "" {
		c.cfg.Log.Format = ov.LogFormat
	}
	if ov.ReadHeaderTimeout > 0 {
		c.cfg.Server.ReadHeaderTimeout = Duration(ov.ReadHeaderTimeout)
	}
	c.errs = slices.DeleteFunc(c.errs, func(e Error) bool { return e.Field != "" && ov.replaces(e.Field) })
	for p := range c.bad {
		if ov.replaces(p) {
			delete(c.bad, p)
		}
	}
}

// overridden marks an error about a value the command line gave: it is
// on no line of the file.
func (c *checker) overridden(e Error) Error {
	if c.over.replaces(e.Field) {
		e.Line = 0
		e.Msg += " (given on the command line, in place of the file's)"
	}
	return e
}

// whereIs says where the value at path comes from, for a message that
// points at another setting: "line N" of the file, or the command line.
func (c *checker) whereIs(path string) string {
	if c.over.replaces(path) {
		return "from the command line"
	}
	return "line " + strconv.Itoa(c.lineOf(path))
}

// ReadFile reads a rules file as Load does: a missing file, a directory, a
// FIFO or a file over MaxDocumentBytes is an Errors naming path; a file over
// it is never read past its first MaxDocumentBytes+1 bytes.
func ReadFile(path string) ([]byte, error) {
	data, _, err := ReadState(path)
	return data, err
}

// ReadState is ReadFile, and the file's state as read: the bytes' hash,
// or why there are none. The watch compares states; a reload that loads
// what it read and notes that read's state cannot be left on content the
// file no longer holds, as a write between two reads once left it.
func ReadState(path string) (data []byte, state string, err error) {
	fail := func(state, msg string) ([]byte, string, error) {
		return nil, state, Errors{{File: path, Msg: msg}}
	}
	// The file opened is the one judged: a Stat before a plain open left a
	// FIFO renamed in between to block the open (atomicfile.OpenForRead).
	f, st, err := atomicfile.OpenForRead(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fail(stateMissing, "file does not exist")
	case err != nil:
		return fail(stateUnreadable+err.Error(), "cannot read file: "+unwrapPathError(err))
	}
	defer f.Close()
	switch {
	case st.IsDir():
		return fail(notRegular(st), "is a directory, not a file")
	case !st.Mode().IsRegular():
		// A FIFO or device could block or never end.
		return fail(notRegular(st), "is not a regular file ("+fileKind(st.Mode())+")")
	case st.Size() > MaxDocumentBytes:
		return fail(tooLarge(st), TooLarge("file", st.Size()))
	}
	// The file may grow between Stat and Read: read at most one byte too many.
	data, err = io.ReadAll(io.LimitReader(f, MaxDocumentBytes+1))
	if err != nil {
		return fail(stateUnreadable+err.Error(), "cannot read file: "+unwrapPathError(err))
	}
	if len(data) > MaxDocumentBytes {
		return fail(tooLarge(st), TooLarge("file", -1))
	}
	return data, contentState(data), nil
}

// The states of a file that was not read (ReadState).
const (
	stateMissing    = "missing"
	stateUnreadable = "unreadable: "
)

func notRegular(st fs.FileInfo) string {
	return fmt.Sprintf("not a regular file: %v, modified %d", st.Mode().Type(), st.ModTime().UnixNano())
}

func tooLarge(st fs.FileInfo) string {
	return fmt.Sprintf("too large: %d bytes, modified %d", st.Size(), st.ModTime().UnixNano())
}

// contentState is the state (ReadState) of a file holding data: its
// SHA-256.
func contentState(data []byte) string {
	h := sha256.Sum256(data)
	return string(h[:])
}

func fileKind(m fs.FileMode) string {
	switch {
	case m&fs.ModeNamedPipe != 0:
		return "a named pipe"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeDevice != 0:
		return "a device"
	}
	return m.Type().String()
}

func unwrapPathError(err error) string {
	if pe, ok := errors.AsType[*fs.PathError](err); ok {
		return pe.Err.Error()
	}
	return err.Error()
}

// Parse is Load on bytes already read: path is used in messages and stored in
// Config.Path. It never panics, whatever data holds. A file that names a
// rulesSource is checked as a gateway's own file (see ParseWithDocument):
// its Config has no routes and is not served until a document is merged.
func Parse(path string, data []byte) (*Config, error) { return Overrides{}.Parse(path, data) }

// Parse is the package's Parse with ov applied.
func (ov Overrides) Parse(path string, data []byte) (*Config, error) {
	root, errs := parseRoot(path, data, "file")
	if errs != nil {
		return nil, errs
	}
	return parseFile(path, root, ov)
}

// parseFile is Parse on the file's root node, with ov applied.
func parseFile(path string, root *yaml.Node, ov Overrides) (*Config, error) {
	if namesRulesSource(root) {
		return parseGatewayFile(path, root, ov)
	}
	d := newDecoder(path)
	d.over = ov
	d.reserve(root)
	cfg := &Config{Path: path}
	d.decode(root, reflect.ValueOf(cfg).Elem(), "")
	d.check(cfg)
	if len(d.errs) > 0 {
		return nil, d.result(cfg)
	}
	return cfg, nil
}

// check applies the defaults and validates cfg, unless decoding ran out of
// its node budget (the partial Config would only add noise and cost).
func (d *decoder) check(cfg *Config) {
	if d.exhausted() {
		return
	}
	c := &checker{decoder: d, cfg: cfg}
	c.setLines()
	c.applyAllDefaults()
	c.applyOverrides()
	c.validate()
	c.validateEdge()
	c.validateServer()
	c.distinctListeners()
	c.validateRulesSource()
}

// parseRoot reads one YAML document whose root is a mapping, within
// MaxDocumentBytes and MaxDocumentNodes; what names the data in messages
// ("file", "document").
func parseRoot(name string, data []byte, what string) (*yaml.Node, Errors) {
	fail := func(line int, msg string) (*yaml.Node, Errors) {
		return nil, Errors{{File: name, Line: line, Msg: msg}}
	}
	if len(data) > MaxDocumentBytes {
		return fail(0, TooLarge(what, int64(len(data))))
	}
	// yaml.v3 builds every node before config sees one: count them first.
	if e := nodesOver(name, data, what); e != nil {
		return nil, Errors{*e}
	}
	return decodeRoot(name, data, what)
}

// decodeRoot is parseRoot without the size limit.
func decodeRoot(name string, data []byte, what string) (*yaml.Node, Errors) {
	fail := func(line int, msg string) (*yaml.Node, Errors) {
		return nil, Errors{{File: name, Line: line, Msg: msg}}
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return fail(0, what+" is empty")
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if err == io.EOF {
			return fail(0, what+" is empty (it holds only comments)")
		}
		return fail(yamlError(err, data))
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); err != io.EOF {
		if err != nil {
			return fail(yamlError(err, data))
		}
		return fail(extra.Line, "invalid YAML: only one document is allowed (remove the second \"---\")")
	}
	if len(doc.Content) == 0 {
		return fail(0, what+" is empty")
	}
	root := doc.Content[0]
	if root.Kind != yaml.MappingNode && !(root.Kind == yaml.AliasNode && root.Alias != nil && root.Alias.Kind == yaml.MappingNode) {
		return fail(root.Line, "the "+what+" must be a mapping of settings (listen, upstreams, routes, ...), got "+describe(root))
	}
	return root, nil
}

var yamlLine = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

// yamlError turns a yaml.v3 syntax error in data into a line and a
// message. yaml.v3 names, for many problems, the line of the construct it
// was reading, not of the mistake: a route list's first item for a line
// indented one space short twenty lines below it, the line above a tab
// that breaks indentation. The mistake is on the last line of the shortest
// prefix of data, in whole lines, that fails with the same message: up to
// it the document reads, and every longer prefix fails there. A document
// that ends where more was due (a flow sequence left open) is reported at
// its last line that holds anything, not at the empty end past it.
func yamlError(err error, data []byte) (int, string) {
	msg := err.Error()
	last := bytes.Count(bytes.TrimRight(data, " \t\r\n"), []byte("\n")) + 1
	m := yamlLine.FindStringSubmatch(msg)
	if m == nil {
		// yaml.v3 names no line for some mistakes (an alias of an unknown
		// anchor, a byte that is not UTF-8, a control character): it is
		// the last line of the shortest prefix failing with the message.
		line := 0
		switch {
		case strings.Contains(msg, "UTF-8") && !utf8.Valid(data):
			// A prefix cut after a bad byte fails otherwise ("incomplete
			// UTF-8 octet sequence"): the line is the first not UTF-8.
			line = min(1+bytes.Count(data[:invalidUTF8(data)], []byte("\n")), last)
		case len(data) <= maxLineSearch:
			line = mistakeLine(data, func(e error) bool { return e.Error() == msg }, 1, last)
		}
		return line, "invalid YAML: " + strings.TrimPrefix(msg, "yaml: ")
	}
	line, _ := strconv.Atoi(m[1])
	if len(data) <= maxLineSearch {
		line = mistakeLine(data, func(e error) bool {
			f := yamlLine.FindStringSubmatch(e.Error())
			return f != nil && f[2] == m[2]
		}, max(line-1, 1), last)
	}
	return min(line, last), "invalid YAML: " + m[2]
}

// invalidUTF8 is the offset of data's first byte that is not UTF-8
// (len(data) if every byte is).
func invalidUTF8(data []byte) int {
	for i := 0; i < len(data); {
		r, size := utf8.DecodeRune(data[i:])
		if r == utf8.RuneError && size == 1 {
			return i
		}
		i += size
	}
	return len(data)
}

// maxLineSearch bounds the documents whose mistake is searched for: each
// step parses a prefix, and a bigger document's error keeps yaml.v3's line.
const maxLineSearch = 1 << 20

// mistakeLine is the first line k in [from, last] whose prefix of data
// through line k fails to parse with the problem yaml.v3 gave the whole
// document (same); last if none does, which cannot be: data is that prefix.
func mistakeLine(data []byte, same func(error) bool, from, last int) int {
	ends := lineEnds(data)
	fails := func(k int) bool {
		err := yamlSyntax(data[:ends[k-1]])
		return err != nil && same(err)
	}
	lo, hi := from, last
	for lo < hi {
		mid := lo + (hi-lo)/2
		if fails(mid) {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	return lo
}

// lineEnds is where each line of data ends, its newline included.
func lineEnds(data []byte) []int {
	var ends []int
	for i, c := range data {
		if c == '\n' {
			ends = append(ends, i+1)
		}
	}
	if len(data) > 0 && data[len(data)-1] != '\n' {
		ends = append(ends, len(data))
	}
	return ends
}

// yamlSyntax is the first syntax error of data's documents, if any.
func yamlSyntax(data []byte) error {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	for {
		var n yaml.Node
		if err := dec.Decode(&n); err != nil {
			if err == io.EOF {
				return nil
			}
			return err
		}
	}
}

// AdminListen returns the admin listener's address with the default applied;
// "" means the admin listener is off.
func (c *Config) AdminListen() string {
	if c.Admin.Listen == nil {
		return DefaultAdminListen
	}
	return *c.Admin.Listen
}
