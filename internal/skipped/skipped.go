// Package skipped is the one place where tests that cannot run here (no
// Redis, no chromium) are skipped, and tallied: a package whose TestMain
// runs through Main prints one line to the terminal, even without -v,
// saying how many tests were skipped for what ("SKIPPED: 12 tests need
// Redis (redis-server not installed): TestA, TestB, ..."). go test shows a
// passing package's output only with -v, so the line is written to the go
// command's own stderr when the test binary runs under it (Linux), else to
// the binary's.
//
// It is for tests only. Its tally is the one package-level mutable state in
// sluice: tests skip from anywhere, and testing.M offers no other way to
// learn of it.
package skipped

import (
	"fmt"
	"io"
	"io/fs"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
)

var (
	mu    sync.Mutex
	tally = map[string][]string{} // need -> top-level test names, in order
)

// Skip records that t needs need ("Redis (redis-server not installed)") and
// skips it with msg.
func Skip(t testing.TB, need, msg string) {
	t.Helper()
	record(need, t.Name())
	t.Skip(msg)
}

// record counts test (a subtest as its top-level test) as needing need.
func record(need, test string) {
	name, _, _ := strings.Cut(test, "/")
	mu.Lock()
	if !slices.Contains(tally[need], name) {
		tally[need] = append(tally[need], name)
	}
	mu.Unlock()
}

// Main runs m's tests and prints the summary of what was skipped, if
// anything was; its Run returns m's exit code. Use it as
// os.Exit(skipped.Main(m).Run()) or goleak.VerifyTestMain(skipped.Main(m)).
func Main(m *testing.M) interface{ Run() int } { return runner{m} }

type runner struct{ m *testing.M }

func (r runner) Run() int {
	code := r.m.Run()
	if s := Summary(); s != "" {
		w, done := terminal()
		fmt.Fprint(w, s)
		done()
	}
	return code
}

// Summary is the lines Main prints: one per need, "" if nothing was skipped.
func Summary() string {
	mu.Lock()
	defer mu.Unlock()
	needs := make([]string, 0, len(tally))
	for n := range tally {
		needs = append(needs, n)
	}
	slices.Sort(needs)
	var b strings.Builder
	for _, n := range needs {
		names := tally[n]
		shown := names
		if len(shown) > 5 {
			shown = shown[:5]
		}
		more := ""
		if len(names) > len(shown) {
			more = ", ... (go test -v lists them)"
		}
		tests := "tests need"
		if len(names) == 1 {
			tests = "test needs"
		}
		fmt.Fprintf(&b, "SKIPPED: %d %s %s: %s%s\n", len(names), tests, n, strings.Join(shown, ", "), more)
	}
	return b.String()
}

// reset empties the tally (tests of this package).
func reset() {
	mu.Lock()
	clear(tally)
	mu.Unlock()
}

// terminal is where the summary goes: the go command's stderr when go test
// runs this binary (it hides a passing package's own output), else ours.
func terminal() (io.Writer, func()) {
	ppid := os.Getppid()
	if comm, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", ppid)); err == nil && strings.TrimSpace(string(comm)) == "go" {
		path := fmt.Sprintf("/proc/%d/fd/2", ppid)
		st, errStat := os.Stat(path)
		info, errInfo := os.ReadFile(fmt.Sprintf("/proc/%d/fdinfo/2", ppid))
		if errStat == nil && errInfo == nil && outlives(st.Mode(), string(info)) {
			if f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0); err == nil {
				return f, func() { f.Close() }
			}
		}
	}
	return os.Stderr, func() {}
}

// outlives reports whether a line appended to the go command's stderr
// stays there: always on a terminal or a pipe, and on a regular file only
// if the go command opened it for appending (2>>). Opening the file anew
// gives us an offset of our own, so after `go test ... > log` the go
// command went on writing at its own offset, over our line, and left a
// torn fragment of it in the log. Such a run gets no line (with -v, the
// package's output shows it).
func outlives(mode fs.FileMode, fdinfo string) bool {
	if !mode.IsRegular() {
		return true
	}
	for line := range strings.Lines(fdinfo) {
		if v, ok := strings.CutPrefix(line, "flags:"); ok {
			flags, err := strconv.ParseUint(strings.TrimSpace(v), 8, 64)
			return err == nil && flags&uint64(os.O_APPEND) != 0
		}
	}
	return false
}
