package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode"
)

// The README is a front page and the reference lives in docs/: these tests
// keep the links between them, and into the code, from rotting as files and
// headings move.

var (
	mdLink     = regexp.MustCompile(`\[[^\]]*\]\(([^)\s]+)\)`)
	codeSpan   = regexp.MustCompile("`[^`]*`")
	mdHeading  = regexp.MustCompile(`^#{1,6}\s+(.*?)\s*#*\s*$`)
	externalRe = regexp.MustCompile(`^[a-z][a-z0-9+.-]*:`)
)

// docFiles are README.md and every docs/*.md.
func docFiles(t *testing.T) []string {
	t.Helper()
	pages, err := filepath.Glob("docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	return append([]string{"README.md"}, pages...)
}

// proseLines yields a markdown file's lines outside fenced code blocks, with
// their 1-based numbers.
func proseLines(text string) (lines []string, numbers []int) {
	fence := ""
	for i, l := range strings.Split(text, "\n") {
		trimmed := strings.TrimSpace(l)
		if fence != "" {
			if strings.HasPrefix(trimmed, fence) {
				fence = ""
			}
			continue
		}
		if strings.HasPrefix(trimmed, "```") || strings.HasPrefix(trimmed, "~~~") {
			fence = trimmed[:3]
			continue
		}
		lines, numbers = append(lines, l), append(numbers, i+1)
	}
	return lines, numbers
}

// anchors returns the heading anchors of a markdown text the way GitHub
// makes them: lower case, punctuation dropped, spaces to hyphens, and -1,
// -2, ... on repeats.
func anchors(text string) map[string]bool {
	out := map[string]bool{}
	seen := map[string]int{}
	lines, _ := proseLines(text)
	for _, l := range lines {
		m := mdHeading.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		var b strings.Builder
		for _, r := range strings.ToLower(m[1]) {
			switch {
			case unicode.IsLetter(r) || unicode.IsDigit(r) || r == '-' || r == '_':
				b.WriteRune(r)
			case r == ' ':
				b.WriteByte('-')
			}
		}
		slug := b.String()
		if n := seen[slug]; n > 0 {
			out[slug+"-"+strconv.Itoa(n)] = true
		} else {
			out[slug] = true
		}
		seen[slug]++
	}
	return out
}

// TestDocsLinksResolve: every relative link in README.md and docs/*.md names
// a file that exists, and every #anchor into a markdown file names one of
// its headings.
func TestDocsLinksResolve(t *testing.T) {
	texts := map[string]string{}
	read := func(path string) (string, bool) {
		if s, ok := texts[path]; ok {
			return s, true
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return "", false
		}
		texts[path] = string(b)
		return string(b), true
	}
	checked := 0
	for _, file := range docFiles(t) {
		text, ok := read(file)
		if !ok {
			t.Fatalf("cannot read %s", file)
		}
		lines, numbers := proseLines(text)
		for i, l := range lines {
			for _, m := range mdLink.FindAllStringSubmatch(codeSpan.ReplaceAllString(l, "``"), -1) {
				target := m[1]
				if externalRe.MatchString(target) {
					continue
				}
				checked++
				where := file + ":" + strconv.Itoa(numbers[i])
				path, anchor, _ := strings.Cut(target, "#")
				dest := file
				if path != "" {
					dest = filepath.Join(filepath.Dir(file), filepath.FromSlash(path))
					if _, err := os.Stat(dest); err != nil {
						t.Errorf("%s: link %q: %s does not exist", where, target, dest)
						continue
					}
				}
				if anchor == "" {
					continue
				}
				if !strings.HasSuffix(dest, ".md") {
					t.Errorf("%s: link %q: an anchor into %s, which is not markdown", where, target, dest)
					continue
				}
				destText, ok := read(dest)
				if !ok {
					t.Errorf("%s: link %q: cannot read %s", where, target, dest)
					continue
				}
				if !anchors(destText)[anchor] {
					t.Errorf("%s: link %q: %s has no heading with anchor #%s", where, target, dest, anchor)
				}
			}
		}
	}
	if checked == 0 {
		t.Fatal("no relative links found: the link pattern is broken")
	}
}

// TestReadmeLinksEveryDocsPage: the front page is the index of docs/.
func TestReadmeLinksEveryDocsPage(t *testing.T) {
	b, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	linked := map[string]bool{}
	for _, m := range mdLink.FindAllStringSubmatch(string(b), -1) {
		path, _, _ := strings.Cut(m[1], "#")
		linked[filepath.Clean(path)] = true
	}
	pages := docFiles(t)[1:]
	if len(pages) == 0 {
		t.Fatal("no docs/*.md pages")
	}
	for _, p := range pages {
		if !linked[p] {
			t.Errorf("README.md does not link %s", p)
		}
	}
}

func TestAnchorsAreGitHubs(t *testing.T) {
	got := anchors("# sluice\n## rules.yaml: listeners, upstreams, routes\n```\n# not a heading\n```\n" +
		"### Hot-parameter limiting (`paramRules`)\n### Tests that prove it\n### Tests that prove it\n")
	for _, want := range []string{"sluice", "rulesyaml-listeners-upstreams-routes", "hot-parameter-limiting-paramrules",
		"tests-that-prove-it", "tests-that-prove-it-1"} {
		if !got[want] {
			t.Errorf("anchor %q missing from %v", want, got)
		}
	}
	if got["not-a-heading"] {
		t.Error("a # line inside a code fence was taken for a heading")
	}
}
