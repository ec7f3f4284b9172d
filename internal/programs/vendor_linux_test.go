package programs

import (
	"testing"
	"time"

	"github.com/kiln-dev/kiln/internal/backend/native"
)

// TestGoModuleVendored: a Go module in the workspace with a vendored
// dependency builds and tests offline, from vendor/.
func TestGoModuleVendored(t *testing.T) {
	needLanguage(t, "go")
	sb := newSandbox(t, newBackend(t), native.Spec{})
	files := []File{
		{Path: "app/go.mod", Data: []byte("module example.com/app\n\ngo 1.21\n\nrequire example.com/lib v1.0.0\n")},
		{Path: "app/vendor/modules.txt", Data: []byte("# example.com/lib v1.0.0\n## explicit\nexample.com/lib\n")},
		{Path: "app/vendor/example.com/lib/lib.go", Data: []byte("package lib\n\nfunc Twice(n int) int { return 2 * n }\n")},
		{Path: "app/main.go", Data: []byte("package main\n\nimport (\n\t\"fmt\"\n\n\t\"example.com/lib\"\n)\n\nfunc main() { fmt.Println(lib.Twice(21)) }\n")},
		{Path: "app/main_test.go", Data: []byte("package main\n\nimport (\n\t\"testing\"\n\n\t\"example.com/lib\"\n)\n\nfunc TestTwice(t *testing.T) {\n\tif lib.Twice(2) != 4 {\n\t\tt.Fatal(\"wrong\")\n\t}\n}\n")},
	}
	o := run(t, sb.Agent, Program{Language: lng("go"), Files: files, Entry: "app/main.go", Timeout: 2 * time.Minute})
	if o.res.Phase != PhaseRun || o.stdout != "42\n" {
		t.Errorf("the module's program: %v; want it built from vendor/, printing 42", o)
	}
	o = run(t, sb.Agent, Program{Language: lng("go"), Entry: "app/main_test.go", Timeout: 2 * time.Minute})
	if o.res.Phase != PhaseRun || o.res.Exit.Code != 0 || len(o.res.TestCases) != 1 || o.res.TestCases[0].Status != "passed" {
		t.Errorf("the module's tests: %v, cases %v; want TestTwice passed", o, o.res.TestCases)
	}
	// A change in the vendored code is a new build.
	run(t, sb.Agent, Program{Language: lng("go"), Files: []File{{Path: "app/vendor/example.com/lib/lib.go", Data: []byte("package lib\n\nfunc Twice(n int) int { return 3 * n }\n")}}})
	if o := run(t, sb.Agent, Program{Language: lng("go"), Entry: "app/main.go", Timeout: 2 * time.Minute}); o.res.Cached || o.stdout != "63\n" {
		t.Errorf("after the vendored code changed: cached %v, %v; want a new build printing 63", o.res.Cached, o)
	}
}
