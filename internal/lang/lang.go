// Package lang is the table of languages kiln runs: how each is named, which
// host binary runs it and how a program file becomes an argv.
package lang

import (
	"context"
	"os"
	"os/exec"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/kiln-dev/kiln/internal/kiln"
)

// Kind says how a language keeps state between cells.
type Kind string

const (
	// REPL languages have a kernel that keeps state between cells.
	REPL Kind = "repl"
	// Program languages run each cell as a whole program (compiled first
	// where needed); the workspace is the state.
	Program Kind = "program"
)

// Language is one entry of the table.
type Language struct {
	Name    string   // canonical name
	Aliases []string // other names a user may type
	Kind    Kind
	Ext     string   // file extension of a program, with the dot
	Binary  string   // absolute path on the host; must lie in the sandbox's read-only root
	Args    []string // argv before the program file, for a one-shot run of a script
	Env     []string // extra environment for programs
	Version []string // argv that prints the version (run with Binary unless it starts with "/")
	Package string   // what to install when Binary is missing
}

// Argv is the command line that runs the program file.
func (l *Language) Argv(file string) []string {
	return append(append([]string{l.Binary}, l.Args...), file)
}

// table lists every language; keep it sorted by name.
var table = []Language{
	{
		Name: "bash", Aliases: []string{"sh", "shell"}, Kind: REPL, Ext: ".sh",
		Binary: "/usr/bin/bash", Version: []string{"--version"}, Package: "the Debian package bash",
	},
	{
		Name: "c", Kind: Program, Ext: ".c",
		Binary: "/usr/bin/gcc", Version: []string{"--version"}, Package: "the Debian package gcc",
	},
	{
		Name: "cpp", Aliases: []string{"c++", "cxx"}, Kind: Program, Ext: ".cpp",
		Binary: "/usr/bin/g++", Version: []string{"--version"}, Package: "the Debian package g++",
	},
	{
		Name: "fortran", Aliases: []string{"f90", "gfortran"}, Kind: Program, Ext: ".f90",
		Binary: "/usr/bin/gfortran", Version: []string{"--version"}, Package: "the Debian package gfortran",
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
		Name: "javascript", Aliases: []string{"js", "node", "nodejs"}, Kind: REPL, Ext: ".js",
		Binary: "/usr/bin/node", Version: []string{"--version"}, Package: "the Debian package nodejs",
	},
	{
		Name: "php", Kind: Program, Ext: ".php",
		Binary: "/usr/bin/php", Version: []string{"--version"}, Package: "the Debian package php-cli",
	},
	{
		Name: "python", Aliases: []string{"python3", "py"}, Kind: REPL, Ext: ".py",
		Binary: "/usr/bin/python3", Version: []string{"--version"}, Package: "the Debian package python3",
		Env: []string{"PYTHONUNBUFFERED=1", "PYTHONDONTWRITEBYTECODE=1", "MPLBACKEND=Agg", "MPLCONFIGDIR=/tmp/matplotlib"},
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
	},
	{
		Name: "typescript", Aliases: []string{"ts"}, Kind: REPL, Ext: ".ts",
		Binary:  "/usr/local/lib/node_modules/typescript/bin/tsc",
		Version: []string{"/usr/bin/node", "/usr/local/lib/node_modules/typescript/bin/tsc", "--version"},
		Package: "the TypeScript compiler (npm install -g --prefix /usr/local typescript)",
	},
}

// oneShot lists the languages `kiln run` runs today, as a script file.
var oneShot = map[string]bool{"bash": true, "javascript": true, "python": true}

// OneShot reports whether a language can run a script file directly
// (Argv); the others need a kernel.
func (l *Language) OneShot() bool { return oneShot[l.Name] }

// All returns every language, sorted by name.
func All() []Language { return append([]Language(nil), table...) }

// Names returns the canonical names, sorted.
func Names() []string {
	var names []string
	for _, l := range table {
		names = append(names, l.Name)
	}
	sort.Strings(names)
	return names
}

// Lookup finds a language by name or alias, case-insensitively.
func Lookup(name string) (*Language, error) {
	n := strings.ToLower(strings.TrimSpace(name))
	for i := range table {
		l := &table[i]
		if l.Name == n {
			return l, nil
		}
		for _, a := range l.Aliases {
			if a == n {
				return l, nil
			}
		}
	}
	if n == "" {
		return nil, kiln.Errorf(kiln.Invalid, "no language given; supported languages: %s", strings.Join(Names(), ", "))
	}
	return nil, kiln.Errorf(kiln.Invalid, "unknown language %q; supported languages: %s", name, strings.Join(Names(), ", "))
}

// ByExt finds a language by a file name's extension.
func ByExt(file string) (*Language, error) {
	for i := range table {
		if strings.HasSuffix(strings.ToLower(file), table[i].Ext) {
			return &table[i], nil
		}
	}
	return nil, kiln.Errorf(kiln.Invalid, "cannot tell the language of %q from its extension; give --lang (one of %s)", file, strings.Join(Names(), ", "))
}

// Available reports whether the runtime is installed, with an error that
// says what to install when it is not.
func (l *Language) Available() error {
	fi, err := os.Stat(l.Binary)
	if err != nil || fi.IsDir() || fi.Mode()&0o111 == 0 {
		return kiln.Errorf(kiln.Unsupported, "the %s runtime is not installed on this host: %s is missing (install %s)", l.Name, l.Binary, l.Package)
	}
	return nil
}

// DetectVersion runs the runtime's version command on the host.
func (l *Language) DetectVersion(ctx context.Context) (string, error) {
	if err := l.Available(); err != nil {
		return "", err
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	argv := append([]string{l.Binary}, l.Version...)
	if strings.HasPrefix(l.Version[0], "/") {
		argv = l.Version
	}
	out, err := exec.CommandContext(ctx, argv[0], argv[1:]...).CombinedOutput()
	if err != nil {
		return "", err
	}
	line, _, _ := strings.Cut(strings.TrimSpace(string(out)), "\n")
	return line, nil
}

// Info is what Detect found out about one language on this host.
type Info struct {
	Language
	Found   bool   // the runtime is installed
	Version string // what its version command printed (first line)
	Problem string // when not found: what is missing and what to install
}

// Detect reports every language, whether its runtime is installed on this
// host, and its version. The version commands run in parallel.
func Detect(ctx context.Context) []Info {
	all := All()
	out := make([]Info, len(all))
	var wg sync.WaitGroup
	for i := range all {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l := &all[i]
			info := Info{Language: *l}
			if v, err := l.DetectVersion(ctx); err != nil {
				info.Problem = err.Error()
			} else {
				info.Found, info.Version = true, v
			}
			out[i] = info
		}()
	}
	wg.Wait()
	return out
}
