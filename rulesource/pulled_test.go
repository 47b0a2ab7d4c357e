package rulesource

import (
	"fmt"
	"strings"
	"testing"

	"sluice/internal/alloctest"
)

// What pull prints, push reads back: the document as stored, byte for
// byte, and the version and source it was pulled at.
func TestPulledRoundTrip(t *testing.T) {
	const src = "redis://127.0.0.1:6379/0/fleet;rules (eu)"
	for _, text := range []string{
		"routes: []\n",
		"routes: []", // no final newline: pull adds one before its line
		"# a comment\nroutes: []\n\n\n",
		"",
	} {
		out := Pulled(Doc{Version: 12, Text: []byte(text)}, src)
		if !strings.HasPrefix(string(out), text) {
			t.Errorf("%q: pulled text %q does not start with the document", text, out)
		}
		for _, edited := range []string{string(out), string(out) + "\n\n", strings.ReplaceAll(string(out), "\n", "\r\n")} {
			doc, v, s, ok := SplitPulled([]byte(edited))
			if !ok || v != 12 || s != src {
				t.Fatalf("%q: SplitPulled = %d %q %v, want 12 %q true", edited, v, s, ok, src)
			}
			want := strings.TrimRight(text, "\n")
			if got := strings.TrimRight(strings.ReplaceAll(string(doc), "\r\n", "\n"), "\n"); got != want {
				t.Errorf("%q: document %q, want %q", edited, got, want)
			}
			if n, m := strings.Count(string(doc), "\n"), strings.Count(text, "\n"); n < m {
				t.Errorf("%q: the document lost lines (%d, want %d)", edited, n, m)
			}
		}
	}
}

// A pull line is one only if it is whole: anything else is the
// document's and leaves push to its default.
func TestSplitPulledRefusesLookalikes(t *testing.T) {
	for _, text := range []string{
		"routes: []\n",
		"routes: []\n# pulled version of redis://h/0/k\n",
		"routes: []\n# pulled version 0 of redis://h/0/k\n",
		"routes: []\n# pulled version -3 of redis://h/0/k\n",
		"routes: []\n# pulled version 12 of \n",
		"routes: []\n# pulled version 12\n",
		"routes: []\n# pulled version 99999999999999999999 of redis://h/0/k\n",
		"routes: []\n#pulled version 12 of redis://h/0/k\n# pulled versions\n",
		"routes: []\n  # pulled version 12 of redis://h/0/k\n", // indented
		// A block scalar's text, which the document keeps as written.
		"blockResponse:\n  body: |\n    see\n    # pulled version 7 of redis://h/0/rules\nroutes: []\n",
		// At column 0 but inside a multi-line quoted scalar: its text too
		// (yaml.v3 reads one string), not a comment.
		"blockResponse:\n  body: \"slow down\n# pulled version 1 of redis://h/0/rules\n  please\"\nroutes: []\n",
		"blockResponse:\n  body: 'slow down\n# pulled version 1 of redis://h/0/rules\n  please'\n",
	} {
		doc, v, s, ok := SplitPulled([]byte(text))
		if ok || string(doc) != text {
			t.Errorf("%q: SplitPulled = %q %d %q %v, want the text and false", text, doc, v, s, ok)
		}
	}
	// Hand-edited: the note may go, the version and source must stay.
	if _, v, s, ok := SplitPulled([]byte("a: 1\n# pulled version 7 of redis://h/0/k\n")); !ok || v != 7 || s != "redis://h/0/k" {
		t.Errorf("without the note: %d %q %v", v, s, ok)
	}
}

