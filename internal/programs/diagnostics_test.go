package programs

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/kiln-dev/kiln/internal/kiln"
)

// The logs are real output of the compilers kiln runs.
func TestParsers(t *testing.T) {
	for _, tc := range []struct {
		name  string
		parse func(string) []kiln.Diagnostic
		log   string
		want  []kiln.Diagnostic
	}{
		{"gcc", parseGCC, `main.c: In function ‘main’:
main.c:3:11: warning: initialization of ‘int’ from ‘char *’ makes integer from pointer without a cast [-Wint-conversion]
    3 |   int x = "a";
      |           ^~~
main.c:4:10: error: ‘y’ undeclared (first use in this function)
    4 |   return y;
      |          ^
main.c:4:10: note: each undeclared identifier is reported only once for each function it appears in
`, []kiln.Diagnostic{
			{File: "main.c", Line: 3, Column: 11, Severity: "warning", Message: "initialization of ‘int’ from ‘char *’ makes integer from pointer without a cast [-Wint-conversion]"},
			{File: "main.c", Line: 4, Column: 10, Severity: "error", Message: "‘y’ undeclared (first use in this function)"},
		}},
		{"gcc fatal", parseGCC, "main.c:1:10: fatal error: nope.h: No such file or directory\n    1 | #include \"nope.h\"\n      |          ^~~~~~~~\ncompilation terminated.\n",
			[]kiln.Diagnostic{{File: "main.c", Line: 1, Column: 10, Severity: "error", Message: "nope.h: No such file or directory"}}},
		{"ld", parseGCC, "/usr/bin/ld: /tmp/ccV17ndf.o: in function `main':\nmain.c:(.text.startup+0x1): undefined reference to `foo'\ncollect2: error: ld returned 1 exit status\n",
			[]kiln.Diagnostic{{File: "main.c", Severity: "error", Message: "undefined reference to `foo'"}}},
		{"gfortran", parseGCC, `main.f90:3:9:

    3 |   x = 1 +
      |         1
Error: Syntax error in expression at (1)
main.f90:5:7:

    5 |   use nosuch
      |       1
Fatal Error: Cannot open module file ‘nosuch.mod’ for reading at (1): No such file or directory
compilation terminated.
`, []kiln.Diagnostic{
			{File: "main.f90", Line: 3, Column: 9, Severity: "error", Message: "Syntax error in expression at (1)"},
			{File: "main.f90", Line: 5, Column: 7, Severity: "error", Message: "Cannot open module file ‘nosuch.mod’ for reading at (1): No such file or directory"},
		}},
		{"go", parseGo, "# main\n./main.go:8:23: cannot use T{} (value of struct type T) as fmt.Stringer value in variable declaration: T does not implement fmt.Stringer (missing method String)\n./main.go:10:6: declared and not used: i\ntwice/twice.go:3:1: syntax error: non-declaration statement outside function body\n",
			[]kiln.Diagnostic{
				{File: "main.go", Line: 8, Column: 23, Severity: "error", Message: "cannot use T{} (value of struct type T) as fmt.Stringer value in variable declaration: T does not implement fmt.Stringer (missing method String)"},
				{File: "main.go", Line: 10, Column: 6, Severity: "error", Message: "declared and not used: i"},
				{File: "twice/twice.go", Line: 3, Column: 1, Severity: "error", Message: "syntax error: non-declaration statement outside function body"},
			}},
		{"go continued", parseGo, "./main.go:6:7: cannot use x (variable of type T) as I value in assignment: T does not implement I (wrong type for method M)\n\t\thave M() int\n\t\twant M() string\n",
			[]kiln.Diagnostic{{File: "main.go", Line: 6, Column: 7, Severity: "error", Message: "cannot use x (variable of type T) as I value in assignment: T does not implement I (wrong type for method M)\nhave M() int\nwant M() string"}}},
		{"javac", parseJavac, "Main.java:3: error: cannot find symbol\n\tint x = foo();\n\t        ^\n  symbol:   method foo()\n  location: class Main\nMain.java:4: error: incompatible types: int cannot be converted to String\n        String s = 1;\n                   ^\n2 errors\n",
			[]kiln.Diagnostic{
				{File: "Main.java", Line: 3, Column: 10, Severity: "error", Message: "cannot find symbol\nsymbol:   method foo()\nlocation: class Main"},
				{File: "Main.java", Line: 4, Column: 20, Severity: "error", Message: "incompatible types: int cannot be converted to String"},
			}},
		{"rustc", parseRustc, "error: expected `;`, found `undefined_fn`\n --> main.rs:3:33\n  |\n3 |     let v: Vec<i32> = Vec::new()\n  |                                 ^ help: add `;` here\n\nerror[E0425]: cannot find function `undefined_fn` in this scope\n --> main.rs:4:5\n  |\n4 |     undefined_fn();\n  |     ^^^^^^^^^^^^ not found in this scope\n\nwarning: unused variable: `x`\n --> main.rs:2:9\n\nerror: aborting due to 2 previous errors; 1 warning emitted\n\nFor more information about this error, try `rustc --explain E0425`.\n",
			[]kiln.Diagnostic{
				{File: "main.rs", Line: 3, Column: 33, Severity: "error", Message: "expected `;`, found `undefined_fn`"},
				{File: "main.rs", Line: 4, Column: 5, Severity: "error", Message: "cannot find function `undefined_fn` in this scope [E0425]"},
				{File: "main.rs", Line: 2, Column: 9, Severity: "warning", Message: "unused variable: `x`"},
			}},
		{"rustc link", parseRustc, "error: linking with `cc` failed: exit status: 1\n  |\n  = note: ...\n\nerror: aborting due to previous error\n",
			[]kiln.Diagnostic{{Severity: "error", Message: "linking with `cc` failed: exit status: 1"}}},
		{"php", parsePHP, "\nParse error: syntax error, unexpected token \"}\", expecting \";\" in main.php on line 4\nErrors parsing main.php\n",
			[]kiln.Diagnostic{{File: "main.php", Line: 4, Severity: "error", Message: "syntax error, unexpected token \"}\", expecting \";\""}}},
		{"php logged", parsePHP, "PHP Parse error:  syntax error, unexpected variable \"$x\" in /workspace/main.php on line 3\nPHP Deprecated:  Optional parameter $a declared before required parameter $b in main.php on line 2\n",
			[]kiln.Diagnostic{
				{File: "/workspace/main.php", Line: 3, Severity: "error", Message: "syntax error, unexpected variable \"$x\""},
				{File: "main.php", Line: 2, Severity: "warning", Message: "Optional parameter $a declared before required parameter $b"},
			}},
		{"ruby", parseRuby, "main.rb:2: syntax error, unexpected integer literal, expecting ')'\nmain.rb:2: warning: possibly useless use of a literal in void context\n",
			[]kiln.Diagnostic{
				{File: "main.rb", Line: 2, Severity: "error", Message: "syntax error, unexpected integer literal, expecting ')'"},
				{File: "main.rb", Line: 2, Severity: "warning", Message: "possibly useless use of a literal in void context"},
			}},
		{"ruby caret", parseRuby, "main.rb:1: syntax error, unexpected ')'\nputs(1 +)\n        ^\n",
			[]kiln.Diagnostic{{File: "main.rb", Line: 1, Column: 9, Severity: "error", Message: "syntax error, unexpected ')'"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, tc.parse(tc.log)); diff != "" {
				t.Errorf("diagnostics (-want +got):\n%s", diff)
			}
		})
	}
}

