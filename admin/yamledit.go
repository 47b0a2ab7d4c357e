package admin

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"reflect"
	"sort"
	"strings"

	"gopkg.in/yaml.v3"
)

// replaceRule returns data with rule index of section changed by edit. When
// the edit only changes existing one-line scalar values (a new count), just
// those values' bytes are replaced. Otherwise only the lines the rule's own
// content occupies are re-encoded by yaml.v3. Either way every other byte of
// the file, comments between and after rules included, is kept as is.
func replaceRule(data []byte, section string, index int, edit ruleEdit) ([]byte, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, &editError{code: http.StatusUnprocessableEntity, msg: "admin: the rules file on disk is not valid YAML", lines: []string{err.Error()}}
	}
	if len(doc.Content) != 1 || doc.Content[0].Kind != yaml.MappingNode {
		return nil, editErr(http.StatusUnprocessableEntity, "admin: the rules file is not a YAML mapping")
	}
	item, nextLine, err := findRule(doc.Content[0], section, index)
	if err != nil {
		return nil, err
	}

	lines := splitLines(data)
	if nextLine == 0 {
		nextLine = len(lines) + 1
	}
	start := item.Line
	indent := item.Column - 1
	prefix := lines[start-1]
	cannot := editErr(http.StatusUnprocessableEntity, "admin: %s[%d] is laid out in a way the editor cannot rewrite in place", section, index)
	if indent > len(prefix) || strings.Trim(string(prefix[:indent]), " -") != "" {
		return nil, cannot
	}
	end, ok := ruleEnd(lines, section, index, item, nextLine)
	if !ok {
		return nil, cannot
	}

	if edit.fields != nil {
		if out, ok := patchScalarsInPlace(lines, item, edit.fields); ok {
			return out, nil
		}
	}
	newItem := edit.replace
	if newItem == nil {
		newItem = item
		changed, err := mergeFields(item, edit.fields)
		if err != nil {
			return nil, err
		}
		if !changed {
			return data, nil
		}
	}
	// Comments above the rule and after its last line stay in the file where
	// they are; encoding them again would duplicate them.
	stripOuterComments(newItem)
	unmarkMerges(newItem)
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(newItem); err != nil {
		return nil, editErr(http.StatusBadRequest, "admin: encoding the rule: %v", err)
	}
	_ = enc.Close()

	var out bytes.Buffer
	for _, l := range lines[:start-1] {
		out.Write(l)
	}
	pad := strings.Repeat(" ", indent)
	// The rule's lines end as the one it replaces began: a CRLF file stays
	// CRLF throughout.
	eol := "\n"
	if bytes.HasSuffix(lines[start-1], []byte("\r\n")) {
		eol = "\r\n"
	}
	for i, l := range strings.Split(strings.TrimRight(buf.String(), "\n"), "\n") {
		switch {
		case i == 0:
			out.Write(prefix[:indent])
		case l != "":
			out.WriteString(pad)
		}
		out.WriteString(l)
		out.WriteString(eol)
	}
	if last := lines[end-1]; !bytes.HasSuffix(last, []byte("\n")) {
		out.Truncate(out.Len() - len(eol)) // the file had no final newline; keep it so
	}
	for _, l := range lines[end:] {
		out.Write(l)
	}
	return out.Bytes(), nil
}

// unmarkMerges has the encoder write merge keys as the file did: yaml.v3
// encodes a "<<" key tagged !!merge as "!!merge <<: *r1", valid YAML but
// not what anyone wrote; untagged, it writes "<<: *r1", still a merge key.
// (Rewriting the encoded text instead also rewrote a block scalar's line
// "!!merge <<: ...", which is the user's text.)
func unmarkMerges(n *yaml.Node) {
	if n.Kind == yaml.MappingNode {
		for i := 0; i+1 < len(n.Content); i += 2 {
			if k := n.Content[i]; k.Tag == "!!merge" {
				k.Tag = ""
			}
		}
	}
	for _, c := range n.Content {
		unmarkMerges(c)
	}
}

