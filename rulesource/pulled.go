package rulesource

import (
	"bytes"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"

	"sluice/config"
)

// A document as `sluice rules pull` prints it ends with one comment line
// naming the version it was pulled at and where from. Pushing the edited
// file back is then a compare-and-set on that version, as kubectl's
// resourceVersion makes a get-edit-replace cycle one: a write another
// operator stored meanwhile is refused, never lost (SPEC §10). The line goes
// last, so every other line keeps the number it has in the stored document,
// which is what error messages name (redis://HOST/DB/KEY:LINE).

// maxPullLines is how many of a document's last pull lines SplitPulled
// reads; Pulled writes one.
const maxPullLines = 8

const (
	pulledPrefix = "# pulled version "
	pulledOf     = " of "
	pulledNote   = " (sluice rules push refuses this file once another version is stored)"
)

// Pulled is d's text followed by the line that names its version and source.
func Pulled(d Doc, source string) []byte {
	out := make([]byte, 0, len(d.Text)+len(pulledPrefix)+len(source)+len(pulledNote)+24)
	out = append(out, d.Text...)
	if len(out) > 0 && out[len(out)-1] != '\n' {
		out = append(out, '\n')
	}
	out = append(out, pulledPrefix...)
	out = strconv.AppendInt(out, d.Version, 10)
	out = append(out, pulledOf...)
	out = append(out, source...)
	out = append(out, pulledNote...)
	return append(out, '\n')
}

// SplitPulled finds the line Pulled adds: the last line of text that is
// one, at the start of a line as Pulled writes it. An edit may have moved
// it: a rule appended after it. Read only as the last line, such a file
// named no version, and its push replaced whatever was stored, a write
// another operator made meanwhile included. An indented one is no pull
// line: it may be a block scalar's text (a blockResponse body quoting one),
// which is the document's; so is one inside a quoted scalar that spans
// lines (see commentLine). It returns the document to
// store, and the version and source the line names; ok is false, and doc is
// text, when there is no such line. In the document every pull line is
// blanked, so the other lines keep their numbers (what error messages
// name) and no pull line is stored, and when the last one ends the text,
// it goes with what follows it.
func SplitPulled(text []byte) (doc []byte, version int64, source string, ok bool) {
	type mark struct {
		start, end int
		version    int64
		source     string
	}
	var found []mark
	for at := 0; at < len(text); {
		end := bytes.IndexByte(text[at:], '\n')
		if end < 0 {
			end = len(text)
		} else {
			end += at
		}
		if v, src, is := pullLine(text[at:end]); is {
			found = append(found, mark{at, end, v, src})
		}
		at = end + 1
	}
	// Each is checked to be a comment (commentLine: a parse of the whole
	// document), the last maxPullLines only: a file of thousands of them
	// took minutes. Earlier ones stay in the document as they are.
	found = found[max(0, len(found)-maxPullLines):]
	var parsed yaml.Node
	// A document config refuses unparsed (too many nodes) is not parsed
	// here either: the push's validation says why.
	over, _ := config.CountNodes(text, config.MaxDocumentNodes)
	whole := !over && yaml.Unmarshal(text, &parsed) == nil
	var marks []mark
	for _, m := range found {
		if !whole || commentLine(&parsed, text, m.start, m.end) {
			marks = append(marks, m)
		}
	}
	if len(marks) == 0 {
		return text, 0, "", false
	}
	version, source = marks[len(marks)-1].version, marks[len(marks)-1].source
	if last := marks[len(marks)-1]; len(bytes.TrimRight(text[last.end:], " \t\r\n")) == 0 {
		text, marks = text[:last.start], marks[:len(marks)-1]
	}
	doc = make([]byte, 0, len(text))
	prev := 0
	for _, m := range marks {
		doc = append(doc, text[prev:m.start]...)
		if m.end > m.start && text[m.end-1] == '\r' {
			doc = append(doc, '\r')
		}
		prev = m.end
	}
	return append(doc, text[prev:]...), version, source, true
}

// commentLine reports whether text[start:end], a line at column 0, is a
// comment: with the line an empty comment ("#"), the document reads the
// same, its comments aside. Inside a multi-line quoted scalar it is the
// scalar's text (yaml.v3 reads body: "slow down / # pulled version 1 of ...
// / please" as one string), and taking it for the pull line pushed on the
// wrong base version and blanked a line of the user's text. The line is
// made "#", not blanked, because a comment ends a block scalar that keeps
// its final newlines (|+) where a blank line would join it; and the two
// reads compare as nodes, not decoded values, where .nan equals nothing.
// A document that does not parse is left to the push's own validation,
// the line taken as written.
func commentLine(with *yaml.Node, text []byte, start, end int) bool {
	var without yaml.Node
	marked := make([]byte, 0, len(text)-(end-start)+1)
	marked = append(append(append(marked, text[:start]...), '#'), text[end:]...)
	return yaml.Unmarshal(marked, &without) == nil && sameNode(with, &without)
}

// sameNode reports whether a and b hold the same YAML, comments and
// positions aside. An alias compares by its anchor's name.
func sameNode(a, b *yaml.Node) bool {
	if a.Kind != b.Kind || a.Style != b.Style || a.Tag != b.Tag || a.Value != b.Value ||
		a.Anchor != b.Anchor || len(a.Content) != len(b.Content) {
		return false
	}
	for i := range a.Content {
		if !sameNode(a.Content[i], b.Content[i]) {
			return false
		}
	}
	return true
}

// pullLine reads one line as Pulled writes it (trailing spaces and a final
// '\r' aside): the version and source it names.
func pullLine(line []byte) (version int64, source string, ok bool) {
	rest, found := strings.CutPrefix(strings.TrimRight(string(line), " \t\r"), pulledPrefix)
	if !found {
		return 0, "", false
	}
	i := 0
	for i < len(rest) && rest[i] >= '0' && rest[i] <= '9' {
		i++
	}
	v, err := strconv.ParseInt(rest[:i], 10, 64)
	if err != nil || v < 1 {
		return 0, "", false
	}
	source, found = strings.CutPrefix(rest[i:], pulledOf)
	if !found {
		return 0, "", false
	}
	if s, noted := strings.CutSuffix(source, pulledNote); noted {
		source = s
	}
	if source == "" {
		return 0, "", false
	}
	return v, source, true
}
