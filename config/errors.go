package config

import (
	"strconv"
	"strings"
	"unicode"
)

// Error is one problem found in a rules file. Line is 1-based; 0 means the
// problem concerns the whole file (missing, a directory, too large). Field is
// the dotted path of the offending setting ("flowRules[0].count"), or "" when
// the problem is not about one field (invalid YAML, an empty file).
type Error struct {
	File  string
	Line  int
	Field string
	Msg   string
}

// String formats e as "FILE:LINE: path.to.field: message", leaving out the
// parts that are unknown. It is always one line: a field path holding a
// control character (a quoted YAML key "bad\nkey") is written quoted, Go
// style, and one in the file name or message escaped, because `sluice
// validate`, the log and the editor's 422 take each line for one problem.
func (e Error) String() string {
	var b strings.Builder
	b.WriteString(escapeControl(e.File))
	if e.Line > 0 {
		b.WriteByte(':')
		b.WriteString(strconv.Itoa(e.Line))
	}
	if e.Field != "" {
		b.WriteString(": ")
		if strings.ContainsFunc(e.Field, unicode.IsControl) {
			b.WriteString(strconv.Quote(e.Field))
		} else {
			b.WriteString(e.Field)
		}
	}
	b.WriteString(": ")
	b.WriteString(escapeControl(e.Msg))
	return b.String()
}

// escapeControl writes each control character of s as its Go escape
// ("\n", "\t", "\x00"), leaving the rest as it is.
func escapeControl(s string) string {
	if !strings.ContainsFunc(s, unicode.IsControl) {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		if unicode.IsControl(r) {
			q := strconv.QuoteRune(r)
			b.WriteString(q[1 : len(q)-1])
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

// Errors is every problem found in one rules file, ordered by line. Load and
// Parse return a non-empty Errors (never an empty one) as their error.
type Errors []Error

// Error returns one problem per line, each formatted by Error.String.
func (es Errors) Error() string {
	var b strings.Builder
	for i, e := range es {
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(e.String())
	}
	return b.String()
}
