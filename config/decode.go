package config

import (
	"fmt"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// maxAliasNodes bounds the nodes decoded through aliases, so that aliases
// that expand exponentially ("billion laughs") are refused instead of eating
// time and memory. Nodes written out in the file are bounded by MaxDocumentBytes.
const maxAliasNodes = 100_000

// decoder turns a yaml.Node tree into Config values strictly: every unknown
// key, duplicate key and type mismatch becomes an Error with its line, and
// decoding goes on so that all problems are reported at once.
type decoder struct {
	file    string
	doc     string            // the rules document's name, "" when the file is alone
	over    Overrides         // the command line's settings, which replace the file's
	section map[string]string // top-level key -> the name of the file it came from
	errs    Errors
	lines   map[string]int                    // field path -> line of its key (or list item)
	set     map[string]bool                   // paths given a non-null value
	bad     map[string]bool                   // paths that failed to decode; validation skips them
	fields  map[reflect.Type]map[string][]int // yamlFields, once per type
	nodes   int                               // nodes decoded through aliases
	aliased int                               // > 0 while decoding the target of an alias
	dropped int                               // errors not kept, past the bound
}

func newDecoder(file string) *decoder {
	return &decoder{file: file, section: map[string]string{}, lines: map[string]int{}, set: map[string]bool{}, bad: map[string]bool{},
		fields: map[reflect.Type]map[string][]int{}}
}

// reserve sizes the path maps for the nodes under n (aliases not followed),
// so that a large document does not grow them step by step.
func (d *decoder) reserve(n *yaml.Node) {
	count := 0
	var walk func(*yaml.Node)
	walk = func(n *yaml.Node) {
		count++
		for _, c := range n.Content {
			walk(c)
		}
	}
	walk(n)
	// About half the nodes are keys; every value gets a line and a set mark.
	d.lines = make(map[string]int, count/2)
	d.set = make(map[string]bool, count/2)
}

// fileOf names the file a field path lives in: with a rules document, a
// section the gateway's file does not hold is the document's.
func (d *decoder) fileOf(path string) string {
	if d.doc == "" {
		return d.file
	}
	top := topSection(path)
	if f, ok := d.section[top]; ok {
		return f
	}
	if isGatewaySection(top) {
		return d.file
	}
	return d.doc
}

// maxErrors bounds the problems kept for one file; a file with more is
// reported with the first ones and a count.
const maxErrors = 100

func (d *decoder) fail(line int, path, msg string) {
	d.push(Error{File: d.fileOf(path), Line: line, Field: path, Msg: msg})
	d.bad[path] = true
}

// push keeps a bounded number of errors (a generous multiple of what is
// shown, so that sorting by line still shows the first ones).
func (d *decoder) push(e Error) {
	if len(d.errs) >= 10*maxErrors {
		d.dropped++
		return
	}
	d.errs = append(d.errs, e)
}

// exhausted reports whether the node budget ran out; the partial Config is
// then not validated (it would only add noise and cost).
func (d *decoder) exhausted() bool { return d.nodes >= maxAliasNodes }

// result sorts the errors by line and trims them to maxErrors, with every
// secret of cfg (decoded as far as it went) masked where a message quotes it.
func (d *decoder) result(cfg *Config) Errors {
	maskSecrets(d.errs, cfg)
	// The gateway's file first, then the document; each by line.
	rank := func(e Error) int {
		if e.File == d.doc && d.doc != "" {
			return 1
		}
		return 0
	}
	slices.SortStableFunc(d.errs, func(a, b Error) int {
		if r := rank(a) - rank(b); r != 0 {
			return r
		}
		return a.Line - b.Line
	})
	if n := len(d.errs) + d.dropped; n > maxErrors {
		d.errs = append(d.errs[:maxErrors], Error{File: d.file, Msg: fmt.Sprintf("too many errors (%d); showing the first %d", n, maxErrors)})
	}
	return d.errs
}

var unmarshalerType = reflect.TypeFor[yaml.Unmarshaler]()

// shorthand is a mapping type that may also be written as one scalar (a
// target: its URL, or {url, weight}); the mapping form is decoded field by
// field like any struct, with lines.
type shorthand interface{ fromScalar(string) }

// decode stores n into v (addressable), recording the line of every path.
func (d *decoder) decode(n *yaml.Node, v reflect.Value, path string) {
	if n == nil {
		return
	}
	// A problem with the value is told at the line of the field that holds
	// it: through an alias, not at its anchor's, which may be another
	// section's (a token's, say).
	line := n.Line
	if n.Kind == yaml.AliasNode {
		d.aliased++
		defer func() { d.aliased-- }()
	}
	if n = d.resolve(n, path); n == nil {
		return
	}
	if n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
		return // an explicit null leaves the zero value, as if absent
	}
	d.set[path] = true
	if n.Kind == yaml.ScalarNode && v.CanAddr() {
		if s, ok := v.Addr().Interface().(shorthand); ok {
			s.fromScalar(n.Value)
			return
		}
	}
	if v.CanAddr() && v.Addr().Type().Implements(unmarshalerType) {
		if err := v.Addr().Interface().(yaml.Unmarshaler).UnmarshalYAML(n); err != nil {
			d.fail(line, path, strings.TrimPrefix(err.Error(), "config: "))
		}
		return
	}
	switch v.Kind() {
	case reflect.Pointer:
		p := reflect.New(v.Type().Elem())
		d.decode(n, p.Elem(), path)
		v.Set(p)
	case reflect.Struct:
		d.decodeStruct(n, v, path, line)
	case reflect.Map:
		d.decodeMap(n, v, path, line)
	case reflect.Slice:
		if n.Kind != yaml.SequenceNode {
			d.fail(line, path, "expected a list, got "+describe(n))
			return
		}
		s := reflect.MakeSlice(v.Type(), len(n.Content), len(n.Content))
		for i, item := range n.Content {
			p := path + "[" + strconv.Itoa(i) + "]"
			d.lines[p] = item.Line
			d.decode(item, s.Index(i), p)
		}
		v.Set(s)
	case reflect.String:
		if n.Kind != yaml.ScalarNode {
			d.fail(line, path, "expected a string, got "+describe(n))
			return
		}
		v.SetString(n.Value)
	case reflect.Bool:
		// Only true and false (YAML 1.2): yaml.v3 decodes YAML 1.1's on,
		// yes, y and n into a bool even when quoted, so dryRun: "on" made
		// a rule dry-run while dryRun: "true" was refused.
		var b bool
		if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!bool" || n.Decode(&b) != nil {
			msg := "expected true or false, got " + describe(n)
			if n.Style&(yaml.DoubleQuotedStyle|yaml.SingleQuotedStyle) != 0 {
				msg += " (quoted, so a string)"
			}
			d.fail(line, path, msg)
			return
		}
		v.SetBool(b)
	case reflect.Int, reflect.Int64:
		var i int64
		if n.Kind != yaml.ScalarNode || n.Decode(&i) != nil || v.OverflowInt(i) || !integral(n) {
			d.fail(line, path, "expected an integer, got "+describe(n))
			return
		}
		v.SetInt(i)
	case reflect.Float64:
		var f float64
		if n.Kind != yaml.ScalarNode || n.Decode(&f) != nil {
			d.fail(line, path, "expected a number, got "+describe(n))
			return
		}
		v.SetFloat(f)
	default:
		panic("config: no decoder for " + v.Type().String()) // a schema bug, caught by tests
	}
}

