package sm

import (
	"bufio"
	"bytes"
	"fmt"
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// forbiddenImports may not appear in any non-test file under sm (DESIGN
// §3.1), nor any package under them (os/exec, net/http, ...).
var forbiddenImports = []string{
	"os", "net", "syscall", "crypto/rand", "math/rand", "math/rand/v2",
	"sync", "sync/atomic", "io/ioutil", "go.uber.org/zap", "unsafe", "runtime",
}

// forbiddenPackage: path is a package none of whose objects sm may use,
// however the file names it (aliased, dot-imported).
func forbiddenPackage(path string) bool {
	for _, fb := range forbiddenImports {
		if path == fb || strings.HasPrefix(path, fb+"/") {
			return true
		}
	}
	return false
}

// forbiddenTimeFuncs read the clock or sleep: package time's other
// objects (Duration, Time and its methods) are pure.
var forbiddenTimeFuncs = map[string]bool{
	"Now": true, "Since": true, "Until": true, "Sleep": true, "After": true,
	"AfterFunc": true, "Tick": true, "NewTimer": true, "NewTicker": true,
}

// mapIterators range over a map in its random order, as a range over the
// map itself does.
var mapIterators = map[string]bool{"Keys": true, "Values": true, "All": true}

// unorderedTag marks a map range whose order cannot reach an effect or a
// trace; the words after it say why.
const unorderedTag = "unordered:"

// exportData finds the compiled export data of the packages the checker
// type-checks against (sm's dependencies, and those the planted sources
// import), from one `go list -export` of them: identifiers are resolved
// to objects by go/types, not matched by name.
var exportData = sync.OnceValues(func() (map[string]string, error) {
	cmd := exec.Command("go", "list", "-deps", "-export", "-f", "{{.ImportPath}}\t{{.Export}}",
		"./...", "time", "os", "net", "sync", "sort", "slices", "maps", "math/rand", "math/rand/v2", "crypto/rand", "go.uber.org/zap")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go list -export: %w: %s", err, stderr.String())
	}
	files := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		if path, file, ok := strings.Cut(sc.Text(), "\t"); ok && file != "" {
			files[path] = file
		}
	}
	return files, sc.Err()
})

// newImporter imports from the export data of go list.
func newImporter(t *testing.T, fset *token.FileSet) types.Importer {
	t.Helper()
	files, err := exportData()
	if err != nil {
		t.Fatal(err)
	}
	return importer.ForCompiler(fset, "gc", func(path string) (io.ReadCloser, error) {
		f, ok := files[path]
		if !ok {
			return nil, fmt.Errorf("no export data for %q (not a dependency of sm listed by go list)", path)
		}
		return os.Open(f)
	})
}

// checkPackage type-checks one package's files and returns every breach
// of purity: a forbidden import, a use of a forbidden package's object or
// of a clock-reading function of time (by the object the identifier
// resolves to), a go statement, and a range over a map (or a maps
// iterator) in a function that sorts nothing after it and without an
// "// unordered: why" comment on the loop.
func checkPackage(t *testing.T, fset *token.FileSet, imp types.Importer, files []*ast.File) []string {
	t.Helper()
	info := &types.Info{Uses: map[*ast.Ident]types.Object{}, Types: map[ast.Expr]types.TypeAndValue{}}
	conf := types.Config{Importer: imp}
	if _, err := conf.Check(files[0].Name.Name, fset, files, info); err != nil {
		t.Fatalf("type-checking %s: %v", fset.Position(files[0].Pos()).Filename, err)
	}
	type breach struct {
		pos token.Pos
		msg string
	}
	var found []breach
	at := func(n ast.Node, format string, args ...any) {
		found = append(found, breach{n.Pos(), fmt.Sprintf(format, args...)})
	}
	for _, f := range files {
		for _, spec := range f.Imports {
			if p, _ := strconv.Unquote(spec.Path.Value); forbiddenPackage(p) {
				at(spec, "imports %s", p)
			}
		}
		// Each use, resolved: an alias or a dot import names the same object.
		for id, obj := range info.Uses {
			if obj.Pkg() == nil || fset.File(id.Pos()) != fset.File(f.Pos()) {
				continue
			}
			switch path := obj.Pkg().Path(); {
			case forbiddenPackage(path):
				at(id, "uses %s.%s", path, obj.Name())
			case path == "time" && isPackageFunc(obj) && forbiddenTimeFuncs[obj.Name()]:
				at(id, "uses time.%s", obj.Name())
			}
		}
		checkFuncs(f, info, fset, at)
	}
	// info.Uses is a map: the report is put in source order.
	sort.Slice(found, func(i, j int) bool { return found[i].pos < found[j].pos })
	var bad []string
	for _, b := range found {
		bad = append(bad, fset.Position(b.pos).String()+": "+b.msg)
	}
	return bad
}

