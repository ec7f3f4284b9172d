// Package langdef is what one language is (Language): its names, kind,
// runtime, extensions, version probe, and how it runs, a kernel (package
// kernels) or a toolchain (package programs). It lies below both the
// registry (package lang, which lists the languages) and programs (which
// builds them), so that a registry entry can hold its toolchain: adding a
// language is one entry in internal/lang/registry.go.
package langdef

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/kiln-dev/kiln/internal/kernels"
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

// Toolchain is how a program language is built and run. Its one
// implementation is package programs' (programs.C, programs.Go, ...), which
// reads it back from the entry; this package only holds it.
type Toolchain interface {
	// Problems lists, as sentences, what the toolchain lacks to build and
	// run l's programs; none for a complete one.
	Problems(l *Language) []string
}

// Language is one entry of the registry: everything kiln knows about a
// language. Check says what an entry lacks.
type Language struct {
	Name      string   // canonical name
	Aliases   []string // other names a user may type
	Kind      Kind
	Ext       string   // extension of a program file (main<Ext>), with the dot
	OtherExts []string // other extensions of its source files (case-sensitive, as the compiler reads them)
	Binary    string   // absolute path on the host; must lie in the sandbox's read-only root
	// RunsOneShot: a file of it runs as a script, with no build: its
	// kernel runs a one-shot run's cell with the program's arguments, and
	// engine.Run (kiln bench's bare path) runs Binary Args file (Argv).
	RunsOneShot bool
	Args        []string // argv before the program file, for a one-shot run
	Env         []string // extra environment for its programs and its kernel
	Version     []string // argv that prints the version (run with Binary unless it starts with "/")
	Package     string   // what to install when Binary is missing
	// Kernel says how to start a REPL language's kernel (a function of
	// package kernels).
	Kernel func() kernels.Spec
	// Toolchain says how to build and run a program language's files (a
	// value of package programs). REPL languages have none.
	Toolchain Toolchain
}

// Argv is the command line that runs the program file.
func (l *Language) Argv(file string) []string {
	return append(append([]string{l.Binary}, l.Args...), file)
}

// Exts is every extension of the language's source files, Ext first.
func (l *Language) Exts() []string {
	return append([]string{l.Ext}, l.OtherExts...)
}

// OneShot reports whether a language can run a script file directly
// (Argv); the others need a kernel or a build.
func (l *Language) OneShot() bool { return l.RunsOneShot }

// KernelSpec is how to start the language's REPL kernel, and false for a
// language that has none.
func (l *Language) KernelSpec() (kernels.Spec, bool) {
	if l.Kernel == nil {
		return kernels.Spec{}, false
	}
	return l.Kernel(), true
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

// Check lists what the entry lacks or gets wrong, as sentences; none for a
// complete entry.
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
		if l.Toolchain != nil {
			add("a REPL language has a kernel, not a toolchain")
		}
	case Program:
		if l.Kernel != nil {
			add("a program language has a toolchain, not a kernel")
		}
		if l.Toolchain == nil {
			add("a program language needs a toolchain")
		} else {
			p = append(p, l.Toolchain.Problems(l)...)
		}
		if l.RunsOneShot {
			add("a program language is built before it runs, so it cannot run one-shot")
		}
	default:
		add("kind %q is neither %q nor %q", l.Kind, REPL, Program)
	}
	return p
}
