package config

import (
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// RulesSource names a fleet's shared rules document in Redis
// (docs/fleet.md). With it, the rules file holds only the gateway's own
// sections and the document holds the rest, in the same schema. The Redis
// is named in one of the RedisTarget forms, at rulesSource's level
// (rulesSource.redis, rulesSource.sentinel or rulesSource.clusterAddrs).
type RulesSource struct {
	RedisTarget `yaml:",inline"`
	Key         string `yaml:"key" json:"key"` // the hash holding the document and its version
	// CacheFile is where the last document that validated is kept, relative
	// to the rules file; "" is the rules file's name with ".last-good"
	// before its extension (rules.last-good.yaml).
	CacheFile string `yaml:"cacheFile" json:"cacheFile"`
}

// gatewaySections are the settings that belong to one gateway: they stay in
// its rules file when a rulesSource holds the rest.
var gatewaySections = []string{"listen", "tls", "http2", "server", "admin", "log", "cluster", "rulesSource"}

func isGatewaySection(name string) bool { return slices.Contains(gatewaySections, name) }

// GatewaySections lists the sections a gateway's own file keeps with a
// rulesSource.
func GatewaySections() []string { return slices.Clone(gatewaySections) }

// SharedSections lists the sections a rules document holds: every section
// of the schema that is not a gateway's own, in the schema's order.
func SharedSections() []string {
	var out []string
	t := reflect.TypeFor[Config]()
	for i := range t.NumField() {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("yaml"), ",")
		if name != "" && name != "-" && !isGatewaySection(name) {
			out = append(out, name)
		}
	}
	return out
}

func isSharedSection(name string) bool { return slices.Contains(SharedSections(), name) }

// Enabled reports whether the file names a rules source.
func (s RulesSource) Enabled() bool {
	return s.Form() != RedisFormNone || s.Key != "" || s.CacheFile != ""
}

// Name is how messages name the document, never with a password:
// redis://HOST/DB/KEY (rediss:// for TLS); redis-sentinel://MASTER/DB/KEY
// for a Sentinel-watched master; redis-cluster://SEED/0/KEY for a Cluster.
func (s RulesSource) Name() string {
	switch s.Form() {
	case RedisFormSentinel:
		return "redis-sentinel://" + s.Sentinel.MasterName + "/" + strconv.Itoa(s.Sentinel.DB) + "/" + s.Key
	case RedisFormCluster:
		seed := s.ClusterAddrs[0]
		if u, err := url.Parse(seed); err == nil && u.Host != "" {
			seed = u.Host
		}
		return "redis-cluster://" + seed + "/0/" + s.Key
	}
	u, err := url.Parse(s.Redis)
	if err != nil || u.Host == "" {
		return "redis://?/" + s.Key
	}
	db := strings.Trim(u.Path, "/")
	if db == "" {
		db = "0"
	}
	return u.Scheme + "://" + u.Host + "/" + db + "/" + s.Key
}

// MarshalJSON hides every password, as Cluster's does.
func (s RulesSource) MarshalJSON() ([]byte, error) {
	type plain RulesSource
	p := plain(s)
	p.RedisTarget = s.RedisTarget.Redacted()
	return json.Marshal(p)
}

// RulesCachePath is the file that keeps the last good rules document.
func (c *Config) RulesCachePath() string {
	if c.RulesSource.CacheFile != "" {
		return c.File(c.RulesSource.CacheFile)
	}
	ext := filepath.Ext(c.Path)
	return strings.TrimSuffix(c.Path, ext) + ".last-good" + ext
}

// NeedsDocument reports whether cfg names a rules source but holds no
// document yet: such a Config (from Parse) cannot be served.
func (c *Config) NeedsDocument() bool { return c.RulesSource.Enabled() && c.Document == "" }

// namesRulesSource reports whether a file's root mapping sets rulesSource.
func namesRulesSource(root *yaml.Node) bool {
	root = deref(root)
	for i := 0; i+1 < len(root.Content); i += 2 {
		k, v := root.Content[i], deref(root.Content[i+1])
		if k.Kind == yaml.ScalarNode && k.Value == "rulesSource" && v != nil && !(v.Kind == yaml.ScalarNode && v.Tag == "!!null") {
			return true
		}
	}
	return false
}

