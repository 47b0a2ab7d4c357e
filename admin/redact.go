package admin

import (
	"bytes"
	"cmp"
	"io"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"

	"sluice/config"
)

// redactSecrets returns the rules file's text with every secret that
// config.Secrets lists masked as config masks it, for the open read
// endpoint. The ETag is still computed over the real bytes. If a secret
// cannot be located exactly, ok is false and the text must not be served.
func redactSecrets(data []byte) (text string, ok bool) {
	// One document only: config refuses a second, and a secret in it
	// would be served as it is.
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc, extra yaml.Node
	if err := dec.Decode(&doc); err != nil || len(doc.Content) != 1 || dec.Decode(&extra) != io.EOF {
		// Not YAML: a secret could sit anywhere, so serve only what has no token.
		if bytes.Contains(data, []byte("token")) || bytes.Contains(data, []byte("@")) ||
			bytes.Contains(data, []byte("assword")) {
			return "", false
		}
		return string(data), true
	}
	lines := splitLines(data)
	var masks []secret
	for _, s := range config.Secrets() {
		nodes, found := lookupAll(doc.Content[0], s.Keys())
		if !found {
			return "", false // past the alias bound: a secret could lie there
		}
		for _, n := range nodes {
			if n.Kind != yaml.ScalarNode {
				return "", false // an alias, or a section where a value belongs: cannot mask it exactly
			}
			if with := s.Masked(n.Value); with != n.Value && !slices.ContainsFunc(masks, func(m secret) bool { return m.node == n }) {
				masks = append(masks, secret{n, with})
			}
		}
	}
	// A Redis URL anywhere else (cluster: "redis://:pw@h", a URL where
	// its section belongs, which config refuses) shows no password either.
	for _, n := range urlScalars(doc.Content[0], nil, map[*yaml.Node]bool{}) {
		if with := (config.Secret{URL: true}).Masked(n.Value); with != n.Value && !slices.ContainsFunc(masks, func(m secret) bool { return m.node == n }) {
			masks = append(masks, secret{n, with})
		}
	}
	// Right to left, bottom up: a mask changes the columns after it on its
	// line, and a flow list holds several on one line.
	slices.SortFunc(masks, func(a, b secret) int {
		return cmp.Or(b.node.Line-a.node.Line, b.node.Column-a.node.Column)
	})
	for _, m := range masks {
		n := m.node
		from, to, found := scalarSpan(lines, n)
		if !found {
			return "", false
		}
		l := lines[n.Line-1]
		nl := append(append(append([]byte{}, l[:from]...), quoteYAML(m.with)...), l[to:]...)
		lines[n.Line-1] = nl
	}
	return string(bytes.Join(lines, nil)), true
}

// urlScalars appends the scalars under n (aliases not followed: their
// anchors are walked where they stand) that may hold a Redis password: a
// URL with a userinfo or a query ("://" and "@" or "?"), or an address
// with a userinfo ("user:pw@host:port", without white space).
func urlScalars(n *yaml.Node, out []*yaml.Node, seen map[*yaml.Node]bool) []*yaml.Node {
	if n == nil || seen[n] {
		return out
	}
	seen[n] = true
	if n.Kind == yaml.ScalarNode {
		v := n.Value
		url := strings.Contains(v, "://") && strings.ContainsAny(v, "@?")
		addr := !strings.Contains(v, "://") && strings.Contains(v, "@") && !strings.ContainsAny(v, " \t\n")
		if url || addr {
			out = append(out, n)
		}
		return out
	}
	for _, c := range n.Content {
		out = urlScalars(c, out, seen)
	}
	return out
}

// secret is a scalar to mask and what to show instead.
type secret struct {
	node *yaml.Node
	with string
}

// lookupAll follows the keys of a config.Secret's path from n, "[]" into
// every element of a list; it returns the nodes found. It follows the
// document as the config decoder reads it: through aliases to their anchor,
// into merged mappings ("<<: *base", "<<: {token: x}") and to every value
// of a repeated key, so that no secret the decoder could take stays
// unmasked. A secret that is itself an alias is returned as such (and the
// text is then refused). ok is false when the walk went deeper than
// maxAliasDepth aliases and merges: a secret could lie past it, so the text
// must be refused. Each node is walked once per remaining path, so merges
// that merge the same mappings many times cost no more than the document.
func lookupAll(n *yaml.Node, keys []string) (nodes []*yaml.Node, ok bool) {
	w := walk{seen: map[walkKey]bool{}}
	nodes = w.lookup(n, keys, 0)
	return nodes, !w.over
}

// maxAliasDepth bounds the aliases and merges followed on one path.
const maxAliasDepth = 32

// walk is one lookupAll's state: the (node, rest of the path) pairs
// already walked, and whether the depth bound cut the walk.
type walk struct {
	seen map[walkKey]bool
	over bool
}

type walkKey struct {
	n    *yaml.Node
	rest int    // keys left (lookup)
	key  string // the key looked for (values)
}

func (w *walk) lookup(n *yaml.Node, keys []string, depth int) []*yaml.Node {
	if n == nil {
		return nil
	}
	if depth > maxAliasDepth {
		w.over = true
		return nil
	}
	if len(keys) == 0 {
		return []*yaml.Node{n}
	}
	k := walkKey{n: n, rest: len(keys)}
	if w.seen[k] {
		return nil // walked already: what it holds is found
	}
	w.seen[k] = true
	if n.Kind == yaml.AliasNode {
		return w.lookup(n.Alias, keys, depth+1)
	}
	if keys[0] == "[]" {
		if n.Kind != yaml.SequenceNode {
			return w.lookup(n, keys[1:], depth) // a single value where a list belongs: still masked
		}
		var out []*yaml.Node
		for _, e := range n.Content {
			out = append(out, w.lookup(e, keys[1:], depth)...)
		}
		return out
	}
	var out []*yaml.Node
	for _, v := range w.values(n, keys[0], depth) {
		out = append(out, w.lookup(v, keys[1:], depth)...)
	}
	return out
}

// values is every value of key k in mapping n: each occurrence of the
// key, and those of the mappings merged into n with "<<".
func (w *walk) values(n *yaml.Node, k string, depth int) []*yaml.Node {
	n, depth = deref(n, depth)
	if depth > maxAliasDepth {
		w.over = true
		return nil
	}
	if n == nil || n.Kind != yaml.MappingNode {
		return nil
	}
	wk := walkKey{n: n, key: k, rest: -1}
	if w.seen[wk] {
		return nil
	}
	w.seen[wk] = true
	var out []*yaml.Node
	for i := 0; i+1 < len(n.Content); i += 2 {
		key, v := n.Content[i], n.Content[i+1]
		switch {
		case key.Kind == yaml.ScalarNode && key.ShortTag() == "!!merge":
			src, d := deref(v, depth)
			if src != nil && src.Kind == yaml.SequenceNode {
				for _, e := range src.Content {
					out = append(out, w.values(e, k, d+1)...)
				}
			} else {
				out = append(out, w.values(src, k, d+1)...)
			}
		case key.Value == k:
			out = append(out, v)
		}
	}
	return out
}

func quoteYAML(s string) string {
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(s) + `"`
}

// deref follows n's aliases to the node they name, counting each in depth
// up to one past maxAliasDepth.
func deref(n *yaml.Node, depth int) (*yaml.Node, int) {
	for n != nil && n.Kind == yaml.AliasNode && depth <= maxAliasDepth {
		n, depth = n.Alias, depth+1
	}
	return n, depth
}
