package archtest

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// The map whose package table is the rule book, from the module root.
const mapFile = "docs/architecture.md"

// rule is one row of the map's package table.
type rule struct {
	line     int
	packages []string // patterns of the packages the row is about
	allowed  []string // patterns of the module packages they may import
	// external restricts their imports outside the module (the standard
	// library is always allowed) to these patterns when std is set.
	std      bool
	external []string
}

// invariants are the map's load-bearing rules, held even if a row is
// loosened by mistake: from a package matching from, no import matching
// to (an exception is a pattern in except).
var invariants = []struct {
	from, to, except, why string
}{
	{"...", "internal/config", "", "no library reads the CLI's config: the command layer (cmd/..., internal/cmd/..., internal/cmdutil) decodes it and passes typed values"},
	{"report/...", "collect/...", "", "collect -> report runs one way only"},
	{"mpquic/...", "...", "mpquic/...", "mpquic is a leaf: the standard library and golang.org/x only"},
	{"probe", "report", "", "probe (the probe host's paths) is below the result model"},
	{"upload", "patterns/...", "", "the uploader carries no measuring transport"},
}

// configImporters may import internal/config (the command layer).
var configImporters = []string{"cmd/...", "internal/cmd/...", "internal/cmdutil", "scripts/..."}

var (
	rowRE  = regexp.MustCompile(`^\|(.*)\|(.*)\|(.*)\|\s*$`)
	tickRE = regexp.MustCompile("`([^`]+)`")
)

// parseRules reads the package table under "## Packages".
func parseRules(r io.Reader) ([]rule, error) {
	var rules []rule
	in := false
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		l := sc.Text()
		if strings.HasPrefix(l, "## ") {
			in = strings.TrimSpace(l[3:]) == "Packages"
			continue
		}
		if !in {
			continue
		}
		m := rowRE.FindStringSubmatch(l)
		if m == nil || strings.HasPrefix(strings.TrimSpace(m[1]), "---") || strings.TrimSpace(m[1]) == "package" {
			continue
		}
		ru := rule{line: n}
		for _, t := range tickRE.FindAllStringSubmatch(m[1], -1) {
			ru.packages = append(ru.packages, t[1])
		}
		if len(ru.packages) == 0 {
			return nil, fmt.Errorf("%s:%d: a row names no package in backticks", mapFile, n)
		}
		for _, t := range tickRE.FindAllStringSubmatch(m[3], -1) {
			switch p := t[1]; {
			case p == "std":
				ru.std = true
			case p != "..." && strings.Contains(strings.SplitN(p, "/", 2)[0], "."):
				ru.external = append(ru.external, p)
			default:
				ru.allowed = append(ru.allowed, p)
			}
		}
		rules = append(rules, ru)
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(rules) == 0 {
		return nil, fmt.Errorf("%s: no package table under \"## Packages\"", mapFile)
	}
	return rules, nil
}

// match: "a/..." is a and everything under it, "..." everything, else
// the package itself.
func match(pattern, pkg string) bool {
	if pattern == "..." {
		return true
	}
	if p, ok := strings.CutSuffix(pattern, "/..."); ok {
		return pkg == p || strings.HasPrefix(pkg, p+"/")
	}
	return pkg == pattern
}

// specificity orders patterns: a package named exactly beats any
// pattern, a longer pattern beats a shorter one.
func specificity(pattern string) int {
	if !strings.HasSuffix(pattern, "...") {
		return 1 << 20
	}
	return len(pattern)
}

// rowFor is the most specific row naming pkg.
func rowFor(rules []rule, pkg string) (rule, string, bool) {
	var best rule
	bestPat, bestSpec := "", -1
	for _, r := range rules {
		for _, p := range r.packages {
			if match(p, pkg) && specificity(p) > bestSpec {
				best, bestPat, bestSpec = r, p, specificity(p)
			}
		}
	}
	return best, bestPat, bestSpec >= 0
}

// pkgInfo is what go list says of one package of the module.
type pkgInfo struct {
	ImportPath  string
	Imports     []string
	TestImports []string // test and external-test imports together
}

