package rulesource

import (
	"bytes"
	"strconv"
	"strings"
)

// A document as `sluice rules pull` prints it ends with one comment line
// naming the version it was pulled at and where from. Pushing the edited
// file back is then a compare-and-set on that version, as kubectl's
// resourceVersion makes a get-edit-replace cycle one: a write another
// operator stored meanwhile is refused, never lost (SPEC §10). The line goes
// last, so every other line keeps the number it has in the stored document,
// which is what error messages name (redis://HOST/DB/KEY:LINE).

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

// SplitPulled finds the line Pulled adds, as the last line of text that is
// not blank. It returns text without that line and what follows it (the
// document to store), and the version and source the line names; ok is
// false, and doc is text, when there is no such line.
func SplitPulled(text []byte) (doc []byte, version int64, source string, ok bool) {
	end := len(bytes.TrimRight(text, " \t\r\n"))
	start := bytes.LastIndexByte(text[:end], '\n') + 1
	line := string(text[start:end])
	rest, found := strings.CutPrefix(line, pulledPrefix)
	if !found {
		return text, 0, "", false
	}
	i := 0
	for i < len(rest) && rest[i] >= '0' && rest[i] <= '9' {
		i++
	}
	v, err := strconv.ParseInt(rest[:i], 10, 64)
	if err != nil || v < 1 {
		return text, 0, "", false
	}
	source, found = strings.CutPrefix(rest[i:], pulledOf)
	if !found {
		return text, 0, "", false
	}
	if s, noted := strings.CutSuffix(source, pulledNote); noted {
		source = s
	}
	if source == "" {
		return text, 0, "", false
	}
	return text[:start], v, source, true
}