// FuzzParsers: no output makes a parser fail or make nonsense.
func FuzzParsers(f *testing.F) {
	for _, s := range []string{
		"main.c:4:10: error: x", "main.f90:3:9:\n\nError: y", "./main.go:1:2: z\n\tmore",
		"Main.java:3: error: a\n x\n ^\n  symbol: b", "error[E1]: a\n --> main.rs:1:2", "Parse error: a in b on line 3",
		"main.rb:2: warning: w\nx\n  ^~~",
	} {
		f.Add(s)
	}
	parsers := []func(string) []kiln.Diagnostic{parseGCC, parseGo, parseJavac, parseRustc, parsePHP, parseRuby}
	f.Fuzz(func(t *testing.T, log string) {
		for _, parse := range parsers {
			for _, d := range parse(log) {
				if d.Line < 0 || d.Column < 0 || (d.Severity != "error" && d.Severity != "warning") || strings.Contains(d.File, "\n") {
					t.Errorf("parsed %q into %+v", log, d)
				}
			}
		}
	})
}

func TestFortranOrder(t *testing.T) {
	contents := map[string][]byte{
		"a.f90":    []byte("module a_mod\n  use :: b_mod\n  use, intrinsic :: iso_fortran_env\nend module a_mod\n"),
		"b.f90":    []byte("module B_Mod ! the base\n  interface\n    module procedure p\n  end interface\nend module\n"),
		"c.f90":    []byte("module c_mod\n  use c_mod\nend module\n"),
		"main.f90": []byte("program main\n  USE A_MOD\n  use c_mod\nend program\n"),
	}
	got := fortranOrder([]string{"a.f90", "b.f90", "c.f90", "main.f90"}, contents)
	if want := []string{"b.f90", "a.f90", "c.f90", "main.f90"}; !cmp.Equal(got, want) {
		t.Errorf("fortranOrder = %v, want %v", got, want)
	}
}
