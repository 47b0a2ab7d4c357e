package config

import (
	"bytes"
	"errors"
	"mime"
	"strings"
	"text/template"
	"text/template/parse"
)

// BlockData is what blockResponse.body is executed with.
type BlockData struct {
	Resource string // the blocked resource
	Reason   string // flow, param, degrade, system or authority
}

// BlockBody is blockResponse.body parsed once, to be rendered for each
// resource and reason. A body made only of text, {{.Resource}} and
// {{.Reason}} (the default one) is rendered by joining its parts, the same
// bytes text/template writes at a fraction of the cost: a document of
// 10,000 routes renders 60,000 bodies when it is checked and again when it
// is built.
type BlockBody struct {
	tmpl   *template.Template
	parts  []bodyPart
	simple bool
	// json: the body is sent as JSON (contentType application/json or a
	// +json type), so the values are written as JSON string content. A
	// resource is its route's path pattern unless named, and a pattern's
	// regex ({id:\d+}) or a name's quote made the default body invalid
	// JSON for a client that parses it.
	json bool
}

// bodyPart is text, or the field of BlockData it names.
type bodyPart struct {
	text  string
	field string // "Resource", "Reason"; "" for text
}

// BlockBody parses blockResponse.body. For a Config returned by Load it
// never fails: the body was checked then.
func (b BlockResponse) BlockBody() (*BlockBody, error) {
	bb, err := parseBlockBody(b.Body)
	if err != nil {
		return nil, err
	}
	bb.json = isJSON(b.ContentType)
	return bb, nil
}

// isJSON reports whether media type ct is JSON: application/json or a
// structured syntax suffix +json (application/problem+json).
func isJSON(ct string) bool {
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil {
		return false
	}
	return mt == "application/json" || strings.HasSuffix(mt, "+json")
}

func parseBlockBody(body string) (*BlockBody, error) {
	t, err := template.New("body").Parse(body)
	if err != nil {
		return nil, err
	}
	bb := &BlockBody{tmpl: t}
	bb.parts, bb.simple = simpleParts(t)
	return bb, nil
}

// simpleParts splits t into text and single-field actions, if that is all
// it holds.
func simpleParts(t *template.Template) ([]bodyPart, bool) {
	if t.Tree == nil || t.Tree.Root == nil {
		return nil, false
	}
	var parts []bodyPart
	for _, n := range t.Tree.Root.Nodes {
		switch n := n.(type) {
		case *parse.TextNode:
			parts = append(parts, bodyPart{text: string(n.Text)})
		case *parse.ActionNode:
			p := n.Pipe
			if p == nil || len(p.Decl) != 0 || len(p.Cmds) != 1 || len(p.Cmds[0].Args) != 1 {
				return nil, false
			}
			f, ok := p.Cmds[0].Args[0].(*parse.FieldNode)
			if !ok || len(f.Ident) != 1 || (f.Ident[0] != "Resource" && f.Ident[0] != "Reason") {
				return nil, false
			}
			parts = append(parts, bodyPart{field: f.Ident[0]})
		default:
			return nil, false
		}
	}
	return parts, true
}

// Render returns the body for d.
func (b *BlockBody) Render(d BlockData) ([]byte, error) {
	if b.json {
		d.Resource, d.Reason = jsonText(d.Resource), jsonText(d.Reason)
	}
	if !b.simple {
		var buf bytes.Buffer
		if err := b.tmpl.Execute(&buf, d); err != nil {
			return nil, err
		}
		return buf.Bytes(), nil
	}
	out := make([]byte, 0, b.size(d))
	for _, p := range b.parts {
		switch p.field {
		case "Resource":
			out = append(out, d.Resource...)
		case "Reason":
			out = append(out, d.Reason...)
		default:
			out = append(out, p.text...)
		}
	}
	return out, nil
}

// size is the length of a simple body rendered for d.
func (b *BlockBody) size(d BlockData) int {
	n := 0
	for _, p := range b.parts {
		switch p.field {
		case "Resource":
			n += len(d.Resource)
		case "Reason":
			n += len(d.Reason)
		default:
			n += len(p.text)
		}
	}
	return n
}

// maxBodyBytes bounds what the sample execution may render.
const maxBodyBytes = 64 << 10