// findRule finds section[index] in the rules file's root mapping. next is
// the line the node after it starts on: the section's next rule, else the
// next top-level key; 0 when the rule is the last node of the file.
func findRule(root *yaml.Node, section string, index int) (item *yaml.Node, next int, err error) {
	var seq *yaml.Node
	for i := 0; i+1 < len(root.Content); i += 2 {
		if root.Content[i].Value == section {
			seq = root.Content[i+1]
			if i+2 < len(root.Content) {
				next = root.Content[i+2].Line
			}
			break
		}
	}
	if seq == nil || seq.Kind != yaml.SequenceNode || index >= len(seq.Content) {
		return nil, 0, editErr(http.StatusNotFound, "admin: the rules file has no %s[%d]", section, index)
	}
	item = seq.Content[index]
	if item.Kind != yaml.MappingNode {
		return nil, 0, editErr(http.StatusUnprocessableEntity, "admin: %s[%d] is not a mapping", section, index)
	}
	if index+1 < len(seq.Content) {
		next = seq.Content[index+1].Line
	}
	return item, next, nil
}

// ruleEnd is the last line of the rule's own text, which the edit replaces.
// yaml.v3 tells where a node starts, not where it ends, and a multi-line
// value (a block scalar whose body has blank or '#' lines, a flow list over
// several lines) runs on below the line its node starts on. Guessing the end
// from how lines look gets block scalars wrong, so the parser decides: the
// end is the first line at which the file cut after it already holds the
// whole rule. The blank and comment lines between that line and the next
// node (next) are the file's, and stay. It reports false if even the text up
// to the next node does not hold the rule.
func ruleEnd(lines [][]byte, section string, index int, item *yaml.Node, next int) (int, bool) {
	var want any
	if err := item.Decode(&want); err != nil {
		return 0, false
	}
	want = canon(want)
	holds := func(end int) bool {
		var doc yaml.Node
		if yaml.Unmarshal(bytes.Join(lines[:end], nil), &doc) != nil || len(doc.Content) != 1 {
			return false
		}
		n, _, err := findRule(doc.Content[0], section, index)
		var got any
		return err == nil && n.Decode(&got) == nil && reflect.DeepEqual(canon(got), want)
	}
	lo, hi := lastLine(item), min(next-1, len(lines))
	if hi < lo || !holds(hi) {
		return 0, false
	}
	// A cut inside the rule loses part of it and a cut after it does not, so
	// the first line that holds it can be bisected: a few parses, not one a line.
	for lo < hi {
		mid := (lo + hi) / 2
		if holds(mid) {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	return lo, true
}

// patchScalarsInPlace applies fields to a block-style rule by rewriting only
// the text of the values that change, so spacing, quoting of untouched values
// and every comment stay. It reports false, leaving the work to the general
// path, unless every changed field is an existing one-line scalar whose source
// text it can find exactly and whose new value is a scalar too.
func patchScalarsInPlace(lines [][]byte, rule *yaml.Node, fields map[string]any) ([]byte, bool) {
	if rule.Style&yaml.FlowStyle != 0 {
		return nil, false
	}
	type splice struct {
		line, from, to int // 1-based line, byte range in it
		text           string
	}
	var splices []splice
	for k, v := range fields {
		at := -1
		for i := 0; i+1 < len(rule.Content); i += 2 {
			if rule.Content[i].Value == k {
				at = i
				break
			}
		}
		if at < 0 || v == nil {
			return nil, false // a new or removed field changes the rule's shape
		}
		old := rule.Content[at+1]
		var oldV any
		if old.Kind != yaml.ScalarNode || old.Decode(&oldV) != nil {
			return nil, false
		}
		if reflect.DeepEqual(canon(oldV), canon(v)) {
			continue
		}
		switch v.(type) {
		case string, bool, int64, float64:
		default:
			return nil, false
		}
		from, to, ok := scalarSpan(lines, old)
		if !ok {
			return nil, false
		}
		enc, err := yaml.Marshal(v)
		if err != nil || bytes.Count(enc, []byte("\n")) != 1 {
			return nil, false // a value yaml.v3 writes on several lines
		}
		splices = append(splices, splice{old.Line, from, to, strings.TrimSuffix(string(enc), "\n")})
	}
	sort.Slice(splices, func(i, j int) bool { // back to front keeps offsets valid
		if splices[i].line != splices[j].line {
			return splices[i].line > splices[j].line
		}
		return splices[i].from > splices[j].from
	})
	out := make([][]byte, len(lines))
	copy(out, lines)
	for _, s := range splices {
		l := out[s.line-1]
		nl := make([]byte, 0, len(l)+len(s.text))
		nl = append(append(append(nl, l[:s.from]...), s.text...), l[s.to:]...)
		out[s.line-1] = nl
	}
	return bytes.Join(out, nil), true
}

// scalarSpan finds the bytes of a one-line scalar's source text on its line
// and checks that they decode to the node's value.
func scalarSpan(lines [][]byte, n *yaml.Node) (int, int, bool) {
	if n.Line < 1 || n.Line > len(lines) || n.Style&(yaml.LiteralStyle|yaml.FoldedStyle) != 0 {
		return 0, 0, false
	}
	line := bytes.TrimRight(lines[n.Line-1], "\r\n")
	from := n.Column - 1
	if from < 0 || from >= len(line) {
		return 0, 0, false
	}
	// The node starts at its properties (&anchor, !tag); they stay in the
	// file, since an alias elsewhere may name the anchor.
	for from < len(line) && (line[from] == '&' || line[from] == '!') {
		for from < len(line) && line[from] != ' ' && line[from] != '\t' {
			from++
		}
		for from < len(line) && (line[from] == ' ' || line[from] == '\t') {
			from++
		}
	}
	if from >= len(line) {
		return 0, 0, false
	}
	to := len(line)
	switch line[from] {
	case '"', '\'':
		q := line[from]
		to = -1
		for i := from + 1; i < len(line); i++ {
			if q == '"' && line[i] == '\\' {
				i++
				continue
			}
			if line[i] == q {
				if q == '\'' && i+1 < len(line) && line[i+1] == '\'' {
					i++
					continue
				}
				to = i + 1
				break
			}
		}
		if to < 0 {
			return 0, 0, false
		}
	default:
		if i := bytes.Index(line[from:], []byte(" #")); i >= 0 {
			to = from + i
		}
		to = from + len(bytes.TrimRight(line[from:to], " \t"))
	}
	var got string
	if err := yaml.Unmarshal(line[from:to], &got); err != nil || got != n.Value {
		// A plain scalar in a flow list or mapping ends at the first flow
		// indicator, which in block context it may hold.
		i := bytes.IndexAny(line[from:to], ",]}")
		if line[from] == '"' || line[from] == '\'' || i < 0 {
			return 0, 0, false
		}
		to = from + len(bytes.TrimRight(line[from:from+i], " \t"))
		got = ""
		if err := yaml.Unmarshal(line[from:to], &got); err != nil || got != n.Value {
			return 0, 0, false
		}
	}
	return from, to, true
}

// splitLines splits data after each '\n', keeping the terminators.
func splitLines(data []byte) [][]byte {
	var lines [][]byte
	for len(data) > 0 {
		i := bytes.IndexByte(data, '\n')
		if i < 0 {
			lines = append(lines, data)
			break
		}
		lines = append(lines, data[:i+1])
		data = data[i+1:]
	}
	return lines
}

// lastLine is the last line any node under n starts on.
func lastLine(n *yaml.Node) int {
	last := n.Line
	for _, c := range n.Content {
		if l := lastLine(c); l > last {
			last = l
		}
	}
	return last
}

// stripOuterComments drops the comments yaml.v3 attaches above a rule and
// below its last value, which lie outside the lines being replaced.
func stripOuterComments(n *yaml.Node) {
	n.HeadComment = ""
	if len(n.Content) > 0 {
		n.Content[0].HeadComment = ""
	}
	// The trailing comment may hang on the last value or on its key.
	for c := n; c != nil; {
		c.FootComment = ""
		k := len(c.Content)
		if k == 0 {
			break
		}
		if c.Kind == yaml.MappingNode && k >= 2 {
			c.Content[k-2].FootComment = ""
		}
		c = c.Content[k-1]
	}
}

// decodeJSONObject decodes a JSON object keeping numbers exact.
func decodeJSONObject(body []byte) (map[string]any, error) {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var fields map[string]any
	if err := dec.Decode(&fields); err != nil {
		return nil, fmt.Errorf("admin: rule JSON: %w", err)
	}
	if fields == nil {
		return nil, errors.New("admin: rule JSON must be an object of rule fields")
	}
	if dec.More() {
		return nil, errors.New("admin: rule JSON: trailing data after the object")
	}
	return fields, nil
}

// mergeFields merges fields into the mapping m as an RFC 7396 merge patch:
// null removes a key, an object merges into a mapping key by key, and any
// other value replaces the old one (nulls inside it dropped). A value equal
// to the one in the file keeps its node, so untouched fields keep their
// spelling ("100.0", quotes) and comments. It reports whether m changed.
func mergeFields(m *yaml.Node, fields map[string]any) (bool, error) {
	keys := make([]string, 0, len(fields))
	for k := range fields {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	changed := false
	for _, k := range keys {
		v := fields[k]
		at := -1
		for i := 0; i+1 < len(m.Content); i += 2 {
			if m.Content[i].Value == k {
				at = i
				break
			}
		}
		if v == nil {
			if at >= 0 {
				m.Content = append(m.Content[:at], m.Content[at+2:]...)
				changed = true
			}
			continue
		}
		if at >= 0 {
			old := m.Content[at+1]
			if patch, ok := v.(map[string]any); ok && old.Kind == yaml.MappingNode {
				c, err := mergeFields(old, patch)
				if err != nil {
					return false, err
				}
				changed = changed || c
				continue
			}
			var oldV any
			if err := old.Decode(&oldV); err == nil && reflect.DeepEqual(canon(oldV), canon(v)) {
				continue
			}
		}
		var nv yaml.Node
		if err := nv.Encode(withoutNulls(v)); err != nil {
			return false, editErr(http.StatusBadRequest, "admin: field %s: %v", k, err)
		}
		changed = true
		if at < 0 {
			m.Content = append(m.Content, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: k}, &nv)
			continue
		}
		old := m.Content[at+1]
		nv.HeadComment, nv.LineComment, nv.FootComment = old.HeadComment, old.LineComment, old.FootComment
		if old.Kind == yaml.MappingNode || old.Kind == yaml.SequenceNode {
			nv.Style |= old.Style & yaml.FlowStyle
		}
		// Like the in-place path (scalarSpan), keep the value's anchor, which
		// an alias elsewhere may name, and an explicit tag.
		nv.Anchor = old.Anchor
		if old.Style&yaml.TaggedStyle != 0 && old.Kind == nv.Kind {
			nv.Tag = old.Tag
			nv.Style |= yaml.TaggedStyle
		}
		m.Content[at+1] = &nv
	}
	return changed, nil
}

// withoutNulls is v with the null members of its objects, at any depth of
// objects, removed: what RFC 7396 makes of a patch value that has nothing to
// merge into. Arrays are values, kept as they are.
func withoutNulls(v any) any {
	obj, ok := v.(map[string]any)
	if !ok {
		return v
	}
	out := make(map[string]any, len(obj))
	for k, e := range obj {
		if e != nil {
			out[k] = withoutNulls(e)
		}
	}
	return out
}

// plain turns decoded JSON into values yaml.v3 encodes naturally: whole
// numbers as integers, others as floats.
func plain(v any) any {
	switch t := v.(type) {
	case json.Number:
		if i, err := t.Int64(); err == nil {
			return i
		}
		f, _ := t.Float64()
		return f
	case map[string]any:
		m := make(map[string]any, len(t))
		for k, e := range t {
			m[k] = plain(e)
		}
		return m
	case []any:
		s := make([]any, len(t))
		for i, e := range t {
			s[i] = plain(e)
		}
		return s
	}
	return v
}

// canon makes numbers comparable across YAML's and JSON's decodings.
func canon(v any) any {
	switch t := v.(type) {
	case int:
		return float64(t)
	case int64:
		return float64(t)
	case uint64:
		return float64(t)
	case float64:
		if math.IsNaN(t) {
			return "NaN"
		}
		return t
	case map[string]any:
		m := make(map[string]any, len(t))
		for k, e := range t {
			m[k] = canon(e)
		}
		return m
	case []any:
		s := make([]any, len(t))
		for i, e := range t {
			s[i] = canon(e)
		}
		return s
	}
	return v
}
