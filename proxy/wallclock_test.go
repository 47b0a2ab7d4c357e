package proxy_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"strings"
	"testing"
)

// TestNoWallClockArithmetic: instants the package keeps as numbers come
// from the monotonic clock (monoNow, monoOf, monoTime), never from the wall
// clock, which NTP or a resumed VM may step: UnixNano and friends, and
// time.Unix to turn such a number back into a deadline, are refused in its
// code. Under the wall clock, a step back of an hour kept a peer's resets
// of an hour before counting in a 10 s window, and a step forward closed a
// WebSocket idle for a second (time audit).
func TestNoWallClockArithmetic(t *testing.T) {
	entries, err := os.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	for _, e := range entries {
		name := e.Name()
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			sel, ok := n.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			pkg, _ := sel.X.(*ast.Ident)
			switch m := sel.Sel.Name; {
			case m == "UnixNano" || m == "UnixMicro" || m == "UnixMilli" || m == "Unix" && (pkg == nil || pkg.Name != "time"):
				t.Errorf("%s: %s reads the wall clock as a number; use monoNow or monoOf", fset.Position(sel.Pos()), m)
			case m == "Unix" && pkg != nil && pkg.Name == "time" && fset.Position(sel.Pos()).Filename != "send.go":
				t.Errorf("%s: time.Unix makes a wall-clock instant; use monoTime", fset.Position(sel.Pos()))
			}
			return true
		})
	}
}