func deref(n *yaml.Node) *yaml.Node {
	for n != nil && n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	return n
}

// parseGatewayFile checks a file that names a rulesSource on its own (as
// `sluice validate` does): its own sections fully, and that it holds none of
// the document's. The Config it returns has no routes (NeedsDocument).
func parseGatewayFile(path string, root *yaml.Node, ov Overrides) (*Config, error) {
	d := newDecoder(path)
	d.over = ov
	keep, misplaced := splitSections(d, root, path, nil, "")
	cfg := &Config{Path: path}
	d.decode(keep, reflect.ValueOf(cfg).Elem(), "")
	d.check(cfg)
	// The document's sections are absent here by design: what validation
	// says of them (no routes, say) is for the merged rules, not this file.
	d.errs = slices.DeleteFunc(d.errs, func(e Error) bool { return isSharedSection(topSection(e.Field)) })
	d.errs = append(d.errs, misplaced...)
	if len(d.errs) > 0 {
		return nil, d.result(cfg)
	}
	return cfg, nil
}

// ParseWithDocument merges a gateway's rules file (path, data), which names a
// rulesSource, with the rules document doc (origin, upstreams, routes, the
// rules, system, blockResponse) and checks the result as Parse checks one
// file. Errors in the document are named docName (RulesSource.Name for the
// document in Redis, the file's name for a file about to be pushed), with
// the document's own line numbers. A section of the document in the file,
// or a gateway's own section in the document, is an error.
func ParseWithDocument(path string, data []byte, docName string, doc []byte) (*Config, error) {
	return Overrides{}.ParseWithDocument(path, data, docName, doc)
}

// ParseWithDocument is the package's ParseWithDocument with ov applied.
func (ov Overrides) ParseWithDocument(path string, data []byte, docName string, doc []byte) (*Config, error) {
	root, errs := parseRoot(path, data, "file")
	if errs != nil {
		return nil, errs
	}
	if !namesRulesSource(root) {
		return nil, Errors{{File: path, Msg: "names no rulesSource, so no rules document can be merged into it; a gateway started with one keeps it until a restart (removing rulesSource takes effect at restart)"}}
	}
	docRoot, errs := parseRoot(docName, doc, "rules document")
	if errs != nil {
		return nil, errs
	}
	d := newDecoder(path)
	d.doc, d.over = docName, ov
	keep, misplaced := splitSections(d, root, path, docRoot, docName)
	cfg := &Config{Path: path, Document: docName}
	d.reserve(keep)
	d.decode(keep, reflect.ValueOf(cfg).Elem(), "")
	d.check(cfg)
	d.errs = append(d.errs, misplaced...)
	if len(d.errs) > 0 {
		return nil, d.result(cfg)
	}
	return cfg, nil
}

// LoadWithDocument is ParseWithDocument on the rules file at path, read as
// Load reads it.
func LoadWithDocument(path, docName string, doc []byte) (*Config, error) {
	return Overrides{}.LoadWithDocument(path, docName, doc)
}

// LoadWithDocument is the package's LoadWithDocument with ov applied.
func (ov Overrides) LoadWithDocument(path, docName string, doc []byte) (*Config, error) {
	data, err := ReadFile(path)
	if err != nil {
		return nil, err
	}
	return ov.ParseWithDocument(path, data, docName, doc)
}

