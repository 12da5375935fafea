package sm

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// forbiddenImports may not appear in any non-test file under sm (DESIGN §3.1).
var forbiddenImports = []string{
	"os", "net", "syscall", "crypto/rand", "math/rand", "math/rand/v2",
	"sync", "sync/atomic", "io/ioutil", "go.uber.org/zap", "unsafe", "runtime",
}

// forbiddenTimeCalls read the clock or sleep.
var forbiddenTimeCalls = map[string]bool{
	"Now": true, "Since": true, "Until": true, "Sleep": true, "After": true,
	"AfterFunc": true, "Tick": true, "NewTimer": true, "NewTicker": true,
}

func checkPurity(t *testing.T, fset *token.FileSet, name string, f *ast.File) []string {
	var bad []string
	for _, imp := range f.Imports {
		p, _ := strconv.Unquote(imp.Path.Value)
		for _, fb := range forbiddenImports {
			if p == fb || strings.HasPrefix(p, fb+"/") && fb != "math/rand" {
				bad = append(bad, name+": imports "+p)
			}
		}
		if strings.HasPrefix(p, "os/") || strings.HasPrefix(p, "net/") {
			bad = append(bad, name+": imports "+p)
		}
	}
	// The names the file gives package time: "time" unless renamed; a dot
	// import would let Now() be called unqualified, so it is refused.
	timeNames := map[string]bool{}
	for _, imp := range f.Imports {
		if p, _ := strconv.Unquote(imp.Path.Value); p == "time" {
			switch {
			case imp.Name == nil:
				timeNames["time"] = true
			case imp.Name.Name == ".":
				bad = append(bad, name+": dot-imports time")
			case imp.Name.Name != "_":
				timeNames[imp.Name.Name] = true
			}
		}
	}
	ast.Inspect(f, func(n ast.Node) bool {
		switch x := n.(type) {
		case *ast.GoStmt:
			bad = append(bad, fset.Position(x.Pos()).String()+": starts a goroutine")
		case *ast.SelectorExpr:
			if id, ok := x.X.(*ast.Ident); ok && timeNames[id.Name] && forbiddenTimeCalls[x.Sel.Name] {
				bad = append(bad, fset.Position(x.Pos()).String()+": calls time."+x.Sel.Name)
			}
		}
		return true
	})
	return bad
}

// TestPurity enforces DESIGN §3.1: nothing under sm does I/O, reads the
// clock or randomness, synchronises goroutines or starts one.
func TestPurity(t *testing.T) {
	fset := token.NewFileSet()
	var bad []string
	err := filepath.WalkDir(".", func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return err
		}
		f, perr := parser.ParseFile(fset, path, nil, 0)
		if perr != nil {
			return perr
		}
		bad = append(bad, checkPurity(t, fset, path, f)...)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range bad {
		t.Error(b)
	}
}

// TestPurityCatchesViolations shows the checker can fail.
func TestPurityCatchesViolations(t *testing.T) {
	src := `package sm
import ("os"; "time"; "sync")
var _ = os.Getpid
var mu sync.Mutex
func f() { go f(); _ = time.Now() }`
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "planted.go", src, 0)
	if err != nil {
		t.Fatal(err)
	}
	bad := checkPurity(t, fset, "planted.go", f)
	if len(bad) != 4 {
		t.Fatalf("want 4 violations (os, sync, go, time.Now), got %d: %v", len(bad), bad)
	}
}

// An aliased or dot import of time does not hide a clock read (issue 21
// item 6: the checker matched the identifier time only).
func TestPurityCatchesAliasedTime(t *testing.T) {
	for _, c := range []struct {
		src  string
		want string
	}{
		{"package sm\nimport clock \"time\"\nfunc f() { _ = clock.Now() }", "calls time.Now"},
		{"package sm\nimport . \"time\"\nfunc f() { _ = Now() }", "dot-imports time"},
		{"package sm\nimport clock \"time\"\nvar sleep = clock.Sleep", "calls time.Sleep"},
	} {
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, "planted.go", c.src, 0)
		if err != nil {
			t.Fatal(err)
		}
		bad := checkPurity(t, fset, "planted.go", f)
		if len(bad) != 1 || !strings.Contains(bad[0], c.want) {
			t.Fatalf("%q: %v, want one violation %q", c.src, bad, c.want)
		}
	}
}
