package lang

import (
	"fmt"
	"strings"

	"github.com/kiln-dev/kiln/internal/kernels"
)

// table is the registry: every language kiln runs, one entry each, sorted
// by name. Check lists what an entry lacks; TestRegistryComplete runs it.
var table = []Language{
	{
		Name: "bash", Aliases: []string{"sh", "shell"}, Kind: REPL, Ext: ".sh", RunsOneShot: true,
		Binary: "/usr/bin/bash", Version: []string{"--version"}, Package: "the Debian package bash",
		Kernel: kernels.Bash,
	},
	{
		Name: "c", Kind: Program, Ext: ".c",
		Binary: "/usr/bin/gcc", Version: []string{"--version"}, Package: "the Debian package gcc",
	},
	{
		Name: "cpp", Aliases: []string{"c++", "cxx"}, Kind: Program, Ext: ".cpp", OtherExts: []string{".cc", ".cxx", ".c++", ".C"},
		Binary: "/usr/bin/g++", Version: []string{"--version"}, Package: "the Debian package g++",
	},
	{
		Name: "fortran", Aliases: []string{"f90", "gfortran"}, Kind: Program, Ext: ".f90",
		OtherExts: []string{".f95", ".f03", ".f08", ".f", ".for", ".F90", ".F95", ".F03", ".F08", ".F"},
		Binary:    "/usr/bin/gfortran", Version: []string{"--version"}, Package: "the Debian package gfortran",
	},
	{
		Name: "go", Aliases: []string{"golang"}, Kind: Program, Ext: ".go",
		Binary: "/usr/local/go/bin/go", Version: []string{"version"}, Package: "Go in /usr/local/go",
	},
	{
		Name: "java", Kind: Program, Ext: ".java",
		Binary: "/usr/bin/javac", Version: []string{"-version"}, Package: "the Debian package openjdk-17-jdk-headless",
	},
	{
		Name: "javascript", Aliases: []string{"js", "node", "nodejs"}, Kind: REPL, Ext: ".js", RunsOneShot: true,
		Binary: "/usr/bin/node", Version: []string{"--version"}, Package: "the Debian package nodejs",
		Kernel: kernels.JavaScript,
	},
	{
		Name: "php", Kind: Program, Ext: ".php",
		Binary: "/usr/bin/php", Version: []string{"--version"}, Package: "the Debian package php-cli",
	},
	{
		Name: "python", Aliases: []string{"python3", "py"}, Kind: REPL, Ext: ".py", RunsOneShot: true,
		Binary: "/usr/bin/python3", Version: []string{"--version"}, Package: "the Debian package python3",
		Env:    []string{"PYTHONUNBUFFERED=1", "PYTHONDONTWRITEBYTECODE=1", "MPLBACKEND=Agg", "MPLCONFIGDIR=/tmp/matplotlib"},
		Kernel: kernels.Python,
	},
	{
		Name: "ruby", Aliases: []string{"rb"}, Kind: Program, Ext: ".rb",
		Binary: "/usr/bin/ruby", Version: []string{"--version"}, Package: "the Debian package ruby",
	},
	{
		Name: "rust", Aliases: []string{"rs"}, Kind: Program, Ext: ".rs",
		Binary: "/usr/bin/rustc", Version: []string{"--version"}, Package: "the Debian package rustc",
	},
	{
		Name: "sql", Aliases: []string{"sqlite"}, Kind: REPL, Ext: ".sql",
		Binary:  "/usr/bin/python3",
		Version: []string{"-c", "import sqlite3; print('SQLite', sqlite3.sqlite_version)"},
		Package: "the Debian package python3 (its sqlite3 module)",
		Kernel:  kernels.SQL,
	},
	{
		Name: "typescript", Aliases: []string{"ts"}, Kind: REPL, Ext: ".ts",
		Binary:  "/usr/local/lib/node_modules/typescript/bin/tsc",
		Version: []string{"/usr/bin/node", "/usr/local/lib/node_modules/typescript/bin/tsc", "--version"},
		Package: "the TypeScript compiler (npm install -g --prefix /usr/local typescript)",
		Kernel:  kernels.TypeScript,
	},
}

// Check lists what the entry lacks or gets wrong, as sentences; none for a
// complete entry. A program language's toolchain is package programs' to
// check (it imports lang, so lang cannot see it).
func (l *Language) Check() []string {
	var p []string
	add := func(format string, a ...any) { p = append(p, fmt.Sprintf(format, a...)) }
	if l.Name == "" || l.Name != strings.ToLower(strings.TrimSpace(l.Name)) {
		add("name %q must be lower case, without spaces around it", l.Name)
	}
	for _, ext := range l.Exts() {
		if len(ext) < 2 || ext[0] != '.' || strings.ContainsAny(ext[1:], "./ ") {
			add("extension %q must be a dot and a name", ext)
		}
	}
	if !strings.HasPrefix(l.Binary, "/") {
		add("binary %q must be an absolute path", l.Binary)
	}
	if len(l.Version) == 0 {
		add("no version probe")
	}
	if l.Package == "" {
		add("no install hint (Package)")
	}
	switch l.Kind {
	case REPL:
		if l.Kernel == nil {
			add("a REPL language needs a kernel")
		} else if spec := l.Kernel(); spec.Language != l.Name || len(spec.Argv) == 0 || !strings.HasPrefix(spec.Argv[0], "/") {
			add("its kernel says language %q and argv %.40q; want %q and an absolute runtime", spec.Language, spec.Argv, l.Name)
		}
	case Program:
		if l.Kernel != nil {
			add("a program language has a toolchain, not a kernel")
		}
		if l.RunsOneShot {
			add("a program language is built before it runs, so it cannot run one-shot")
		}
	default:
		add("kind %q is neither %q nor %q", l.Kind, REPL, Program)
	}
	return p
}

// checkRegistry lists the problems of a registry: each entry's, and names,
// aliases or extensions that two entries claim.
func checkRegistry(langs []Language) []string {
	var p []string
	names, exts := map[string]string{}, map[string]string{}
	for i := range langs {
		l := &langs[i]
		for _, s := range l.Check() {
			p = append(p, l.Name+": "+s)
		}
		if i > 0 && langs[i-1].Name >= l.Name {
			p = append(p, fmt.Sprintf("%s: the registry must stay sorted by name (after %s)", l.Name, langs[i-1].Name))
		}
		for _, n := range append([]string{l.Name}, l.Aliases...) {
			if other, ok := names[n]; ok {
				p = append(p, fmt.Sprintf("%s: the name %q is %s's too", l.Name, n, other))
			}
			names[n] = l.Name
		}
		for _, e := range l.Exts() {
			if other, ok := exts[e]; ok {
				p = append(p, fmt.Sprintf("%s: the extension %q is %s's too", l.Name, e, other))
			}
			exts[e] = l.Name
		}
	}
	return p
}