// splitSections builds the one mapping to decode: the file's own sections
// and, when docRoot is given, the document's. Sections in the wrong place
// are left out and returned as errors; every kept top-level key is recorded
// in d.section with the file it came from.
func splitSections(d *decoder, root *yaml.Node, path string, docRoot *yaml.Node, docName string) (*yaml.Node, Errors) {
	root, docRoot = deref(root), deref(docRoot)
	var errs Errors
	out := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map", Line: root.Line, Column: root.Column}
	docLine := map[string]int{}
	if docRoot != nil {
		for i := 0; i+1 < len(docRoot.Content); i += 2 {
			if k := docRoot.Content[i]; k.Kind == yaml.ScalarNode {
				if _, dup := docLine[k.Value]; !dup {
					docLine[k.Value] = k.Line
				}
			}
		}
	}
	merge := func(name string, k *yaml.Node) Error {
		return Error{File: name, Line: k.Line, Msg: "merge keys (<<) at the top level cannot be used with rulesSource: write the sections out"}
	}
	for i := 0; i+1 < len(root.Content); i += 2 {
		k, v := root.Content[i], root.Content[i+1]
		switch {
		case k.Kind == yaml.ScalarNode && k.Tag == "!!merge":
			errs = append(errs, merge(path, k))
			continue
		case k.Kind == yaml.ScalarNode && isSharedSection(k.Value):
			msg := fmt.Sprintf("belongs in the rules document, not in this file: with rulesSource, each gateway's file holds only %s",
				strings.Join(gatewaySections, ", "))
			if l, both := docLine[k.Value]; both {
				msg = fmt.Sprintf("is in both this file and the rules document (%s:%d); with rulesSource it belongs in the document only", docName, l)
			}
			errs = append(errs, Error{File: path, Line: k.Line, Field: k.Value, Msg: msg})
			continue
		}
		if k.Kind == yaml.ScalarNode {
			d.section[k.Value] = path
		}
		out.Content = append(out.Content, k, v)
	}
	if docRoot == nil {
		return out, errs
	}
	for i := 0; i+1 < len(docRoot.Content); i += 2 {
		k, v := docRoot.Content[i], docRoot.Content[i+1]
		switch {
		case k.Kind == yaml.ScalarNode && k.Tag == "!!merge":
			errs = append(errs, merge(docName, k))
			continue
		case k.Kind == yaml.ScalarNode && isGatewaySection(k.Value):
			errs = append(errs, Error{File: docName, Line: k.Line, Field: k.Value,
				Msg: "is a gateway's own setting: it belongs in each gateway's rules file, not in the shared rules document"})
			continue
		case k.Kind == yaml.ScalarNode && d.section[k.Value] == path:
			continue // an unknown key in both: reported once, in the file
		}
		if k.Kind == yaml.ScalarNode {
			if _, dup := d.section[k.Value]; !dup {
				d.section[k.Value] = docName
			}
		}
		out.Content = append(out.Content, k, v)
	}
	return out, errs
}

// topSection is the first key of a field path ("routes" of "routes[2].path").
func topSection(path string) string {
	if i := strings.IndexAny(path, ".["); i >= 0 {
		return path[:i]
	}
	return path
}

// validateRulesSource checks the rulesSource section, when the file has one.
func (c *checker) validateRulesSource() {
	s := c.cfg.RulesSource
	if !c.has("rulesSource") || c.bad["rulesSource"] {
		return
	}
	if !c.redisTarget("rulesSource", s.RedisTarget) {
		c.add("rulesSource", "names no Redis: set one of rulesSource.redis (a redis:// URL), rulesSource.sentinel or rulesSource.clusterAddrs")
	}
	if strings.TrimSpace(s.Key) == "" {
		c.add("rulesSource.key", "is required (the Redis key of the rules document, like \"sluice:rules\")")
	} else if strings.ContainsAny(s.Key, " \t\r\n") {
		c.add("rulesSource.key", "must not contain spaces, got %s", quote(s.Key))
	}
	if s.CacheFile != "" && c.cfg.Path != "" && samePath(c.cfg.RulesCachePath(), c.cfg.Path) {
		// The cache is overwritten with each good document: this file's
		// own settings (listen, admin, rulesSource) would be lost.
		c.add("rulesSource.cacheFile", "must not be the rules file itself, got %s", quote(s.CacheFile))
	}
}

// samePath reports whether a and b name one file: equal once absolute and
// clean, or the same file through links.
func samePath(a, b string) bool {
	aa, err1 := filepath.Abs(a)
	ab, err2 := filepath.Abs(b)
	if err1 == nil && err2 == nil && aa == ab {
		return true
	}
	fa, err1 := os.Stat(a)
	fb, err2 := os.Stat(b)
	return err1 == nil && err2 == nil && os.SameFile(fa, fb)
}