// isPackageFunc: obj is a function at package level (not a method).
func isPackageFunc(obj types.Object) bool {
	fn, ok := obj.(*types.Func)
	return ok && fn.Type().(*types.Signature).Recv() == nil
}

// checkFuncs reports go statements and the map ranges of f that nothing
// orders.
func checkFuncs(f *ast.File, info *types.Info, fset *token.FileSet, at func(ast.Node, string, ...any)) {
	// The lines that carry an unordered comment, with a reason.
	unordered := map[int]bool{}
	for _, cg := range f.Comments {
		for _, c := range cg.List {
			text := strings.TrimSpace(strings.TrimPrefix(c.Text, "//"))
			if why, ok := strings.CutPrefix(text, unorderedTag); ok && strings.TrimSpace(why) != "" {
				unordered[fset.Position(c.Slash).Line] = true
			}
		}
	}
	var funcs []ast.Node // the enclosing functions, innermost last
	var visit func(n ast.Node) bool
	visit = func(n ast.Node) bool {
		switch x := n.(type) {
		case *ast.FuncDecl, *ast.FuncLit:
			funcs = append(funcs, x)
			ast.Inspect(funcBody(x), visit)
			funcs = funcs[:len(funcs)-1]
			return false
		case *ast.GoStmt:
			at(x, "starts a goroutine")
		case *ast.RangeStmt:
			if !rangesMap(info, x.X) {
				break
			}
			line := fset.Position(x.For).Line
			if unordered[line] || unordered[line-1] {
				break
			}
			if len(funcs) == 0 || !sortsAfter(info, funcBody(funcs[len(funcs)-1]), x.Pos()) {
				at(x, "ranges over a map (%s) without sorting what it collected or an %q comment saying why order cannot reach an effect", types.ExprString(x.X), "// "+unorderedTag+" why")
			}
		}
		return true
	}
	ast.Inspect(f, visit)
}

func funcBody(n ast.Node) *ast.BlockStmt {
	switch x := n.(type) {
	case *ast.FuncDecl:
		if x.Body == nil {
			return &ast.BlockStmt{}
		}
		return x.Body
	case *ast.FuncLit:
		return x.Body
	}
	return &ast.BlockStmt{}
}

// rangesMap: x is a map, or a maps iterator over one.
func rangesMap(info *types.Info, x ast.Expr) bool {
	if tv, ok := info.Types[x]; ok {
		if _, isMap := tv.Type.Underlying().(*types.Map); isMap {
			return true
		}
	}
	call, ok := ast.Unparen(x).(*ast.CallExpr)
	if !ok {
		return false
	}
	obj := callee(info, call)
	return obj != nil && obj.Pkg() != nil && obj.Pkg().Path() == "maps" && mapIterators[obj.Name()]
}

// callee is the function object a call names, if it names one.
func callee(info *types.Info, call *ast.CallExpr) types.Object {
	switch fn := ast.Unparen(call.Fun).(type) {
	case *ast.Ident:
		return info.Uses[fn]
	case *ast.SelectorExpr:
		return info.Uses[fn.Sel]
	}
	return nil
}

// sortsAfter: body calls a function of package sort, or slices.Sort*,
// after pos.
func sortsAfter(info *types.Info, body *ast.BlockStmt, pos token.Pos) bool {
	found := false
	ast.Inspect(body, func(n ast.Node) bool {
		call, ok := n.(*ast.CallExpr)
		if !ok || found || call.Pos() < pos {
			return !found
		}
		if obj := callee(info, call); obj != nil && obj.Pkg() != nil && isPackageFunc(obj) {
			switch obj.Pkg().Path() {
			case "sort":
				found = true
			case "slices":
				found = strings.HasPrefix(obj.Name(), "Sort")
			}
		}
		return !found
	})
	return found
}

// TestPurity enforces DESIGN §3.1 on every non-test file of sm and its
// sub-packages: nothing does I/O, reads the clock or randomness,
// synchronises goroutines or starts one, and no map's random order
// reaches an effect or a trace unsorted.
func TestPurity(t *testing.T) {
	fset := token.NewFileSet()
	imp := newImporter(t, fset)
	pkgs := map[string][]*ast.File{}
	err := filepath.WalkDir(".", func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return err
		}
		f, perr := parser.ParseFile(fset, path, nil, parser.ParseComments)
		if perr != nil {
			return perr
		}
		pkgs[filepath.Dir(path)] = append(pkgs[filepath.Dir(path)], f)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{".", "queue", "wal", "quorum", "tracker", "idset"} {
		if len(pkgs[want]) == 0 {
			t.Fatalf("package %s not found: the walk checks nothing", want)
		}
	}
	for _, files := range pkgs {
		for _, b := range checkPackage(t, fset, imp, files) {
			t.Error(b)
		}
	}
}