// An edit may move the pull line: a rule appended after it. It is still
// the file's version (read only as the last line,
// such a file named none, and its push replaced a version stored
// meanwhile), and no pull line is stored: each is blanked, so every other
// line keeps its number. Of several (a document stored with one by an older
// push, pulled again), the last names the version.
func TestSplitPulledFindsAMovedLine(t *testing.T) {
	const line = "# pulled version 8 of redis://h/0/k (sluice rules push refuses this file once another version is stored)"
	for _, tc := range []struct {
		name, text, doc string
		version         int64
	}{
		{"a rule appended after it", "flowRules:\n  - {resource: a, count: 1}\n" + line + "\n  - {resource: b, count: 2}\n",
			"flowRules:\n  - {resource: a, count: 1}\n\n  - {resource: b, count: 2}\n", 8},
		{"first", line + "\nroutes: []\n", "\nroutes: []\n", 8},
		{"an older one stored inside", "a: 1\n# pulled version 6 of redis://h/0/k\nb: 2\n" + line + "\n\n",
			"a: 1\n\nb: 2\n", 8},
		{"CRLF, moved", "a: 1\r\n" + line + "\r\nb: 2\r\n", "a: 1\r\n\r\nb: 2\r\n", 8},
		// Still a comment after a block scalar that keeps its final
		// newlines (|+), which the line ends where a blank line would join
		// it, and in a document holding .nan, which equals no value.
		{"after a |+ block scalar", "body: |+\n  slow down\n" + line + "\n", "body: |+\n  slow down\n", 8},
		{"after a |+ block scalar, moved", "body: |+\n  slow down\n\n" + line + "\nb: 2\n", "body: |+\n  slow down\n\n\nb: 2\n", 8},
		{"a document holding .nan", "body: .nan\n" + line + "\n", "body: .nan\n", 8},
	} {
		doc, v, s, ok := SplitPulled([]byte(tc.text))
		if !ok || v != tc.version || s != "redis://h/0/k" || string(doc) != tc.doc {
			t.Errorf("%s: SplitPulled = %q %d %q %v, want %q %d redis://h/0/k true", tc.name, doc, v, s, ok, tc.doc, tc.version)
		}
	}
}

// Of many pull lines (pulled files appended to one another), the last
// maxPullLines are read, each checked to be a comment by a parse of the
// whole document: every one was, and 5,689 of them in 204 KB took 41 s.
// The last names the version; earlier ones stay as they are.
func TestSplitPulledReadsTheLastPullLines(t *testing.T) {
	var b strings.Builder
	b.WriteString("a: 1\n")
	for v := 1; v <= 3000; v++ {
		fmt.Fprintf(&b, "# pulled version %d of redis://h/0/k\n", v)
	}
	b.WriteString("b: 2\n")
	doc, v, s, ok := SplitPulled([]byte(b.String()))
	if !ok || v != 3000 || s != "redis://h/0/k" {
		t.Fatalf("SplitPulled = %d %q %v, want version 3000", v, s, ok)
	}
	if n := strings.Count(string(doc), "# pulled version"); n != 3000-maxPullLines {
		t.Errorf("%d pull lines left in the document, want the %d before the last %d", n, 3000-maxPullLines, maxPullLines)
	}
	if !strings.HasPrefix(string(doc), "a: 1\n# pulled version 1 of") || !strings.HasSuffix(string(doc), "\n\nb: 2\n") {
		t.Errorf("the document's ends changed: %q ... %q", string(doc)[:40], string(doc)[len(doc)-20:])
	}
}

// A pulled file too wide for config to parse (over MaxDocumentNodes) is
// not parsed whole here either: SplitPulled still finds its line, at the
// cost of a scan. Parsing it took a yaml.v3 tree of about 1 GB.
func TestSplitPulledLeavesAWideDocumentUnparsed(t *testing.T) {
	text := "extra: [" + strings.Repeat("1,", 3_000_000) + "1]\n"
	out := Pulled(Doc{Version: 3, Text: []byte(text)}, "redis://127.0.0.1:6379/0/fleet")
	var v int64
	var ok bool
	got := alloctest.Bytes(func() { _, v, _, ok = SplitPulled(out) })
	if !ok || v != 3 {
		t.Fatalf("SplitPulled = %d, %v; want version 3", v, ok)
	}
	if got > 64<<20 {
		t.Errorf("SplitPulled of a %d-byte document allocated %d MB", len(out), got>>20)
	}
}
