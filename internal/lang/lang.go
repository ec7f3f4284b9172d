// Package lang is the table of languages kiln runs: how each is named, which
// host binary runs it and how a program file becomes an argv.
package lang

import (
	"context"
	"os"
	"os/exec"
	"sort"
	"strings"
	"time"

	"github.com/kiln-dev/kiln/internal/kiln"
)

// Language is one entry of the table.
type Language struct {
	Name    string   // canonical name
	Aliases []string // other names a user may type
	Ext     string   // file extension of a program, with the dot
	Binary  string   // absolute path on the host; must lie in the sandbox's read-only root
	Args    []string // argv before the program file
	Env     []string // extra environment for programs
	Version []string // argv that prints the version
	Package string   // Debian package that provides Binary
}

// Argv is the command line that runs the program file.
func (l *Language) Argv(file string) []string {
	return append(append([]string{l.Binary}, l.Args...), file)
}

// table lists every language; keep it sorted by name.
var table = []Language{
	{
		Name: "bash", Aliases: []string{"sh", "shell"}, Ext: ".sh",
		Binary: "/usr/bin/bash", Version: []string{"--version"}, Package: "bash",
	},
	{
		Name: "javascript", Aliases: []string{"js", "node", "nodejs"}, Ext: ".js",
		Binary: "/usr/bin/node", Version: []string{"--version"}, Package: "nodejs",
	},
	{
		Name: "python", Aliases: []string{"python3", "py"}, Ext: ".py",
		Binary: "/usr/bin/python3", Version: []string{"--version"}, Package: "python3",
		Env: []string{"PYTHONUNBUFFERED=1", "PYTHONDONTWRITEBYTECODE=1"},
	},
}

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
		return kiln.Errorf(kiln.Unsupported, "the %s runtime is not installed on this host: %s is missing (install the Debian package %q)", l.Name, l.Binary, l.Package)
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
	out, err := exec.CommandContext(ctx, l.Binary, l.Version...).CombinedOutput()
	if err != nil {
		return "", err
	}
	line, _, _ := strings.Cut(strings.TrimSpace(string(out)), "\n")
	return line, nil
}
