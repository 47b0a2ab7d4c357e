package config

import (
	"strconv"
	"strings"
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
// parts that are unknown.
func (e Error) String() string {
	var b strings.Builder
	b.WriteString(e.File)
	if e.Line > 0 {
		b.WriteByte(':')
		b.WriteString(strconv.Itoa(e.Line))
	}
	if e.Field != "" {
		b.WriteString(": ")
		b.WriteString(e.Field)
	}
	b.WriteString(": ")
	b.WriteString(e.Msg)
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