// integral reports whether a scalar that decoded as an integer is one:
// yaml.v3 truncates a float into an int, so durationSec: 1.5 was 1 s and
// weight: 0.5 was refused as 0. A float of integral value (1.0, 1e3) is
// its integer.
func integral(n *yaml.Node) bool {
	if n.ShortTag() != "!!float" {
		return true
	}
	// yaml.v3 converts -.inf and floats below -2^63 to an int64 unchecked,
	// which on amd64 gives -2^63: a setting the user never wrote.
	var f float64
	return n.Decode(&f) == nil && f == math.Trunc(f) && f >= math.MinInt64 && f < math.MaxInt64
}

// resolve follows aliases and charges the node budget; nil means stop.
func (d *decoder) resolve(n *yaml.Node, path string) *yaml.Node {
	for n != nil && n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	if n == nil {
		return nil
	}
	if d.aliased == 0 {
		return n
	}
	if !d.charge(1, n.Line, path) {
		return nil
	}
	return n
}

// charge takes k nodes decoded through aliases from the budget, and
// reports whether any was left; the first charge past it is the error.
func (d *decoder) charge(k, line int, path string) bool {
	if d.nodes >= maxAliasNodes {
		return false
	}
	d.nodes += k
	if d.nodes >= maxAliasNodes {
		d.fail(line, path, fmt.Sprintf("aliases expand to over %d values; write the settings out instead", maxAliasNodes))
		return false
	}
	return true
}

type pair struct{ key, value *yaml.Node }

// pairs lists a mapping's entries with merge keys ("<<: *base") expanded;
// explicit keys win over merged ones. Duplicate explicit keys are errors.
func (d *decoder) pairs(n *yaml.Node, path string) []pair {
	var out []pair
	seen := map[string]int{}
	var merged []pair
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, val := n.Content[i], n.Content[i+1]
		if k.Kind != yaml.ScalarNode {
			d.fail(k.Line, path, "expected a key name, got "+describe(k))
			continue
		}
		if k.Tag == "!!merge" {
			merged = append(merged, d.mergePairs(val, path, 0)...)
			continue
		}
		if first, dup := seen[k.Value]; dup {
			d.fail(k.Line, join(path, k.Value), fmt.Sprintf("duplicate key (first at line %d)", first))
			continue
		}
		seen[k.Value] = k.Line
		out = append(out, pair{k, val})
	}
	for _, p := range merged {
		if _, ok := seen[p.key.Value]; !ok {
			seen[p.key.Value] = p.key.Line
			out = append(out, p)
		}
	}
	return out
}

