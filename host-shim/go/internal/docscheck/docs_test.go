package docscheck

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
)

const (
	pluginDir = "../../pkg/computedomain"
	repoRoot  = "../../../.."
)

// pluginFiles parses the plugin package's production files.
func pluginFiles(t *testing.T) (*token.FileSet, []*ast.File) {
	t.Helper()
	fset := token.NewFileSet()
	pkgs, err := parser.ParseDir(fset, pluginDir, func(fi os.FileInfo) bool {
		return !strings.HasSuffix(fi.Name(), "_test.go")
	}, 0)
	if err != nil {
		t.Fatal(err)
	}
	var files []*ast.File
	for _, p := range pkgs {
		for _, f := range p.Files {
			files = append(files, f)
		}
	}
	if len(files) == 0 {
		t.Fatalf("no Go files in %s", pluginDir)
	}
	return fset, files
}

// stringConsts maps the package's string constants to their values.
func stringConsts(files []*ast.File) map[string]string {
	out := map[string]string{}
	for _, f := range files {
		for _, d := range f.Decls {
			g, ok := d.(*ast.GenDecl)
			if !ok || g.Tok != token.CONST {
				continue
			}
			for _, s := range g.Specs {
				vs := s.(*ast.ValueSpec)
				for i, n := range vs.Names {
					if i < len(vs.Values) {
						if v, ok := literal(vs.Values[i]); ok {
							out[n.Name] = v
						}
					}
				}
			}
		}
	}
	return out
}

func literal(e ast.Expr) (string, bool) {
	if b, ok := e.(*ast.BasicLit); ok && b.Kind == token.STRING {
		v, err := strconv.Unquote(b.Value)
		return v, err == nil
	}
	return "", false
}

// codeMetrics returns the full names (cdplace_<name>) of the metrics the plugin registers:
// the variables built with metrics.New* whose Opts name them, passed to MustRegister.
func codeMetrics(t *testing.T) map[string]bool {
	_, files := pluginFiles(t)
	consts := stringConsts(files)
	byVar := map[string]string{}
	for _, f := range files {
		ast.Inspect(f, func(n ast.Node) bool {
			vs, ok := n.(*ast.ValueSpec)
			if !ok {
				return true
			}
			for i, name := range vs.Names {
				if i >= len(vs.Values) {
					continue
				}
				call, ok := vs.Values[i].(*ast.CallExpr)
				if !ok || len(call.Args) == 0 {
					continue
				}
				sel, ok := call.Fun.(*ast.SelectorExpr)
				if !ok || !strings.HasPrefix(sel.Sel.Name, "New") {
					continue
				}
				u, ok := call.Args[0].(*ast.UnaryExpr)
				if !ok {
					continue
				}
				lit, ok := u.X.(*ast.CompositeLit)
				if !ok {
					continue
				}
				var subsystem, metric string
				for _, el := range lit.Elts {
					kv := el.(*ast.KeyValueExpr)
					key := kv.Key.(*ast.Ident).Name
					v, ok := literal(kv.Value)
					if id, isID := kv.Value.(*ast.Ident); !ok && isID {
						v, ok = consts[id.Name]
					}
					switch key {
					case "Subsystem":
						subsystem = v
					case "Name":
						metric = v
					}
				}
				if metric != "" {
					byVar[name.Name] = subsystem + "_" + metric
				}
			}
			return true
		})
	}
	registered := map[string]bool{}
	for _, f := range files {
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			if sel, ok := call.Fun.(*ast.SelectorExpr); ok && sel.Sel.Name == "MustRegister" {
				for _, a := range call.Args {
					id, ok := a.(*ast.Ident)
					if !ok || byVar[id.Name] == "" {
						t.Errorf("MustRegister argument %v is not a metric variable this test can read", a)
						continue
					}
					registered[byVar[id.Name]] = true
				}
			}
			return true
		})
	}
	if len(registered) < 10 {
		t.Fatalf("found only %d registered metrics (%v): is the parser reading metrics.go?", len(registered), registered)
	}
	return registered
}

