package admin

import (
	"bytes"
	"cmp"
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
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil || len(doc.Content) != 1 {
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
		for _, n := range lookupAll(doc.Content[0], s.Keys()) {
			if n.Kind != yaml.ScalarNode {
				return "", false // an alias, or a section where a value belongs: cannot mask it exactly
			}
			if with := s.Masked(n.Value); with != n.Value && !slices.ContainsFunc(masks, func(m secret) bool { return m.node == n }) {
				masks = append(masks, secret{n, with})
			}
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
// text is then refused).
func lookupAll(n *yaml.Node, keys []string) []*yaml.Node {
	return lookupDepth(n, keys, 0)
}

// maxAliasDepth bounds the aliases and merges followed on one path.
const maxAliasDepth = 32

func lookupDepth(n *yaml.Node, keys []string, depth int) []*yaml.Node {
	if n == nil || depth > maxAliasDepth {
		return nil
	}
	if len(keys) == 0 {
		return []*yaml.Node{n}
	}
	if n.Kind == yaml.AliasNode {
		return lookupDepth(n.Alias, keys, depth+1)
	}
	if keys[0] == "[]" {
		if n.Kind != yaml.SequenceNode {
			return lookupDepth(n, keys[1:], depth) // a single value where a list belongs: still masked
		}
		var out []*yaml.Node
		for _, e := range n.Content {
			out = append(out, lookupDepth(e, keys[1:], depth)...)
		}
		return out
	}
	var out []*yaml.Node
	for _, v := range mappingValues(n, keys[0], depth) {
		out = append(out, lookupDepth(v, keys[1:], depth)...)
	}
	return out
}

// mappingValues is every value of key k in mapping n: each occurrence of
// the key, and those of the mappings merged into n with "<<".
func mappingValues(n *yaml.Node, k string, depth int) []*yaml.Node {
	for n != nil && n.Kind == yaml.AliasNode && depth <= maxAliasDepth {
		n, depth = n.Alias, depth+1
	}
	if n == nil || n.Kind != yaml.MappingNode || depth > maxAliasDepth {
		return nil
	}
	var out []*yaml.Node
	for i := 0; i+1 < len(n.Content); i += 2 {
		key, v := n.Content[i], n.Content[i+1]
		switch {
		case key.Kind == yaml.ScalarNode && key.ShortTag() == "!!merge":
			src := v
			for src != nil && src.Kind == yaml.AliasNode && depth <= maxAliasDepth {
				src, depth = src.Alias, depth+1
			}
			if src != nil && src.Kind == yaml.SequenceNode {
				for _, e := range src.Content {
					out = append(out, mappingValues(e, k, depth+1)...)
				}
			} else {
				out = append(out, mappingValues(src, k, depth+1)...)
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