func (d *decoder) mergePairs(n *yaml.Node, path string, depth int) []pair {
	if n != nil && n.Kind == yaml.AliasNode {
		d.aliased++
		defer func() { d.aliased-- }()
	}
	if n = d.resolve(n, path); n == nil {
		return nil
	}
	switch {
	case n.Kind == yaml.MappingNode && depth < 10:
		ps := d.pairs(n, path)
		// Each alias in a merge list brings all of its mapping's pairs:
		// ten thousand aliases of a thousand keys, in 50 KB of file, are
		// ten million pairs to merge. They count like any other node an
		// alias expands to (resolve charged the mapping itself).
		if d.aliased > 0 && !d.charge(len(ps), n.Line, path) {
			return nil
		}
		return ps
	case n.Kind == yaml.SequenceNode && depth == 0:
		var out []pair
		for _, m := range n.Content {
			out = append(out, d.mergePairs(m, path, depth+1)...)
		}
		return out
	}
	d.fail(n.Line, path, "<< can only merge a mapping or a list of mappings")
	return nil
}

func (d *decoder) decodeStruct(n *yaml.Node, v reflect.Value, path string, line int) {
	if n.Kind != yaml.MappingNode {
		d.fail(line, path, "expected a mapping, got "+describe(n))
		return
	}
	fields := d.fields[v.Type()]
	if fields == nil {
		fields = yamlFields(v.Type())
		d.fields[v.Type()] = fields
	}
	for _, p := range d.pairs(n, path) {
		fp := join(path, p.key.Value)
		i, ok := fields[p.key.Value]
		if !ok {
			msg := "unknown field"
			if len(d.errs) < 10*maxErrors {
				// Past the errors kept, a suggestion is never shown: 333,000
				// unknown keys allocated 1.2 GB for them.
				msg += suggest(p.key.Value, fields)
			}
			d.fail(p.key.Line, fp, msg)
			continue
		}
		d.lines[fp] = p.key.Line
		d.decode(p.value, v.FieldByIndex(i), fp)
	}
}

func (d *decoder) decodeMap(n *yaml.Node, v reflect.Value, path string, line int) {
	if n.Kind != yaml.MappingNode {
		d.fail(line, path, "expected a mapping, got "+describe(n))
		return
	}
	if v.IsNil() {
		v.Set(reflect.MakeMap(v.Type()))
	}
	for _, p := range d.pairs(n, path) {
		fp := join(path, p.key.Value)
		d.lines[fp] = p.key.Line
		e := reflect.New(v.Type().Elem()).Elem()
		d.decode(p.value, e, fp)
		v.SetMapIndex(reflect.ValueOf(p.key.Value).Convert(v.Type().Key()), e)
	}
}

// yamlFields maps the yaml names of t's fields to their index paths. The
// fields of an embedded struct tagged `yaml:",inline"` are t's own, at the
// same level of the file (as yaml.v3 reads them), so that one piece of schema
// can sit in several sections.
func yamlFields(t reflect.Type) map[string][]int {
	m := make(map[string][]int, t.NumField())
	for i := range t.NumField() {
		f := t.Field(i)
		name, opts, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if f.Anonymous && name == "" && opts == "inline" && f.Type.Kind() == reflect.Struct {
			for k, sub := range yamlFields(f.Type) {
				m[k] = append([]int{i}, sub...)
			}
			continue
		}
		if name != "" && name != "-" {
			m[name] = []int{i}
		}
	}
	return m
}

// suggest returns `; did you mean "count"?` for a near miss, else "".
func suggest(key string, fields map[string][]int) string {
	best, bestD := "", 3
	for f := range fields {
		dist := editDistance(strings.ToLower(key), strings.ToLower(f))
		if dist < bestD || (dist == bestD && f < best) {
			best, bestD = f, dist
		}
	}
	if best == "" || bestD > 2 || len(key) < 3 {
		return ""
	}
	return "; did you mean " + quote(best) + "?"
}

func editDistance(a, b string) int {
	if len(a) > 64 || len(b) > 64 {
		return 99 // no suggestion for long keys; keeps fuzzing cheap
	}
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// join appends a key to a dotted field path.
func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// describe names what a node holds, for "expected X, got Y" messages.
func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.AliasNode:
		return "an alias"
	}
	// A Redis URL written where a list or a mapping belongs
	// (clusterAddrs: "redis://:pw@host") is quoted without its password.
	return quote(redactURL(n.Value))
}

// quote is strconv.Quote, shortened for long user input.
func quote(s string) string {
	if len(s) > 60 {
		s = s[:60] + "…"
	}
	return strconv.Quote(s)
}
