package config

import (
	"bytes"
	"fmt"
)

// MaxDocumentNodes bounds the YAML nodes of a rules document (keys, values,
// list items, mappings, lists), as countNodes counts them before yaml.v3
// reads a byte. MaxDocumentBytes alone does not bound memory: yaml.v3
// builds its whole node tree, about 250 bytes a node, before config sees
// any of it, and 8 MiB of "1," are 4 million nodes (a gigabyte of heap, to
// be refused as an unknown field). The count is a generous one (about 1.5
// times the nodes of a real file, and at least the nodes of any): a route
// with a flow rule and a param rule counts 33 (manyRoutes in
// load_bench_test.go), so the 10,000 routes a gateway is sized for (SPEC
// §3 Reload) count 330,000; a route with hosts, four rules and param
// items counts about 100 (richRoutes), and 9,800 of those fit. One million
// leaves that room and bounds what yaml.v3 and the decoder build for any
// document to a million nodes: about 330 MB of heap at the worst shape
// (unknown keys), 110 MB for one flow list.
const MaxDocumentNodes = 1_000_000

// tooManyNodes is the message for a document that countNodes puts over
// MaxDocumentNodes by the line the message is told at; what names the
// document ("file", "rules document").
func tooManyNodes(what string) string {
	return fmt.Sprintf("the %s passes the limit of 1,000,000 YAML nodes by this line (keys, values and list items, counted before parsing), so it was not parsed; 10,000 routes with their rules hold about 330,000", what)
}

// CountNodes reports whether data holds more than limit YAML nodes, as
// Parse counts them before it parses a document, and if so the 1-based line
// on which the count passed limit. It reads data once and allocates
// nothing, for a caller that must bound a YAML or JSON input (the admin
// editor's edit) before decoding it.
func CountNodes(data []byte, limit int) (over bool, line int) {
	n, line := countNodes(data, limit)
	return n > limit, line
}

// CheckNodes is the check Parse makes of a document before yaml.v3 reads
// it: nil, or an Errors naming name, the line where the count passed
// MaxDocumentNodes and the top-level section that line is in; what names
// the document in the message ("file", "rules document").
func CheckNodes(name string, data []byte, what string) error {
	if e := nodesOver(name, data, what); e != nil {
		return Errors{*e}
	}
	return nil
}

// nodesOver is the Error for a document over MaxDocumentNodes, or nil:
// at the line where the count passed the limit, in the top-level section
// that line is in, if one is plainly written above it.
func nodesOver(name string, data []byte, what string) *Error {
	n, line := countNodes(data, MaxDocumentNodes)
	if n <= MaxDocumentNodes {
		return nil
	}
	return &Error{File: name, Line: line, Field: sectionAt(data, line), Msg: tooManyNodes(what)}
}

// countNodes is a cheap upper bound on the nodes yaml.v3 builds for data
// (its first two documents, as decodeRoot reads them). It stops once the
// count passes limit and returns the count and the line it was on then (0
// if it never passed).
//
// It does not parse YAML, lest a misreading of quotes or block scalars
// skip text that yaml.v3 reads as nodes: it counts every byte but
// comments, and where it cannot tell it counts more. A node yaml.v3 builds
// is a token (a scalar, an alias, an anchor or a tag on an empty value,
// "[" or "{"), which starts after a blank, a break or an indicator, and
// counts 1 there ("{" counts 2, for the empty value of an entry with no
// ":"), or it is implied by an indicator: a block list by its first "- ",
// a block mapping or a flow list's one-pair mapping by its first ":", an
// empty key or value by the ":", "- ", "?" or "," it is missing beside. So
// "- " counts 1, and 1 more when nothing follows it on its line; ":" 1,
// and 1 more each when nothing is before it on its line (since the last
// indicator) and nothing after; "?" 3; "," 1. A ":" inside a plain scalar
// ("http://h:80", "path:id") is no indicator, and a "[" or "{" inside one
// is none either or a syntax error that stops yaml.v3 there. "a: 1" counts
// 3, "- 1" and "1," 2, and prose in quotes or a block scalar a node a word.
//
// A comment ("#" after a blank) is skipped to the end of its line only when
// no quote follows on that line: were the "#" inside a quoted scalar after
// all, that scalar goes on past the line, so the skipped text holds no node.
// In UTF-16 (a BOM first) nothing is skipped, and NUL is a blank.
func countNodes(data []byte, limit int) (n, line int) {
	// The document node of each of the two documents decodeRoot reads and
	// the empty value each may be.
	n = 4
	utf16 := bytes.HasPrefix(data, []byte{0xFF, 0xFE}) || bytes.HasPrefix(data, []byte{0xFE, 0xFF})
	at := 1        // the line of data[i]
	sep := true    // data[i-1] ends a token (a blank, a break, an indicator): one may start at i
	plain := false // the token i is in is a plain scalar so far (no quote in it, no & * ! first)
	keyed := false // a token came since the line began or the last indicator: a ":" has its key
	quoted := -1   // a comment scan met a quote before this offset on its line: do not scan again
	for i := 0; i < len(data); i++ {
		c := data[i]
		if w := breakWidth(data, i); w > 0 {
			at++
			i += w - 1
			sep, plain, keyed = true, false, false
			continue
		}
		indicator := sep || !plain // not in a plain scalar, where only ": " and "- " are
		switch {
		case c == ' ' || c == '\t' || c == 0:
			sep, plain = true, false
			continue
		case c == '#' && (i == 0 || blankAt(data, i-1)) && !utf16 && i >= quoted:
			end, ok := commentEnd(data, i)
			if ok {
				i = end - 1
				continue
			}
			quoted = end
			n++
			sep, plain, keyed = false, false, true
		case c == ':' && (indicator || blankAt(data, i+1) || flowIndicator(data, i+1)):
			n++
			if !keyed {
				n++
			}
			if emptyAfter(data, i+1) {
				n++
			}
			sep, plain, keyed = true, false, false
		case c == '-' && blankAt(data, i+1):
			n++
			if emptyAfter(data, i+1) {
				n++
			}
			sep, plain, keyed = true, false, false
		case c == '?' && indicator:
			n += 3
			sep, plain, keyed = true, false, false
		case c == ',':
			n++
			sep, plain, keyed = true, false, false
		case (c == '[' || c == '{') && indicator:
			n++
			if c == '{' {
				n++
			}
			sep, plain, keyed = true, false, false
		case c == ']' || c == '}':
			sep, plain, keyed = true, false, false
		default:
			if sep {
				n++
				plain = c != '&' && c != '*' && c != '!'
			}
			if c == '"' || c == '\'' {
				plain = false
			}
			sep, keyed = false, true
		}
		if n > limit {
			return n, at
		}
	}
	return n, 0
}

