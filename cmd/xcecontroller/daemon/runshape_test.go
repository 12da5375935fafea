package daemon

import (
	"go/ast"
	"go/parser"
	"go/token"
	"testing"
)

// run stays a few named steps (issue 21 item 4): at most 80 lines, the
// work in the functions it calls.
func TestRunIsAFewSteps(t *testing.T) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "daemon.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range f.Decls {
		if fn, ok := d.(*ast.FuncDecl); ok && fn.Recv == nil && fn.Name.Name == "run" {
			if n := fset.Position(fn.End()).Line - fset.Position(fn.Pos()).Line + 1; n > 80 {
				t.Fatalf("run is %d lines, want at most 80", n)
			}
			return
		}
	}
	t.Fatal("no func run in daemon.go")
}
