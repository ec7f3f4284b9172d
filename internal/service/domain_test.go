package service

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
	"testing"
)

// TestDomainAtTheCentre: the service and the HTTP server speak the
// domain's User, Session and Execution (internal/kiln), never the store's
// names for them, so a front end or a store can change without the other.
func TestDomainAtTheCentre(t *testing.T) {
	banned := map[string]bool{"User": true, "Session": true, "SessionStatus": true, "SessionActive": true,
		"SessionEnded": true, "Execution": true, "ExecRunning": true}
	for _, dir := range []string{".", "../server"} {
		files, err := filepath.Glob(filepath.Join(dir, "*.go"))
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range files {
			if strings.HasSuffix(name, "_test.go") {
				continue
			}
			f, err := parser.ParseFile(token.NewFileSet(), name, nil, parser.SkipObjectResolution)
			if err != nil {
				t.Fatal(err)
			}
			ast.Inspect(f, func(n ast.Node) bool {
				sel, ok := n.(*ast.SelectorExpr)
				if !ok {
					return true
				}
				if x, isIdent := sel.X.(*ast.Ident); isIdent && x.Name == "store" && banned[sel.Sel.Name] {
					t.Errorf("%s uses store.%s; use kiln.%s, the domain's type", name, sel.Sel.Name, sel.Sel.Name)
				}
				return true
			})
		}
	}
}