func isStd(path string) bool { return !strings.Contains(strings.SplitN(path, "/", 2)[0], ".") }

// check holds every package to its row and the invariants; pkgs use paths
// relative to the module (mod is its path).
func check(rules []rule, mod string, pkgs []pkgInfo) []string {
	var errs []string
	for _, p := range pkgs {
		rel := relTo(mod, p.ImportPath)
		r, pat, ok := rowFor(rules, rel)
		if !ok {
			var own []string
			for _, i := range p.Imports {
				if isOwn(mod, i) {
					own = append(own, "`"+relTo(mod, i)+"`")
				}
			}
			errs = append(errs, fmt.Sprintf("%s has no row in %s's package table: add\n\t| `%s` | what it holds | %s |\n(or a pattern row such as `%s/...` covering it)",
				rel, mapFile, rel, cmpOr(strings.Join(own, ", "), "nothing"), strings.SplitN(rel, "/", 2)[0]))
			continue
		}
		for _, i := range p.Imports {
			if !isOwn(mod, i) {
				if r.std && !isStd(i) && !slices.ContainsFunc(r.external, func(e string) bool { return match(e, i) }) {
					errs = append(errs, fmt.Sprintf("%s imports %s, outside what its row (`%s`, %s:%d) allows beyond the standard library: %v", rel, i, pat, mapFile, r.line, r.external))
				}
				continue
			}
			to := relTo(mod, i)
			if !slices.ContainsFunc(r.allowed, func(a string) bool { return match(a, to) }) {
				errs = append(errs, fmt.Sprintf("%s imports %s, which its row (`%s`, %s:%d) does not allow (may import: %s)", rel, to, pat, mapFile, r.line, cmpOr(strings.Join(r.allowed, ", "), "nothing of the module")))
			}
			for _, inv := range invariants {
				if match(inv.from, rel) && match(inv.to, to) && !(inv.except != "" && match(inv.except, to)) {
					if inv.to == "internal/config" && (slices.ContainsFunc(configImporters, func(c string) bool { return match(c, rel) })) {
						continue
					}
					errs = append(errs, fmt.Sprintf("%s imports %s: %s", rel, to, inv.why))
				}
			}
		}
	}
	// The config file is the command layer's input also in tests: a
	// library test that reads it validates only what some command set up.
	for _, p := range pkgs {
		rel := relTo(mod, p.ImportPath)
		if rel == "internal/config" || slices.ContainsFunc(configImporters, func(c string) bool { return match(c, rel) }) {
			continue
		}
		if slices.Contains(p.TestImports, mod+"/internal/config") {
			errs = append(errs, fmt.Sprintf("%s's tests import internal/config: a library takes typed values (upload.Config, lab.Info) from the command layer", rel))
		}
	}
	return errs
}

func isOwn(mod, path string) bool { return path == mod || strings.HasPrefix(path, mod+"/") }

func relTo(mod, path string) string {
	if path == mod {
		return "."
	}
	return strings.TrimPrefix(path, mod+"/")
}

func cmpOr(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// goList lists the module's packages for one GOOS (build-tagged files
// import different packages on each).
func goList(t *testing.T, root, goos string) []pkgInfo {
	t.Helper()
	cmd := exec.Command("go", "list", "-e", "-json=ImportPath,Imports,TestImports,XTestImports", "./...")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "GOOS="+goos, "CGO_ENABLED=0")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("GOOS=%s go list: %v", goos, err)
	}
	var pkgs []pkgInfo
	dec := json.NewDecoder(bytes.NewReader(out))
	for dec.More() {
		var p struct {
			pkgInfo
			XTestImports []string
		}
		if err := dec.Decode(&p); err != nil {
			t.Fatal(err)
		}
		p.TestImports = append(p.TestImports, p.XTestImports...)
		pkgs = append(pkgs, p.pkgInfo)
	}
	return pkgs
}

