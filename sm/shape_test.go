package sm

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// The core's shape bounds (issue 21): Node routes inputs to concern types
// rather than owning their state, pending work is data rather than
// closures, and no concern grows into a god object of its own.
const (
	maxNodeFields   = 20
	maxNodeMethods  = 50
	maxTypeMethods  = 70
	maxFuncLiterals = 40
)

// shape is what the bounds count over the non-test files of sm/...
type shape struct {
	nodeFields  int
	methods     map[string]int // receiver type name -> methods
	literals    []string       // positions of function literals
	closureHeld []string       // fields of type func(IODone)
}

// measureShape parses the non-test Go files under dir.
func measureShape(dir string) (shape, error) {
	sh := shape{methods: map[string]int{}}
	fset := token.NewFileSet()
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return err
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return fmt.Errorf("parse %s: %w", path, err)
		}
		// Method sets are per package: a receiver name in sm/queue is not
		// sm's type of the same name.
		// sm itself is "".
		pkg := filepath.Dir(path)
		if pkg == filepath.Clean(dir) {
			pkg = ""
		}
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.FuncDecl:
				if n.Recv != nil && len(n.Recv.List) == 1 {
					sh.methods[pkg+"."+recvName(n.Recv.List[0].Type)]++
				}
			case *ast.FuncLit:
				sh.literals = append(sh.literals, fset.Position(n.Pos()).String())
			case *ast.TypeSpec:
				st, ok := n.Type.(*ast.StructType)
				if !ok {
					return true
				}
				if n.Name.Name == "Node" && pkg == "" {
					for _, fl := range st.Fields.List {
						sh.nodeFields += max(1, len(fl.Names))
					}
				}
				for _, fl := range st.Fields.List {
					if isIODoneFunc(fl.Type) {
						sh.closureHeld = append(sh.closureHeld, n.Name.Name+" at "+fset.Position(fl.Pos()).String())
					}
				}
			}
			return true
		})
		return nil
	})
	return sh, err
}

// recvName is a receiver's type name without pointer or type parameters.
func recvName(x ast.Expr) string {
	for {
		switch t := x.(type) {
		case *ast.StarExpr:
			x = t.X
		case *ast.IndexExpr:
			x = t.X
		case *ast.IndexListExpr:
			x = t.X
		case *ast.Ident:
			return t.Name
		default:
			return fmt.Sprintf("%T", x)
		}
	}
}

// isIODoneFunc: x is a func type whose only parameter is IODone.
func isIODoneFunc(x ast.Expr) bool {
	ft, ok := x.(*ast.FuncType)
	if !ok || ft.Params == nil || len(ft.Params.List) != 1 {
		return false
	}
	id, ok := ft.Params.List[0].Type.(*ast.Ident)
	return ok && id.Name == "IODone"
}

func (sh shape) violations() []string {
	var out []string
	if sh.nodeFields > maxNodeFields {
		out = append(out, fmt.Sprintf("Node has %d fields (at most %d)", sh.nodeFields, maxNodeFields))
	}
	names := make([]string, 0, len(sh.methods))
	for name := range sh.methods {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		n := sh.methods[name]
		limit := maxTypeMethods
		if name == ".Node" {
			limit = maxNodeMethods
		}
		if n > limit {
			out = append(out, fmt.Sprintf("%s has %d methods (at most %d)", name, n, limit))
		}
	}
	if len(sh.literals) > maxFuncLiterals {
		out = append(out, fmt.Sprintf("%d function literals (at most %d): %s", len(sh.literals), maxFuncLiterals, strings.Join(sh.literals, ", ")))
	}
	for _, c := range sh.closureHeld {
		out = append(out, "a func(IODone) field in "+c)
	}
	return out
}

func TestShape(t *testing.T) {
	sh, err := measureShape(".")
	if err != nil {
		t.Fatal(err)
	}
	if sh.nodeFields == 0 || sh.methods[".Node"] == 0 {
		t.Fatalf("found no Node type (fields %d, methods %d): the count is broken", sh.nodeFields, sh.methods[".Node"])
	}
	for _, v := range sh.violations() {
		t.Error(v)
	}
	t.Logf("Node: %d fields, %d methods; %d function literals", sh.nodeFields, sh.methods[".Node"], len(sh.literals))
}

// TestShapeCatchesPlanted: each bound fails on a package that breaks it.
func TestShapeCatchesPlanted(t *testing.T) {
	big := shape{nodeFields: maxNodeFields + 1, methods: map[string]int{".Node": maxNodeMethods + 1, "queue.Table": maxTypeMethods + 1, ".journal": maxTypeMethods}}
	for i := 0; i <= maxFuncLiterals; i++ {
		big.literals = append(big.literals, fmt.Sprintf("x.go:%d", i))
	}
	big.closureHeld = []string{"pendingOp at x.go:1"}
	got := strings.Join(big.violations(), "\n")
	for _, want := range []string{"Node has 21 fields", ".Node has 51 methods", "queue.Table has 71 methods", "41 function literals", "func(IODone) field in pendingOp"} {
		if !strings.Contains(got, want) {
			t.Errorf("violations miss %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, ".journal") {
		t.Errorf("a type at the bound is reported:\n%s", got)
	}
	// The parser side: a planted closure field and literal are found.
	dir := t.TempDir()
	src := "package p\ntype IODone struct{}\ntype Node struct{ a, b int; k func(IODone) }\nfunc (n *Node) f() { _ = func() {} }\n"
	if err := os.WriteFile(filepath.Join(dir, "p.go"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	sh, err := measureShape(dir)
	if err != nil {
		t.Fatal(err)
	}
	if sh.nodeFields != 3 || len(sh.literals) != 1 || len(sh.closureHeld) != 1 || sh.methods[".Node"] != 1 {
		t.Errorf("planted package measured as %+v", sh)
	}
}
