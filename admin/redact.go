package admin

import (
	"bytes"
	"net/url"
	"strings"

	"gopkg.in/yaml.v3"
)

// redactSecrets returns the rules file's text with secrets masked, for the
// open read endpoint: admin.token's value, and the password in cluster.redis.
// The ETag is still computed over the real bytes. If a secret cannot be
// located exactly, ok is false and the text must not be served.
func redactSecrets(data []byte) (text string, ok bool) {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil || len(doc.Content) != 1 {
		// Not YAML: a secret could sit anywhere, so serve only what has no token.
		if bytes.Contains(data, []byte("token")) || bytes.Contains(data, []byte("@")) {
			return "", false
		}
		return string(data), true
	}
	lines := splitLines(data)
	var masks []*yaml.Node
	var repl []string
	if n := lookup(doc.Content[0], "admin", "token"); n != nil && n.Value != "" {
		masks, repl = append(masks, n), append(repl, "********")
	}
	if n := lookup(doc.Content[0], "cluster", "redis"); n != nil && strings.Contains(n.Value, "@") {
		masked := "********"
		if u, err := url.Parse(n.Value); err == nil {
			masked = u.Redacted()
		}
		masks, repl = append(masks, n), append(repl, masked)
	}
	for i, n := range masks {
		if n.Kind != yaml.ScalarNode {
			return "", false
		}
		from, to, found := scalarSpan(lines, n)
		if !found {
			return "", false
		}
		l := lines[n.Line-1]
		nl := append(append(append([]byte{}, l[:from]...), quoteYAML(repl[i])...), l[to:]...)
		lines[n.Line-1] = nl
	}
	return string(bytes.Join(lines, nil)), true
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