// TestImportRules: every package of the module has a row in the map's
// package table, imports only what its row allows (on Linux, macOS and
// Windows), and keeps the invariants above.
func TestImportRules(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("go tool not found (CI=true: not skipping)")
		}
		t.Skip("go tool not found")
	}
	root := filepath.Join("..", "..")
	f, err := os.Open(filepath.Join(root, mapFile))
	if err != nil {
		t.Fatal(err)
	}
	rules, err := parseRules(f)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	modOut, err := exec.Command("go", "list", "-m").Output()
	if err != nil {
		t.Fatal(err)
	}
	mod := strings.TrimSpace(string(modOut))
	seen := map[string]bool{}
	for _, goos := range []string{"linux", "darwin", "windows"} {
		pkgs := goList(t, root, goos)
		if len(pkgs) < 10 {
			t.Fatalf("GOOS=%s: go list found %d packages", goos, len(pkgs))
		}
		for _, e := range check(rules, mod, pkgs) {
			if !seen[e] {
				seen[e] = true
				t.Errorf("GOOS=%s: %s", goos, e)
			}
		}
	}
}

// TestCheckCatchesPlanted: the checker fails on a planted forbidden
// import, on an import its row does not list, on a package without a
// row, and on an external import of a std-only row; it passes the same
// graph without them.
func TestCheckCatchesPlanted(t *testing.T) {
	doc := "# map\n\n## Packages\n\n| package | holds | may import |\n|---|---|---|\n" +
		"| `probe` | paths | nothing |\n" +
		"| `report`, `report/...` | results | `report` |\n" +
		"| `collect/...` | server | `report/...`, `collect/...` |\n" +
		"| `mpquic/...` | QUIC | `mpquic/...`, `std`, `golang.org/x/crypto/...` |\n" +
		"| `internal/cmd/...` | commands | `...` |\n" +
		"| `lab`, `lab/labtest`, `upload` | libraries | `internal/config`, `probe` |\n" +
		"\n## Next\n| `nope` | not a rule | |\n"
	rules, err := parseRules(strings.NewReader(doc))
	if err != nil {
		t.Fatal(err)
	}
	if len(rules) != 6 {
		t.Fatalf("%d rules, want 6: %+v", len(rules), rules)
	}
	const mod = "example.com/m"
	p := func(path string, imports ...string) pkgInfo {
		return pkgInfo{ImportPath: mod + "/" + path, Imports: imports}
	}
	clean := []pkgInfo{
		p("probe", "net"),
		p("report/analysis", mod+"/report"),
		p("collect/store", mod+"/report/analysis", mod+"/collect/api"),
		p("mpquic/internal/wire", "golang.org/x/crypto/chacha20", "crypto/tls"),
		p("internal/cmd/run", mod+"/probe", mod+"/internal/config", "github.com/spf13/cobra"),
		p("lab", mod+"/probe"),
	}
	if errs := check(rules, mod, clean); len(errs) != 0 {
		t.Fatalf("clean graph: %v", errs)
	}
	for _, c := range []struct {
		plant pkgInfo
		want  string
	}{
		{p("probe", mod+"/report"), "probe imports report, which its row"},
		{p("report/render", mod+"/collect/store"), "collect -> report runs one way only"},
		{p("mpquic", mod+"/probe"), "mpquic is a leaf"},
		{p("mpquic/internal/recovery", "github.com/quic-go/quic-go"), "outside what its row"},
		{p("collect/store", mod+"/internal/config"), "no library reads the CLI's config"},
		{p("survey/list"), "survey/list has no row"},
		{p("upload", mod+"/internal/config"), "no library reads the CLI's config"},
		{pkgInfo{ImportPath: mod + "/lab/labtest", TestImports: []string{mod + "/internal/config"}}, "lab/labtest's tests import internal/config"},
	} {
		pkgs := append(slices.Clone(clean), c.plant)
		errs := check(rules, mod, pkgs)
		if !slices.ContainsFunc(errs, func(e string) bool { return strings.Contains(e, c.want) }) {
			t.Errorf("planted %+v: want an error containing %q, got %v", c.plant, c.want, errs)
		}
	}
}