// checkSource type-checks one planted source file as a package.
func checkSource(t *testing.T, src string) []string {
	t.Helper()
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "planted.go", src, parser.ParseComments)
	if err != nil {
		t.Fatal(err)
	}
	return checkPackage(t, fset, newImporter(t, fset), []*ast.File{f})
}

// The checker fails on each planted breach, by the object an identifier
// resolves to: an aliased or dot import of time does not hide a clock read
// (issue 21 item 6: it matched the identifier time only), nor one of a
// forbidden package its import; a map ranged without an order fails.
func TestPurityCatchesPlanted(t *testing.T) {
	for _, c := range []struct {
		label, src string
		want       []string // a substring of each violation, in order
	}{
		{"os, sync, go, time.Now", `package p
import ("os"; "time"; "sync")
var _ = os.Getpid
var mu sync.Mutex
func f() { go f(); _ = time.Now() }`,
			[]string{"imports os", "imports sync", "uses os.Getpid", "uses sync.Mutex", "starts a goroutine", "uses time.Now"}},
		{"aliased time", `package p
import tm "time"
func f() { _ = tm.Now() }`, []string{"uses time.Now"}},
		{"aliased time as a value", `package p
import clock "time"
var sleep = clock.Sleep`, []string{"uses time.Sleep"}},
		{"dot-imported time", `package p
import . "time"
func f() Duration { return Since(Time{}) }`, []string{"uses time.Since"}},
		{"dot-imported os", `package p
import . "os"
func f() int { return Getpid() }`, []string{"imports os", "uses os.Getpid"}},
		{"aliased zap and rand", `package p
import (l "go.uber.org/zap"; r "math/rand/v2")
var _ = l.NewNop
func f() int { return r.IntN(3) }`, []string{"imports go.uber.org/zap", "imports math/rand/v2", "uses go.uber.org/zap.NewNop", "uses math/rand/v2.IntN"}},
		{"unsorted map range", `package p
func f(m map[string]int, out func(string)) {
	for k := range m {
		out(k)
	}
}`, []string{"ranges over a map (m)"}},
		{"sorted before the range is not sorted", `package p
import "sort"
type set map[int]bool
func f(s set) (ks []int) {
	sort.Ints(ks)
	for k := range s {
		ks = append(ks, k)
	}
	return ks
}`, []string{"ranges over a map (s)"}},
		{"a maps iterator", `package p
import "maps"
func f(m map[int]int) (ks []int) {
	for k := range maps.Keys(m) {
		ks = append(ks, k)
	}
	return ks
}`, []string{"ranges over a map (maps.Keys(m))"}},
		{"an unordered tag without a reason", `package p
func f(m map[int]int) (n int) {
	for _, v := range m { // unordered:
		n += v
	}
	return n
}`, []string{"ranges over a map (m)"}},
	} {
		bad := checkSource(t, c.src)
		ok := len(bad) == len(c.want)
		for i := 0; ok && i < len(bad); i++ {
			ok = strings.Contains(bad[i], c.want[i])
		}
		if !ok {
			t.Errorf("%s: got %q, want violations %q", c.label, bad, c.want)
		}
	}
}

// What the checker allows: time's pure objects however named, a map
// range sorted afterwards in the same function (sort.* or slices.Sort*),
// and one whose loop says why its order cannot matter.
func TestPurityAllows(t *testing.T) {
	for _, src := range []string{`package p
import tm "time"
func f(d tm.Duration) tm.Duration { return d.Round(tm.Second) }`, `package p
import "sort"
func f(m map[int]bool) (ks []int) {
	for k := range m {
		ks = append(ks, k)
	}
	sort.Ints(ks)
	return ks
}`, `package p
import "slices"
func f(m map[int]bool) (ks []int) {
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}`, `package p
func f(m map[int]int) (n int) {
	// unordered: a sum does not depend on the order of its terms
	for _, v := range m {
		n += v
	}
	return n
}`, `package p
func f(m map[int]int) (n int) {
	for _, v := range m { // unordered: a sum is the same in any order
		n += v
	}
	return n
}`} {
		if bad := checkSource(t, src); len(bad) != 0 {
			t.Errorf("%s\nrefused: %q", src, bad)
		}
	}
}
