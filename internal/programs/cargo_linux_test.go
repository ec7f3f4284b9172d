package programs

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/kiln-dev/kiln/internal/backend/native"
	"github.com/kiln-dev/kiln/internal/kiln"
	"github.com/kiln-dev/kiln/internal/protocol"
)

// cargoPackage is a Cargo package whose one dependency, twice, is
// vendored and found through source replacement, as `cargo vendor`
// leaves it; main is the binary's source.
func cargoPackage(main string) []File {
	return []File{
		{Path: "app/Cargo.toml", Data: []byte("[package]\nname = \"app\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n[dependencies]\ntwice = \"1.0\"\n")},
		{Path: "app/.cargo/config.toml", Data: []byte("[source.crates-io]\nreplace-with = \"vendored-sources\"\n\n[source.vendored-sources]\ndirectory = \"vendor\"\n")},
		{Path: "app/vendor/twice/Cargo.toml", Data: []byte("[package]\nname = \"twice\"\nversion = \"1.0.0\"\nedition = \"2021\"\n")},
		{Path: "app/vendor/twice/.cargo-checksum.json", Data: []byte(`{"files":{},"package":null}`)},
		{Path: "app/vendor/twice/src/lib.rs", Data: []byte("pub fn twice(n: i32) -> i32 { 2 * n }\n")},
		{Path: "app/src/main.rs", Data: []byte(main)},
	}
}

// TestCargoVendored: a Cargo package in the workspace with a vendored
// crate builds offline in the sandbox with Debian's cargo, runs with its
// arguments, runs its #[test]s (each reported) beside an empty main, and
// a compile error names the package's file.
func TestCargoVendored(t *testing.T) {
	needLanguage(t, "rust")
	if _, err := os.Stat(cargoBin); err != nil {
		t.Skip("needs Debian's cargo (scripts/deps installs it)")
	}
	sb := newSandbox(t, newBackend(t), native.Spec{})
	const timeout = 3 * time.Minute

	main := "fn main() {\n    let n: i32 = std::env::args().nth(1).unwrap().parse().unwrap();\n    println!(\"{}\", twice::twice(n));\n}\n"
	o := run(t, sb.Agent, Program{Language: lng("rust"), Files: cargoPackage(main), Entry: "app/src/main.rs", Args: []string{"21"}, Timeout: timeout})
	if o.res.Phase != PhaseRun || o.res.Exit.Code != 0 || o.stdout != "42\n" {
		t.Fatalf("the Cargo package: %v; want it built offline from vendor/, printing 42", o)
	}
	if !strings.Contains(o.res.CompileLog, "Compiling twice v1.0.0") {
		t.Errorf("compile log %q; want cargo's build of the vendored crate", o.res.CompileLog)
	}

	tests := "fn main() {}\n\n#[cfg(test)]\nmod tests {\n" +
		"    #[test]\n    fn doubles() { assert_eq!(twice::twice(2), 4); }\n\n" +
		"    #[test]\n    fn wrong() { assert_eq!(twice::twice(2), 5, \"two twice\"); }\n}\n"
	o = run(t, sb.Agent, Program{Language: lng("rust"), Files: []File{{Path: "app/src/main.rs", Data: []byte(tests)}}, Entry: "app/src/main.rs", Timeout: timeout})
	want := []kiln.TestCase{{Name: "tests::doubles", Status: "passed"}, {Name: "tests::wrong", Status: "failed"}}
	sorted := cmpopts.SortSlices(func(a, b kiln.TestCase) bool { return a.Name < b.Name })
	if !o.res.Tests || o.res.Exit.Code == 0 || !cmp.Equal(o.res.TestCases, want, cmpopts.IgnoreFields(kiln.TestCase{}, "Message"), sorted) {
		t.Fatalf("cargo test: %v, cases %v; want %v and a failed run", o, o.res.TestCases, want)
	}
	for _, c := range o.res.TestCases {
		if c.Name == "tests::wrong" && !strings.Contains(c.Message, "two twice") {
			t.Errorf("tests::wrong's message %q; want the assertion's message", c.Message)
		}
	}

	bad := "fn main() {\n    println!(\"{}\", twice::thrice(2));\n}\n"
	o = run(t, sb.Agent, Program{Language: lng("rust"), Files: []File{{Path: "app/src/main.rs", Data: []byte(bad)}}, Entry: "app/src/main.rs", Timeout: timeout})
	if o.res.Phase != PhaseCompile || len(o.res.Diagnostics) == 0 || o.res.Diagnostics[0].File != "app/src/main.rs" || o.res.Diagnostics[0].Line != 2 {
		t.Errorf("a compile error: %v, diagnostics %+v; want the first at app/src/main.rs:2", o, o.res.Diagnostics)
	}
}

// TestRenameAcrossDirectories: user code moves a file from one of its
// directories to another, in /tmp and in the workspace, as rustc does
// with its metadata (Landlock refused it with EXDEV while a separate
// scope-only layer denied every move), and signals to the agent stay
// refused (the one Landlock layer still scopes them).
func TestRenameAcrossDirectories(t *testing.T) {
	needLanguage(t, "python")
	sb := newSandbox(t, newBackend(t), native.Spec{})
	var stdout, stderr bytes.Buffer
	src := `
import errno, os, signal
def probe(name, f, *a):
    try:
        f(*a)
        print(name, "ok")
    except OSError as e:
        print(name, errno.errorcode[e.errno])
for top in ("/tmp", "/workspace"):
    os.makedirs(top + "/a/b")
    open(top + "/a/b/f", "w").close()
    probe("rename in " + top, os.rename, top + "/a/b/f", top + "/a/f")
probe("kill 1", os.kill, 1, signal.SIGTERM)
`
	info, err := sb.Agent.Exec(context.Background(), protocol.Exec{Argv: []string{"/usr/bin/python3", "-c", src}, TimeoutMs: 30_000, OutputBytes: 1 << 20}, &stdout, &stderr)
	want := "rename in /tmp ok\nrename in /workspace ok\nkill 1 EPERM\n"
	if err != nil || info.Code != 0 || stdout.String() != want {
		t.Errorf("got %q (stderr %q, exit %+v, %v); want %q", stdout.String(), stderr.String(), info, err, want)
	}
}
