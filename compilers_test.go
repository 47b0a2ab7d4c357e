package main

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// compilers are the packages (with the packages under them) that build
// guards and routes from rules. They take a Config as config gives it:
// defaults are applied in config only (Load, or Defaults for rules built in
// code), and enums are checked in config's validation only.
var compilers = []string{"limiter", "hotparam", "cluster", "proxy", "upstream"}

// enumPrefixes name config's enum constants (GradeQPS, BehaviorReject, ...).
var enumPrefixes = []string{"Grade", "Strategy", "Behavior", "Degrade", "Threshold", "Balance", "LimitApp", "Authority"}

// TestCompilersNeitherDefaultNorValidate reads the compilers' source: no
// non-test file names one of config's defaults (config.Default...), and no
// switch over config's enum constants answers a value it does not know with
// an error. Either would mean a second place deciding what config decides.
func TestCompilersNeitherDefaultNorValidate(t *testing.T) {
	fset := token.NewFileSet()
	files := 0
	for _, dir := range compilers {
		err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() && d.Name() == "testdata" {
				return filepath.SkipDir
			}
			if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return nil
			}
			f, err := parser.ParseFile(fset, path, nil, 0)
			if err != nil {
				return err
			}
			files++
			checkCompilerFile(t, fset, f)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if files < 50 {
		t.Fatalf("read only %d files of %v", files, compilers)
	}
}

func checkCompilerFile(t *testing.T, fset *token.FileSet, f *ast.File) {
	t.Helper()
	cfg := ""
	for _, im := range f.Imports {
		if p, _ := strconv.Unquote(im.Path.Value); p == "sluice/config" {
			cfg = "config"
			if im.Name != nil {
				cfg = im.Name.Name
			}
		}
	}
	if cfg == "" {
		return
	}
	// configName reports the name x selects from config, if it does.
	configName := func(x ast.Node) (string, bool) {
		sel, ok := x.(*ast.SelectorExpr)
		if !ok {
			return "", false
		}
		id, ok := sel.X.(*ast.Ident)
		if !ok || id.Name != cfg {
			return "", false
		}
		return sel.Sel.Name, true
	}
	ast.Inspect(f, func(n ast.Node) bool {
		if name, ok := configName(n); ok && strings.HasPrefix(name, "Default") {
			t.Errorf("%s: %s.%s: a default is config's to apply (config.Defaults for rules built in code)", fset.Position(n.Pos()), cfg, name)
		}
		sw, ok := n.(*ast.SwitchStmt)
		if !ok || sw.Tag == nil {
			return true
		}
		enum := false
		var dflt *ast.CaseClause
		for _, s := range sw.Body.List {
			cc := s.(*ast.CaseClause)
			if cc.List == nil {
				dflt = cc
			}
			for _, e := range cc.List {
				if name, ok := configName(e); ok {
					for _, p := range enumPrefixes {
						enum = enum || strings.HasPrefix(name, p)
					}
				}
			}
		}
		if !enum || dflt == nil {
			return true
		}
		ast.Inspect(dflt, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			if sel, ok := call.Fun.(*ast.SelectorExpr); ok {
				if id, ok := sel.X.(*ast.Ident); ok && (id.Name == "fmt" && sel.Sel.Name == "Errorf" || id.Name == "errors" && sel.Sel.Name == "New") {
					t.Errorf("%s: a switch over config's enum refuses an unknown value: config's validation does", fset.Position(call.Pos()))
				}
			}
			return true
		})
		return true
	})
}
