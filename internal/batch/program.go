package batch

import (
	"path"
	"regexp"
	"strings"

	"github.com/kiln-dev/kiln/internal/lang"
)

// Program is what an item runs: Code under Name (empty: the language's
// default) after Files are written into the workspace, as its tests when
// Test is set (engine.Run's fields of the same names).
type Program struct {
	Code  string
	Name  string
	Files []File
	Test  bool
}

// ProgramOf joins an item's solution and its test program (Check.Test)
// the way HumanEval-X and SandboxFusion run them:
//   - Python, JavaScript, TypeScript: the test after the solution, in the
//     same kernel;
//   - C and C++: one file, the test after the solution; the test has main
//     (assert-style) and the solution has none;
//   - Rust: one file, the test after the solution (a #[cfg(test)] module
//     with #[test] functions runs with rustc --test; else the test's main
//     runs);
//   - Java: one file, the test after the solution, the test's imports
//     moved to the top; when the test declares a public class, the
//     solution's top-level public types lose "public" (one public class a
//     file). A test with @Test methods runs with JUnit, else its main runs;
//   - Go: two files of one package, the solution (main.go, or the item's
//     file_name) and the test beside it as its _test.go, run with go test;
//     either gets the other's package clause (default package main) when
//     it has none.
//
// An item without a test runs its code as it is.
func ProgramOf(it Item) Program {
	p := Program{Code: it.Code, Name: it.FileName, Files: it.Files}
	if it.Check.Test == "" {
		return p
	}
	name := it.Language
	if l, err := lang.Lookup(it.Language); err == nil {
		name = l.Name
	}
	if join := joined[name]; join != nil {
		return join(p, it.Check.Test)
	}
	// A kernel runs the test after the solution. A blank line and a
	// newline keep them apart whatever the solution ends with.
	p.Code = strings.TrimRight(it.Code, "\n") + "\n\n" + it.Check.Test
	return p
}

// joined are the compiled languages' ways of adding a test program.
var joined = map[string]func(p Program, test string) Program{
	"c":   appendTest,
	"cpp": appendTest,
	"rust": func(p Program, test string) Program {
		p = appendTest(p, test)
		p.Test = rustTestAttr.MatchString(test)
		return p
	},
	"java": javaWithTest,
	"go":   goWithTest,
}

var (
	rustTestAttr  = regexp.MustCompile(`#\[\s*test\s*\]`)
	javaTestAnno  = regexp.MustCompile(`@(?:org\.junit\.(?:jupiter\.api\.)?)?Test\b`)
	javaImport    = regexp.MustCompile(`^\s*import\s+(?:static\s+)?[\w.]+(?:\.\*)?\s*;\s*$`)
	javaPackage   = regexp.MustCompile(`(?m)^\s*package\s+[\w.]+\s*;[^\n]*\n?`)
	javaPublicTop = regexp.MustCompile(`(?m)^public\s+((?:(?:final|abstract|sealed|non-sealed|strictfp)\s+)*(?:class|interface|enum|record)\b)`)
	goPackage     = regexp.MustCompile(`(?m)^package\s+(\w+)`)
)

// appendTest puts the test after the solution in one file.
func appendTest(p Program, test string) Program {
	p.Code = strings.TrimRight(p.Code, "\n") + "\n\n" + test
	return p
}

// javaWithTest joins a Java solution and its test in one file.
func javaWithTest(p Program, test string) Program {
	// The test's leading imports (and the comments and blank lines among
	// them) go where imports may be: after the solution's package clause.
	lines := strings.SplitAfter(test, "\n")
	n := 0
	for n < len(lines) {
		l := strings.TrimSpace(lines[n])
		if l != "" && !strings.HasPrefix(l, "//") && !javaImport.MatchString(lines[n]) {
			break
		}
		n++
	}
	imports, rest := strings.Join(lines[:n], ""), strings.Join(lines[n:], "")
	sol := p.Code
	if javaPublicTop.MatchString(rest) {
		sol = javaPublicTop.ReplaceAllString(sol, "$1")
	}
	head := ""
	if loc := javaPackage.FindStringIndex(sol); loc != nil {
		head, sol = sol[:loc[1]], sol[loc[1]:]
		if !strings.HasSuffix(head, "\n") {
			head += "\n"
		}
	}
	if imports != "" && !strings.HasSuffix(imports, "\n") {
		imports += "\n"
	}
	p.Code = head + imports + strings.TrimRight(sol, "\n") + "\n\n" + rest
	p.Test = javaTestAnno.MatchString(rest)
	return p
}

// goWithTest puts a Go solution and its test in two files of one package.
func goWithTest(p Program, test string) Program {
	sol, testName := p.Name, ""
	if strings.HasSuffix(sol, "_test.go") {
		sol, testName = path.Join(path.Dir(sol), "main.go"), sol
	}
	if sol == "" {
		sol = "main.go"
	}
	if testName == "" {
		testName = strings.TrimSuffix(sol, ".go") + "_test.go"
	}
	pkg := "main"
	if m := goPackage.FindStringSubmatch(p.Code); m != nil {
		pkg = m[1]
	} else if m := goPackage.FindStringSubmatch(test); m != nil {
		pkg = m[1]
	}
	withPackage := func(src string) string {
		if goPackage.MatchString(src) {
			return src
		}
		return "package " + pkg + "\n\n" + src
	}
	p.Files = append(append([]File(nil), p.Files...), File{Path: sol, Content: []byte(withPackage(p.Code))})
	p.Code, p.Name, p.Test = withPackage(test), testName, true
	return p
}
