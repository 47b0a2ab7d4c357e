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
			if with := s.Masked(n.Value); with != n.Value {
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
// every element of a list; it returns the nodes found.
func lookupAll(n *yaml.Node, keys []string) []*yaml.Node {
	if n == nil {
		return nil
	}
	if len(keys) == 0 {
		return []*yaml.Node{n}
	}
	if keys[0] == "[]" {
		if n.Kind != yaml.SequenceNode {
			return lookupAll(n, keys[1:]) // a single value where a list belongs: still masked
		}
		var out []*yaml.Node
		for _, e := range n.Content {
			out = append(out, lookupAll(e, keys[1:])...)
		}
		return out
	}
	return lookupAll(lookup(n, keys[0]), keys[1:])
}

// lookup follows mapping keys from n.
func lookup(n *yaml.Node, keys ...string) *yaml.Node {
	for _, k := range keys {
		if n == nil || n.Kind != yaml.MappingNode {
			return nil
		}
		var next *yaml.Node
		for i := 0; i+1 < len(n.Content); i += 2 {
			if n.Content[i].Value == k {
				next = n.Content[i+1]
			}
		}
		n = next
	}
	return n
}

func quoteYAML(s string) string {
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(s) + `"`
}
