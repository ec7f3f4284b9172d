package lang

import (
	"fmt"

	"github.com/kiln-dev/kiln/internal/kernels"
	"github.com/kiln-dev/kiln/internal/programs"
)

// table is the registry: every language kiln runs, one entry each, sorted
// by name. A REPL language names its kernel (package kernels), a program
// language its toolchain (package programs). Check lists what an entry
// lacks; TestRegistryComplete runs it.
var table = []Language{
	{
		Name: "bash", Aliases: []string{"sh", "shell"}, Kind: REPL, Ext: ".sh", RunsOneShot: true,
		Binary: "/usr/bin/bash", Version: []string{"--version"}, Package: "the Debian package bash",
		Kernel: kernels.Bash,
	},
	{
		Name: "c", Kind: Program, Ext: ".c",
		Binary: "/usr/bin/gcc", Version: []string{"--version"}, Package: "the Debian package gcc",
		Toolchain: programs.C,
	},
	{
		Name: "cpp", Aliases: []string{"c++", "cxx"}, Kind: Program, Ext: ".cpp", OtherExts: []string{".cc", ".cxx", ".c++", ".C"},
		Binary: "/usr/bin/g++", Version: []string{"--version"}, Package: "the Debian package g++",
		Toolchain: programs.CPP,
	},
	{
		Name: "fortran", Aliases: []string{"f90", "gfortran"}, Kind: Program, Ext: ".f90",
		OtherExts: []string{".f95", ".f03", ".f08", ".f", ".for", ".F90", ".F95", ".F03", ".F08", ".F"},
		Binary:    "/usr/bin/gfortran", Version: []string{"--version"}, Package: "the Debian package gfortran",
		Toolchain: programs.Fortran,
	},
	{
		Name: "go", Aliases: []string{"golang"}, Kind: Program, Ext: ".go",
		Binary: "/usr/local/go/bin/go", Version: []string{"version"}, Package: "Go in /usr/local/go",
		Toolchain: programs.Go,
	},
	{
		Name: "java", Kind: Program, Ext: ".java",
		Binary: "/usr/bin/javac", Version: []string{"-version"}, Package: "the Debian package openjdk-17-jdk-headless",
		Toolchain: programs.Java,
	},
	{
		Name: "javascript", Aliases: []string{"js", "node", "nodejs"}, Kind: REPL, Ext: ".js", RunsOneShot: true,
		Binary: "/usr/bin/node", Version: []string{"--version"}, Package: "the Debian package nodejs",
		Kernel: kernels.JavaScript,
	},
	{
		Name: "php", Kind: Program, Ext: ".php",
		Binary: "/usr/bin/php", Version: []string{"--version"}, Package: "the Debian package php-cli",
		Toolchain: programs.PHP,
	},
	{
		Name: "postgres", Aliases: []string{"postgresql", "pg"}, Kind: REPL, Ext: ".pgsql",
		Binary: "/usr/lib/postgresql/15/bin/postgres",
		// The kernel needs the driver too: a host without it fails the probe.
		Version: []string{"/usr/bin/python3", "-c", "import re, subprocess, sys; sys.path.append('/usr/lib/python3/dist-packages'); import psycopg2; " +
			"v = subprocess.run(['/usr/lib/postgresql/15/bin/postgres', '--version'], capture_output=True, text=True).stdout; " +
			"print('PostgreSQL', re.search(r'[0-9]+[.][0-9]+', v).group(0), 'with psycopg2', psycopg2.__version__.split()[0])"},
		Package: "the Debian packages postgresql-15 and python3-psycopg2",
		Kernel:  kernels.Postgres,
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
		Toolchain: programs.Ruby,
	},
	{
		Name: "rust", Aliases: []string{"rs"}, Kind: Program, Ext: ".rs",
		Binary: "/usr/bin/rustc", Version: []string{"--version"}, Package: "the Debian package rustc",
		Toolchain: programs.Rust,
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
