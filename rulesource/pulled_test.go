package rulesource

import (
	"strings"
	"testing"
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

// Only the last line that is not blank is the pull's line, and only if it
// is whole: anything else is the document's and leaves push to its default.
func TestSplitPulledRefusesLookalikes(t *testing.T) {
	for _, text := range []string{
		"routes: []\n",
		"# pulled version 12 of redis://h/0/k\nroutes: []\n", // not last
		"routes: []\n# pulled version of redis://h/0/k\n",
		"routes: []\n# pulled version 0 of redis://h/0/k\n",
		"routes: []\n# pulled version -3 of redis://h/0/k\n",
		"routes: []\n# pulled version 12 of \n",
		"routes: []\n# pulled version 12\n",
		"routes: []\n# pulled version 99999999999999999999 of redis://h/0/k\n",
		"routes: []\n  # pulled version 12 of redis://h/0/k\n",
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
