package mpquic

import (
	"flag"
	"fmt"
	"go/importer"
	"go/token"
	"go/types"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

var updateAPI = flag.Bool("update-api", false, "rewrite testdata/api.golden")

// The exported API is the package's promise to patterns/transport and any
// other user: the wire, recovery and congestion layers live in internal
// packages, and what mpquic exports from them (as aliases and wrappers)
// must stay exactly what it was. The listing is built from the compiled
// package's export data, with every type resolved through its aliases, so
// it names what a caller can use, not where it is declared.
func TestExportedAPI(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("go tool not found")
	}
	out, err := exec.Command(goBin, "list", "-export", "-deps", "-f", "{{.ImportPath}}={{.Export}}", ".").Output()
	if err != nil {
		t.Fatalf("go list -export: %v", err)
	}
	exports := map[string]string{}
	self := ""
	for _, line := range strings.Fields(string(out)) {
		path, file, _ := strings.Cut(line, "=")
		exports[path] = file
		self = path // the package itself comes last
	}
	fset := token.NewFileSet()
	imp := importer.ForCompiler(fset, "gc", func(path string) (io.ReadCloser, error) {
		f, ok := exports[path]
		if !ok || f == "" {
			return nil, fmt.Errorf("no export data for %s", path)
		}
		return os.Open(f)
	})
	pkg, err := imp.Import(self)
	if err != nil {
		t.Fatal(err)
	}
	got := apiListing(pkg)
	golden := filepath.Join("testdata", "api.golden")
	if *updateAPI {
		if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if got != string(want) {
		gl, wl := strings.Split(got, "\n"), strings.Split(string(want), "\n")
		wset := map[string]bool{}
		for _, l := range wl {
			wset[l] = true
		}
		gset := map[string]bool{}
		for _, l := range gl {
			gset[l] = true
			if !wset[l] {
				t.Errorf("new or changed: %s", l)
			}
		}
		for _, l := range wl {
			if !gset[l] {
				t.Errorf("gone or changed: %s", l)
			}
		}
		t.Error("the exported API changed (go test ./mpquic -run TestExportedAPI -update-api to accept)")
	}
}

// apiListing prints every exported object of pkg, one per line, sorted:
// types with their exported fields and method sets, functions with their
// signatures, constants with their values.
func apiListing(pkg *types.Package) string {
	mod := strings.TrimSuffix(pkg.Path(), "/mpquic")
	var hidden []string
	// Types from the internal layers print as mpquic's, provided mpquic
	// exports them under the same name; otherwise the listing says so.
	qual := func(p *types.Package) string {
		if p == pkg {
			return "mpquic"
		}
		if strings.HasPrefix(p.Path(), mod+"/mpquic/") {
			return "mpquic"
		}
		return p.Path()
	}
	typ := func(t types.Type) string {
		var visit func(types.Type)
		seen := map[types.Type]bool{}
		visit = func(t types.Type) {
			if seen[t] {
				return
			}
			seen[t] = true
			switch t := t.(type) {
			case *types.Alias:
				visit(types.Unalias(t))
			case *types.Named:
				if o := t.Obj(); o.Pkg() != nil && o.Pkg() != pkg && strings.HasPrefix(o.Pkg().Path(), mod+"/") {
					if e, ok := pkg.Scope().Lookup(o.Name()).(*types.TypeName); !ok || types.Unalias(e.Type()) != t {
						hidden = append(hidden, o.Pkg().Path()+"."+o.Name())
					}
				}
			case *types.Pointer:
				visit(t.Elem())
			case *types.Slice:
				visit(t.Elem())
			case *types.Array:
				visit(t.Elem())
			case *types.Map:
				visit(t.Key())
				visit(t.Elem())
			case *types.Chan:
				visit(t.Elem())
			case *types.Signature:
				for i := range t.Params().Len() {
					visit(t.Params().At(i).Type())
				}
				for i := range t.Results().Len() {
					visit(t.Results().At(i).Type())
				}
			}
		}
		visit(t)
		return types.TypeString(t, qual)
	}
	var lines []string
	add := func(format string, args ...any) { lines = append(lines, fmt.Sprintf(format, args...)) }
	scope := pkg.Scope()
	for _, name := range scope.Names() {
		if !token.IsExported(name) {
			continue
		}
		switch o := scope.Lookup(name).(type) {
		case *types.Const:
			add("const %s %s = %s", name, typ(o.Type()), o.Val().ExactString())
		case *types.Var:
			add("var %s %s", name, typ(o.Type()))
		case *types.Func:
			add("func %s%s", name, strings.TrimPrefix(typ(o.Type()), "func"))
		case *types.TypeName:
			t := types.Unalias(o.Type())
			u := t.Underlying()
			switch u := u.(type) {
			case *types.Struct:
				add("type %s struct", name)
				for i := range u.NumFields() {
					f := u.Field(i)
					if f.Exported() {
						add("type %s struct field %s %s%s", name, f.Name(), typ(f.Type()), map[bool]string{true: " (embedded)"}[f.Embedded()])
					}
				}
			case *types.Interface:
				add("type %s interface", name)
				for i := range u.NumMethods() {
					m := u.Method(i)
					if m.Exported() {
						add("type %s interface method %s%s", name, m.Name(), strings.TrimPrefix(typ(m.Type()), "func"))
					} else {
						add("type %s interface has unexported method %s", name, m.Name())
					}
				}
			default:
				add("type %s %s", name, typ(u))
			}
			for _, recv := range []types.Type{t, types.NewPointer(t)} {
				ms := types.NewMethodSet(recv)
				for i := range ms.Len() {
					m := ms.At(i).Obj()
					if !m.Exported() {
						continue
					}
					if _, isPtr := recv.(*types.Pointer); isPtr && types.NewMethodSet(t).Lookup(m.Pkg(), m.Name()) != nil {
						continue // listed with the value receiver
					}
					star := ""
					if _, isPtr := recv.(*types.Pointer); isPtr {
						star = "*"
					}
					add("method (%s%s) %s%s", star, name, m.Name(), strings.TrimPrefix(typ(m.Type()), "func"))
				}
			}
		}
	}
	sort.Strings(hidden)
	for i, h := range hidden {
		if i == 0 || hidden[i-1] != h {
			add("unexported type in the API: %s", h)
		}
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n") + "\n"
}