// checkBodyTemplate returns a message when body is not a valid template over
// BlockData, does something a block response has no business doing (loops,
// calling other templates), or fails or grows huge when rendered. It renders
// the body as the gateway will when it is built: for every resource (in
// route order) and every reason, since a template may fail on some values
// only ({{slice .Resource 5}} on "/a"). Without resources (the routes are
// invalid) it renders a sample.
func checkBodyTemplate(body string, resources []string) string {
	bb, err := parseBlockBody(body)
	if err != nil {
		return "invalid template: " + strings.TrimPrefix(err.Error(), "template: ")
	}
	t := bb.tmpl
	if t.Tree != nil {
		if msg := checkTemplateNode(t.Tree.Root); msg != "" {
			return msg
		}
	}
	if len(resources) == 0 {
		resources = []string{"sample-resource"}
	}
	for _, res := range resources {
		if bb.simple {
			// It cannot fail; only its size depends on the values.
			for _, reason := range blockReasons {
				if bb.size(BlockData{Resource: res, Reason: reason}) > maxBodyBytes {
					return "template renders more than 64 KiB for resource " + quote(res)
				}
			}
			continue
		}
		for _, reason := range blockReasons {
			w := &limitedWriter{left: maxBodyBytes}
			if err := t.Execute(w, BlockData{Resource: res, Reason: reason}); err != nil {
				if errors.Is(err, errBodyTooLarge) {
					return "template renders more than 64 KiB for resource " + quote(res)
				}
				return "template fails for resource " + quote(res) + " and reason " + quote(reason) + ": " +
					strings.TrimPrefix(err.Error(), "template: ")
			}
		}
	}
	return ""
}

const onlyFields = "; only {{.Resource}} and {{.Reason}} are available"

func checkTemplateNode(n parse.Node) string {
	switch n := n.(type) {
	case *parse.ListNode:
		if n == nil {
			return ""
		}
		for _, c := range n.Nodes {
			if msg := checkTemplateNode(c); msg != "" {
				return msg
			}
		}
	case *parse.ActionNode:
		return checkTemplateNode(n.Pipe)
	case *parse.IfNode:
		return checkBranch(&n.BranchNode)
	case *parse.WithNode:
		return checkBranch(&n.BranchNode)
	case *parse.RangeNode:
		return "template uses {{range}}, which a block response does not need" + onlyFields
	case *parse.TemplateNode:
		return "template uses {{template}}, which a block response does not need" + onlyFields
	case *parse.PipeNode:
		if n == nil {
			return ""
		}
		for _, cmd := range n.Cmds {
			for _, a := range cmd.Args {
				if msg := checkTemplateNode(a); msg != "" {
					return msg
				}
			}
		}
	case *parse.FieldNode:
		return checkFields(n.Ident)
	case *parse.VariableNode:
		if len(n.Ident) > 1 && n.Ident[0] == "$" {
			return checkFields(n.Ident[1:])
		}
	case *parse.ChainNode:
		return checkTemplateNode(n.Node)
	}
	return ""
}

func checkBranch(b *parse.BranchNode) string {
	for _, n := range []parse.Node{b.Pipe, b.List, b.ElseList} {
		if msg := checkTemplateNode(n); msg != "" {
			return msg
		}
	}
	return ""
}

func checkFields(ident []string) string {
	if len(ident) != 1 || (ident[0] != "Resource" && ident[0] != "Reason") {
		return "template uses {{." + strings.Join(ident, ".") + "}}" + onlyFields
	}
	return ""
}

var errBodyTooLarge = errors.New("config: block body too large")

type limitedWriter struct{ left int }

func (w *limitedWriter) Write(p []byte) (int, error) {
	if len(p) > w.left {
		w.left = 0
		return 0, errBodyTooLarge
	}
	w.left -= len(p)
	return len(p), nil
}

// jsonText is s as the content of a JSON string: quote, backslash and
// control characters escaped (RFC 8259 §7), the rest as it is.
func jsonText(s string) string {
	const hex = "0123456789abcdef"
	i := strings.IndexFunc(s, func(r rune) bool { return r < 0x20 || r == '"' || r == '\\' })
	if i < 0 {
		return s
	}
	out := make([]byte, 0, len(s)+8)
	out = append(out, s[:i]...)
	for j := i; j < len(s); j++ {
		switch c := s[j]; {
		case c == '"' || c == '\\':
			out = append(out, '\\', c)
		case c < 0x20:
			out = append(out, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
		default:
			out = append(out, c)
		}
	}
	return string(out)
}
