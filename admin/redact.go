package admin

import (
	"bytes"
	"cmp"
	"net/url"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"
)

// redactSecrets returns the rules file's text with secrets masked, for the
// open read endpoint: admin.token's value, and the passwords of the Redis
// that cluster and rulesSource name (see redisSecrets). The ETag is still computed over the
// real bytes. If a secret cannot be located exactly, ok is false and the
// text must not be served.
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
	if n := lookup(doc.Content[0], "admin", "token"); n != nil && n.Value != "" {
		masks = append(masks, secret{n, "********"})
	}
	masks = append(masks, redisSecrets(lookup(doc.Content[0], "cluster"))...)
	masks = append(masks, redisSecrets(lookup(doc.Content[0], "rulesSource"))...)
	// Right to left, bottom up: a mask changes the columns after it on its
	// line, and a flow list holds several on one line.
	slices.SortFunc(masks, func(a, b secret) int {
		return cmp.Or(b.node.Line-a.node.Line, b.node.Column-a.node.Column)
	})
	for _, m := range masks {
		n := m.node
		if n.Kind != yaml.ScalarNode {
			return "", false
		}
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

// redisSecrets finds the passwords in a section that names a Redis (see
// config.RedisTarget): a URL's in redis and in clusterAddrs, and sentinel's
// password and sentinelPassword. section may be nil.
func redisSecrets(section *yaml.Node) []secret {
	var out []secret
	inURL := func(n *yaml.Node) {
		if n != nil && strings.Contains(n.Value, "@") {
			masked := "********"
			if u, err := url.Parse(n.Value); err == nil {
				masked = u.Redacted()
			}
			out = append(out, secret{n, masked})
		}
	}
	inURL(lookup(section, "redis"))
	if list := lookup(section, "clusterAddrs"); list != nil && list.Kind == yaml.SequenceNode {
		for _, n := range list.Content {
			inURL(n)
		}
	}
	for _, k := range []string{"password", "sentinelPassword"} {
		if n := lookup(section, "sentinel", k); n != nil && n.Value != "" {
			out = append(out, secret{n, "********"})
		}
	}
	return out
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
