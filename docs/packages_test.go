// Package docs holds the tests that keep docs/ true to the code.
package docs

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
)

// TestPackageTable fails when a package of the module has no line in the
// package table of ARCHITECTURE.md, so that a package is not added
// without saying what it is and on which side of the sandbox it runs.
func TestPackageTable(t *testing.T) {
	doc, err := os.ReadFile("ARCHITECTURE.md")
	if err != nil {
		t.Fatal(err)
	}
	listed := tablePackages(string(doc))
	if len(listed) == 0 {
		t.Fatal("ARCHITECTURE.md has no package table (a line starting with \"| `\")")
	}
	for _, pkg := range modulePackages(t) {
		if !listed[pkg] {
			t.Errorf("package %s has no line in the package table of docs/ARCHITECTURE.md: add one that says its side and its job", pkg)
		}
	}
}

// tablePackages are the names in backquotes in the first column of the
// table's rows.
func tablePackages(doc string) map[string]bool {
	names := map[string]bool{}
	name := regexp.MustCompile("`([^`]+)`")
	for line := range strings.SplitSeq(doc, "\n") {
		if !strings.HasPrefix(line, "| `") {
			continue
		}
		first, _, _ := strings.Cut(strings.TrimPrefix(line, "|"), "|")
		for _, m := range name.FindAllStringSubmatch(first, -1) {
			names[m[1]] = true
		}
	}
	return names
}

// modulePackages are the module's packages as go list sees them, relative
// to the module's root (cmd/kiln, internal/engine, ...).
func modulePackages(t *testing.T) []string {
	goBin, err := exec.LookPath("go")
	if err != nil {
		goBin = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	cmd := exec.Command(goBin, "list", "-f", "{{.Module.Path}} {{.ImportPath}}", "./...")
	cmd.Dir = ".."
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list ./...: %v", err)
	}
	var pkgs []string
	for line := range strings.Lines(string(out)) {
		mod, path, ok := strings.Cut(strings.TrimSpace(line), " ")
		if !ok {
			continue
		}
		pkgs = append(pkgs, strings.TrimPrefix(strings.TrimPrefix(path, mod), "/"))
	}
	if len(pkgs) == 0 {
		t.Fatal("go list ./... listed no packages")
	}
	return pkgs
}
