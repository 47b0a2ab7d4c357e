package config

import (
	"errors"
	"strings"
	"text/template"
	"text/template/parse"
)

// BlockData is what blockResponse.body is executed with.
type BlockData struct {
	Resource string // the blocked resource
	Reason   string // flow, param, degrade or system
}

// BodyTemplate parses blockResponse.body. For a Config returned by Load it
// never fails: the body was checked then.
func (b BlockResponse) BodyTemplate() (*template.Template, error) {
	return template.New("body").Parse(b.Body)
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
	t, err := template.New("body").Parse(body)
	if err != nil {
		return "invalid template: " + strings.TrimPrefix(err.Error(), "template: ")
	}
	if t.Tree != nil {
		if msg := checkTemplateNode(t.Tree.Root); msg != "" {
			return msg
		}
	}
	if len(resources) == 0 {
		resources = []string{"sample-resource"}
	}
	for _, res := range resources {
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
