package workflows

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
)

// TestEveryChangeIDHasFixture reads the "Version" markers of every recorded history in
// testdata and fails naming each listed change id that no fixture exercises (its old and
// new path would then replay nothing, and retiring its legacy branch could not be checked),
// and each id a fixture records that ChangeIDs does not list (a GetVersion whose id is not
// in versions.go).
func TestEveryChangeIDHasFixture(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob(filepath.Join("testdata", "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no replay fixtures in testdata (%v)", err)
	}
	seen := map[string][]string{} // change id → fixtures that record it
	for _, f := range files {
		for _, id := range fixtureChangeIDs(t, f) {
			seen[id] = append(seen[id], filepath.Base(f))
		}
	}
	if n, m := len(changeConstNames()), len(ChangeIDs()); n != m {
		t.Errorf("versions.go declares %d change id constants but ChangeIDs returns %d; list each once", n, m)
	}
	listed := map[string]bool{}
	for _, id := range ChangeIDs() {
		listed[id] = true
		if len(seen[id]) == 0 {
			t.Errorf("change id %q has no recorded history in testdata that asks for it; record one (e2e/histories_test.go)", id)
		}
	}
	for _, id := range sortedKeys(seen) {
		if !listed[id] {
			t.Errorf("fixtures %v record change id %q, which workflows.ChangeIDs does not list; add its constant to versions.go", seen[id], id)
		}
	}
}

// fixtureChangeIDs decodes the change ids of the Version markers in the history file f
// with the SDK's default data converter, as the SDK itself reads them on replay.
func fixtureChangeIDs(t *testing.T, f string) []string {
	t.Helper()
	r, err := os.Open(f)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	h, err := client.HistoryFromJSON(r, client.HistoryJSONOptions{})
	if err != nil {
		t.Fatalf("parse %s: %v", f, err)
	}
	dc := converter.GetDefaultDataConverter()
	var ids []string
	for _, e := range h.GetEvents() {
		m := e.GetMarkerRecordedEventAttributes()
		if m == nil || m.GetMarkerName() != "Version" {
			continue
		}
		p, ok := m.GetDetails()["change-id"]
		if !ok {
			t.Fatalf("%s: event %d is a Version marker without a change-id", f, e.GetEventId())
		}
		var id string
		if err := dc.FromPayloads(p, &id); err != nil {
			t.Fatalf("%s: decode the change id of event %d: %v", f, e.GetEventId(), err)
		}
		ids = append(ids, id)
	}
	return ids
}

// TestGetVersionUsesListedIDs fails for a workflow.GetVersion call in the workflow
// packages or the examples whose change id is not one of the Change* constants (a string
// literal, or a constant declared elsewhere), so versions.go stays the one list.
func TestGetVersionUsesListedIDs(t *testing.T) {
	t.Parallel()
	fset := token.NewFileSet()
	var bad []string
	calls := 0
	for _, root := range []string{".", filepath.Join("..", "examples")} {
		err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() && d.Name() == "testdata" {
				return filepath.SkipDir
			}
			if d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
				return nil
			}
			file, err := parser.ParseFile(fset, p, nil, 0)
			if err != nil {
				return err
			}
			ast.Inspect(file, func(n ast.Node) bool {
				call, ok := n.(*ast.CallExpr)
				if !ok || len(call.Args) < 2 {
					return true
				}
				sel, ok := call.Fun.(*ast.SelectorExpr)
				if !ok || sel.Sel.Name != "GetVersion" {
					return true
				}
				calls++
				if !isChangeConst(call.Args[1]) {
					bad = append(bad, fset.Position(call.Pos()).String())
				}
				return true
			})
			return nil
		})
		if err != nil {
			t.Fatalf("walk %s: %v", root, err)
		}
	}
	if calls == 0 {
		t.Fatal("found no workflow.GetVersion call: the walk looks in the wrong place")
	}
	sort.Strings(bad)
	for _, b := range bad {
		t.Errorf("%s: workflow.GetVersion's change id is not a workflows.Change* constant (versions.go)", b)
	}
}

// isChangeConst: e names a constant of versions.go (ChangeX, or workflows.ChangeX from
// another package).
func isChangeConst(e ast.Expr) bool {
	var name string
	switch v := e.(type) {
	case *ast.Ident:
		name = v.Name
	case *ast.SelectorExpr:
		if x, ok := v.X.(*ast.Ident); !ok || x.Name != "workflows" {
			return false
		}
		name = v.Sel.Name
	default:
		return false
	}
	for _, id := range changeConstNames() {
		if id == name {
			return true
		}
	}
	return false
}

// changeConstNames are the names of the constants declared in versions.go.
func changeConstNames() []string {
	file, err := parser.ParseFile(token.NewFileSet(), "versions.go", nil, 0)
	if err != nil {
		panic(err)
	}
	var names []string
	for _, d := range file.Decls {
		if g, ok := d.(*ast.GenDecl); ok && g.Tok == token.CONST {
			for _, s := range g.Specs {
				for _, n := range s.(*ast.ValueSpec).Names {
					names = append(names, n.Name)
				}
			}
		}
	}
	return names
}