// breakWidth is the length of the line break at data[i] as yaml.v3 reads
// breaks (CR LF, CR, LF, NEL, LS, PS), or 0 if there is none.
func breakWidth(data []byte, i int) int {
	switch c := data[i]; {
	case c == '\n':
		return 1
	case c == '\r':
		if i+1 < len(data) && data[i+1] == '\n' {
			return 2
		}
		return 1
	case c == 0xC2 && i+1 < len(data) && data[i+1] == 0x85:
		return 2
	case c == 0xE2 && i+2 < len(data) && data[i+1] == 0x80 && (data[i+2] == 0xA8 || data[i+2] == 0xA9):
		return 3
	}
	return 0
}

// blankAt reports whether data[i] is a blank, a break, or out of data.
func blankAt(data []byte, i int) bool {
	return i < 0 || i >= len(data) || data[i] == ' ' || data[i] == '\t' || data[i] == 0 || breakWidth(data, i) > 0 ||
		i >= 1 && data[i] == 0x85 && data[i-1] == 0xC2 || i >= 2 && (data[i] == 0xA8 || data[i] == 0xA9) && data[i-1] == 0x80 && data[i-2] == 0xE2
}

// flowIndicator reports whether data[i] ends a plain scalar in a flow
// collection after a ":" (yaml.v3 reads "a:," as a key "a").
func flowIndicator(data []byte, i int) bool {
	if i >= len(data) {
		return false
	}
	switch data[i] {
	case ',', '?', '[', ']', '{', '}':
		return true
	}
	return false
}

// emptyAfter reports whether nothing follows data[i-1] on its line but
// blanks, a comment or the end of a flow entry: the value (or item) of the
// indicator there is empty or on a later line.
func emptyAfter(data []byte, i int) bool {
	for i < len(data) && (data[i] == ' ' || data[i] == '\t' || data[i] == 0) {
		i++
	}
	if i >= len(data) || breakWidth(data, i) > 0 {
		return true
	}
	switch data[i] {
	case '#', ',', ']', '}':
		return true
	}
	return false
}

// commentEnd is where the comment starting at data[i] ends (its line
// break, or the end of data), and whether it may be skipped: no quote
// follows it on its line.
func commentEnd(data []byte, i int) (int, bool) {
	ok := true
	for ; i < len(data) && breakWidth(data, i) == 0; i++ {
		if data[i] == '"' || data[i] == '\'' {
			ok = false
		}
	}
	return i, ok
}

// sectionAt names the top-level key whose section holds line (1-based) of
// data, for an error at that line: the last line at or above it that
// starts, unindented, with a plain key and ": " (or ":" at its end). ""
// when there is none.
func sectionAt(data []byte, line int) string {
	section := ""
	for at := 1; at <= line && len(data) > 0; at++ {
		end := bytes.IndexByte(data, '\n')
		if end < 0 {
			end = len(data)
		}
		if key, ok := plainKey(data[:end]); ok {
			section = key
		}
		data = data[min(end+1, len(data)):]
	}
	return section
}

// plainKey reads "key:" at the start of a line: letters, digits, "_" and
// "-", then ":" and a blank or the end.
func plainKey(l []byte) (string, bool) {
	k := 0
	for k < len(l) && (l[k] >= 'a' && l[k] <= 'z' || l[k] >= 'A' && l[k] <= 'Z' || l[k] >= '0' && l[k] <= '9' || l[k] == '_' || l[k] == '-' && k > 0) {
		k++
	}
	if k == 0 || k == len(l) || l[k] != ':' || !(k+1 == len(l) || l[k+1] == ' ' || l[k+1] == '\t' || l[k+1] == '\r') {
		return "", false
	}
	return string(l[:k]), true
}