// codeEventReasons returns the reasons of every Eventf call in the plugin: a literal, a
// constant, or a local variable assigned only literals and constants in its function.
func codeEventReasons(t *testing.T) map[string]bool {
	fset, files := pluginFiles(t)
	consts := stringConsts(files)
	resolve := func(e ast.Expr) (string, bool) {
		if v, ok := literal(e); ok {
			return v, true
		}
		if id, ok := e.(*ast.Ident); ok {
			v, ok := consts[id.Name]
			return v, ok
		}
		return "", false
	}
	out := map[string]bool{}
	for _, f := range files {
		for _, d := range f.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Body == nil {
				continue
			}
			ast.Inspect(fn.Body, func(n ast.Node) bool {
				call, ok := n.(*ast.CallExpr)
				if !ok {
					return true
				}
				sel, ok := call.Fun.(*ast.SelectorExpr)
				if !ok || sel.Sel.Name != "Eventf" || len(call.Args) < 4 {
					return true
				}
				arg := call.Args[3]
				if v, ok := resolve(arg); ok {
					out[v] = true
					return true
				}
				id, ok := arg.(*ast.Ident)
				if !ok {
					t.Errorf("%s: the Event reason %v is not a literal, constant or local variable", fset.Position(arg.Pos()), arg)
					return true
				}
				found := 0
				ast.Inspect(fn.Body, func(m ast.Node) bool {
					as, ok := m.(*ast.AssignStmt)
					if !ok {
						return true
					}
					for i, l := range as.Lhs {
						if li, ok := l.(*ast.Ident); ok && li.Name == id.Name && i < len(as.Rhs) {
							v, ok := resolve(as.Rhs[i])
							if !ok {
								t.Errorf("%s: %s is assigned something other than a constant", fset.Position(as.Pos()), id.Name)
								continue
							}
							out[v] = true
							found++
						}
					}
					return true
				})
				if found == 0 {
					t.Errorf("%s: cannot resolve the Event reason %s", fset.Position(arg.Pos()), id.Name)
				}
				return true
			})
		}
	}
	if len(out) < 4 {
		t.Fatalf("found only %d Event reasons (%v): is the parser reading the plugin?", len(out), out)
	}
	return out
}

func readDoc(t *testing.T, rel string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot, rel))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// between returns the part of a page between two marker lines.
func between(t *testing.T, page, begin, end string) string {
	t.Helper()
	b, e := strings.Index(page, begin), strings.Index(page, end)
	if b < 0 || e < b {
		t.Fatalf("markers %q … %q not found", begin, end)
	}
	return page[b:e]
}

var (
	rowName   = regexp.MustCompile("(?m)^\\| `([A-Za-z_]+)`")
	metricRef = regexp.MustCompile("`(cdplace_[a-z_]+)[`{]")
)

func rows(section string) map[string]bool {
	out := map[string]bool{}
	for _, m := range rowName.FindAllStringSubmatch(section, -1) {
		out[m[1]] = true
	}
	return out
}

func compare(t *testing.T, what string, code, docs map[string]bool) {
	t.Helper()
	var missing, stale []string
	for k := range code {
		if !docs[k] {
			missing = append(missing, k)
		}
	}
	for k := range docs {
		if !code[k] {
			stale = append(stale, k)
		}
	}
	sort.Strings(missing)
	sort.Strings(stale)
	if len(missing) > 0 {
		t.Errorf("%s in the code but not documented in docs/observability.md: %v", what, missing)
	}
	if len(stale) > 0 {
		t.Errorf("%s documented but not in the code: %v", what, stale)
	}
}

func TestEveryMetricIsDocumentedAndEveryDocumentedMetricExists(t *testing.T) {
	code := codeMetrics(t)
	page := readDoc(t, "docs/observability.md")
	compare(t, "metrics", code, rows(between(t, page, "<!-- BEGIN METRICS -->", "<!-- END METRICS -->")))
	// Any page for users that names a metric names one that exists.
	pages, _ := filepath.Glob(filepath.Join(repoRoot, "docs", "*.md"))
	pages = append(pages, filepath.Join(repoRoot, "README.md"))
	for _, p := range pages {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range metricRef.FindAllStringSubmatch(string(b), -1) {
			if !code[m[1]] {
				t.Errorf("%s names metric %s, which the plugin does not register", filepath.Base(p), m[1])
			}
		}
	}
}

func TestEveryEventReasonIsDocumentedAndEveryDocumentedReasonExists(t *testing.T) {
	code := codeEventReasons(t)
	page := readDoc(t, "docs/observability.md")
	compare(t, "Event reasons", code, rows(between(t, page, "<!-- BEGIN EVENTS -->", "<!-- END EVENTS -->")))
}
