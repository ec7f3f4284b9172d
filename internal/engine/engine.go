// Package engine runs code: it picks the language, makes a sandbox, puts
// the program and its files in, runs it with the limits asked for, streams
// the output and destroys the sandbox. The CLI, the security suite and
// (later) the service all run code through it.
package engine

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/kiln-dev/kiln/internal/agentclient"
	"github.com/kiln-dev/kiln/internal/backend"
	"github.com/kiln-dev/kiln/internal/kiln"
	"github.com/kiln-dev/kiln/internal/lang"
	"github.com/kiln-dev/kiln/internal/programs"
	"github.com/kiln-dev/kiln/internal/protocol"
)

// Bounds on what a run may bring in.
const (
	MaxCodeBytes  = 1 << 20  // the program itself
	MaxFilesBytes = 64 << 20 // every file copied in, together
	MaxFiles      = 1000
	MaxStdinBytes = 16 << 20
	MaxArgs       = 1024
)

// Backend makes sandboxes for the engine. The native backend
// (backend/native) is the one kiln serves with; backend/unboxed runs the
// agent without isolation, for tests. Every backend passes the
// conformance suite in backend/backendtest.
type Backend interface {
	// CreateSandbox starts a sandbox and returns once its agent answers.
	CreateSandbox(ctx context.Context, spec backend.Spec) (backend.Sandbox, error)
	// Connect returns the client of the sandbox's agent.
	Connect(ctx context.Context, id string) (*agentclient.Client, error)
	// DestroySandbox kills everything in the sandbox and removes every
	// trace of it; destroying one that is gone is not an error.
	DestroySandbox(ctx context.Context, id string) error
	// List returns the sandboxes this backend made that still exist, so
	// that an owner can reap what it lost track of.
	List(ctx context.Context) ([]string, error)
	// Capabilities says what the backend enforces.
	Capabilities() backend.Capabilities
}

// Engine runs code in sandboxes from one backend.
type Engine struct {
	backend Backend
	log     *slog.Logger
}

// New returns an engine on b.
func New(b Backend, log *slog.Logger) *Engine { return &Engine{backend: b, log: log} }

// Backend is the engine's backend.
func (e *Engine) Backend() Backend { return e.backend }

// sandbox is a sandbox the engine made, with its agent's client.
type sandbox struct {
	backend.Sandbox
	Agent *agentclient.Client
	b     Backend
}

// create makes a sandbox and connects to its agent.
func (e *Engine) create(ctx context.Context, spec backend.Spec) (*sandbox, error) {
	box, err := e.backend.CreateSandbox(ctx, spec)
	if err != nil {
		return nil, err
	}
	c, err := e.backend.Connect(ctx, box.ID)
	if err != nil {
		e.backend.DestroySandbox(context.Background(), box.ID)
		return nil, kiln.Wrap(kiln.SandboxError, err, "cannot reach the sandbox's agent")
	}
	return &sandbox{Sandbox: box, Agent: c, b: e.backend}, nil
}

// Destroy removes the sandbox.
func (s *sandbox) Destroy(ctx context.Context) error { return s.b.DestroySandbox(ctx, s.ID) }

// File is a file copied into the workspace before the program runs.
type File struct {
	Path string // relative to the workspace
	Data []byte
	Mode uint32 // permission bits; 0 means 0644
}

// Run is a one-shot execution.
type Run struct {
	Language string
	Code     string
	Args     []string
	Stdin    []byte
	Files    []File
	Limits   kiln.Limits
	// Name is the program's file name (test.java) for a program language:
	// RunCell writes the code into the workspace under it and runs it as
	// the entry, so the files beside it build with it. Empty: a cell.
	Name string
	// BuildOptions are a compiled language's compiler and linker flags
	// (CellRequest.BuildOptions).
	BuildOptions []string
	// Mounts are host folders shown read-only in the sandbox
	// (SessionSpec.Mounts).
	Mounts []backend.Mount
	// Test runs the program as tests (CellRequest.Test).
	Test bool
	// Environment names a prebuilt environment the service links into
	// the run's sandbox (service/environments.go); the engine ignores it.
	Environment string
	// Network is the run's network policy and Packages (with their
	// PackageManager, pip or npm) are installed before the code runs: the
	// service applies both (service/run.go); the engine ignores them.
	Network        kiln.NetworkPolicy
	Packages       []string
	PackageManager string
}

// TestRun reports whether r runs a script language's test file, which goes
// the way of a cell (RunCell), with its runner.
func (r Run) TestRun() bool { return programs.IsScriptTest(r.Language, r.Name, r.Test) }

// ProgramName is the workspace file that holds the code of language l.
func ProgramName(l *lang.Language) string { return "main" + l.Ext }

// Run executes r in a fresh sandbox that is destroyed before it returns.
// Output is written to stdout and stderr as it is produced. The error is
// non-nil only when the program could not be run; how it ended is in Exit.
func (e *Engine) Run(ctx context.Context, r Run, stdout, stderr io.Writer) (kiln.Exit, error) {
	l, err := validate(r)
	if err != nil {
		return kiln.Exit{}, err
	}
	lim := r.Limits.WithDefaults()
	sb, err := e.create(ctx, backend.Spec{Limits: r.Limits, Env: l.Env, Mounts: r.Mounts})
	if err != nil {
		return kiln.Exit{}, err
	}
	defer sb.Destroy(context.Background())

	req := protocol.Exec{
		Argv:        append(l.Argv(ProgramName(l)), r.Args...),
		Stdin:       r.Stdin,
		TimeoutMs:   lim.Timeout.Milliseconds(),
		OutputBytes: lim.OutputBytes,
	}
	// Small files travel with the exec request; large ones go first, in chunks.
	files := append([]File{{Path: ProgramName(l), Data: []byte(r.Code)}}, r.Files...)
	inline := 0
	for _, f := range files {
		if inline+len(f.Data) <= inlineBytes {
			inline += len(f.Data)
			req.Files = append(req.Files, protocol.FileOp{Op: protocol.FileWrite, Path: f.Path, Data: f.Data, Mode: f.Mode})
			continue
		}
		if err := sb.Agent.WriteFile(ctx, f.Path, f.Data, f.Mode); err != nil {
			return kiln.Exit{}, fileError(f.Path, err)
		}
	}
	info, err := sb.Agent.Exec(ctx, req, stdout, stderr)
	var re *agentclient.RemoteError
	if errors.As(err, &re) {
		return kiln.Exit{}, fileError("", err)
	}
	if err != nil {
		return kiln.Exit{}, kiln.Wrap(kiln.SandboxError, err, "the sandbox stopped answering")
	}
	return toExit(info), nil
}

// inlineBytes is how much file data may ride in the exec request itself;
// it keeps the frame well below protocol.MaxFrame after base64.
const inlineBytes = 1 << 20

// Validate checks a run of any language without running it.
func Validate(r Run) error {
	l, err := lang.Lookup(r.Language)
	if err != nil {
		return err
	}
	if err := validateCode(l, r); err != nil {
		return err
	}
	return validateFiles(l, r.Files)
}

func validate(r Run) (*lang.Language, error) {
	l, err := lang.Lookup(r.Language)
	if err != nil {
		return nil, err
	}
	if !l.OneShot() {
		return nil, kiln.Errorf(kiln.Unsupported, "Run takes %s; use RunCell for %s", strings.Join(oneShotNames(), ", "), l.Name)
	}
	if err := l.Available(); err != nil {
		return nil, err
	}
	if err := validateCode(l, r); err != nil {
		return nil, err
	}
	if err := validateFiles(l, r.Files); err != nil {
		return nil, err
	}
	return l, r.Limits.Validate()
}

// validateCode checks the program, its stdin, arguments and limits.
func validateCode(l *lang.Language, r Run) error {
	if strings.TrimSpace(r.Code) == "" {
		return kiln.Errorf(kiln.Invalid, "the program is empty")
	}
	if len(r.Code) > MaxCodeBytes {
		return kiln.Errorf(kiln.TooLarge, "the program is %s; the limit is %s", kiln.FormatBytes(int64(len(r.Code))), kiln.FormatBytes(MaxCodeBytes))
	}
	if len(r.Stdin) > MaxStdinBytes {
		return kiln.Errorf(kiln.TooLarge, "stdin is %s; the limit is %s", kiln.FormatBytes(int64(len(r.Stdin))), kiln.FormatBytes(MaxStdinBytes))
	}
	if len(r.Args) > MaxArgs {
		return kiln.Errorf(kiln.TooLarge, "%d arguments given; the limit is %d", len(r.Args), MaxArgs)
	}
	if len(r.BuildOptions) > 0 {
		if _, err := programs.CheckBuildOptions(l, r.BuildOptions); err != nil {
			return err
		}
	}
	return r.Limits.Validate()
}

func oneShotNames() []string {
	var names []string
	for _, l := range lang.All() {
		if l.OneShot() {
			names = append(names, l.Name)
		}
	}
	return names
}

func validateFiles(l *lang.Language, files []File) error {
	if len(files) > MaxFiles {
		return kiln.Errorf(kiln.TooLarge, "%d files given; the limit is %d", len(files), MaxFiles)
	}
	total := 0
	for _, f := range files {
		total += len(f.Data)
		if err := ValidatePath(f.Path); err != nil {
			return err
		}
		// A script's one-shot run writes its code as main<ext>; a program
		// cell's code is never in the workspace (RunCell checks a Name).
		if l.OneShot() && path.Clean(f.Path) == ProgramName(l) {
			return kiln.Errorf(kiln.Invalid, "file %q would replace the program itself; rename it", f.Path)
		}
	}
	if total > MaxFilesBytes {
		return kiln.Errorf(kiln.TooLarge, "the files total %s; the limit is %s", kiln.FormatBytes(int64(total)), kiln.FormatBytes(MaxFilesBytes))
	}
	return nil
}

// ValidatePath accepts a relative path that stays inside the workspace.
func ValidatePath(p string) error {
	switch {
	case p == "":
		return kiln.Errorf(kiln.Invalid, "a file needs a name")
	case !utf8.ValidString(p) || strings.ContainsAny(p, "\x00\n\r"):
		return kiln.Errorf(kiln.Invalid, "file name %q has bytes that are not allowed (NUL, newlines, invalid UTF-8)", p)
	case len(p) > 1024:
		return kiln.Errorf(kiln.Invalid, "file name is longer than 1024 bytes")
	case path.IsAbs(p):
		return kiln.Errorf(kiln.Invalid, "file name %q must be relative to the workspace", p)
	}
	if c := path.Clean(p); c == "." || c == ".." || strings.HasPrefix(c, "../") {
		return kiln.Errorf(kiln.Invalid, "file name %q leaves the workspace", p)
	}
	return nil
}

func fileError(p string, err error) error {
	var re *agentclient.RemoteError
	if errors.As(err, &re) {
		kind := kiln.Invalid
		if re.Code == protocol.ErrInternal {
			kind = kiln.SandboxError
		}
		if strings.Contains(re.Message, "no space left") || strings.Contains(re.Message, "file too large") {
			kind = kiln.TooLarge
		}
		// The agent's message names the client's own path, so it is safe to show.
		return kiln.Wrap(kind, err, "cannot copy files into the sandbox: %s", re.Message)
	}
	return kiln.Wrap(kiln.SandboxError, err, "cannot copy %s into the sandbox", p)
}

func toExit(in protocol.ExitInfo) kiln.Exit {
	x := kiln.Exit{
		Code:     in.Code,
		Signal:   in.Signal,
		Canceled: in.Canceled,
		Usage: kiln.Usage{
			Wall:        time.Duration(in.WallNs),
			CPU:         time.Duration(in.CPUNs),
			PeakMemory:  in.PeakMemory,
			OutputBytes: in.OutputBytes,
		},
	}
	for _, hit := range []struct {
		on bool
		l  kiln.LimitHit
	}{
		{in.TimedOut, kiln.HitTime}, {in.OOMKilled, kiln.HitMemory},
		{in.PidsLimited, kiln.HitPids}, {in.OutputTruncated, kiln.HitOutput},
	} {
		if hit.on {
			x.Limits = append(x.Limits, hit.l)
		}
	}
	return x
}

// Describe puts the limits an execution hit into plain words, one line
// each, for a terminal.
func Describe(x kiln.Exit, lim kiln.Limits) []string {
	lim = lim.WithDefaults()
	var lines []string
	for _, h := range x.Limits {
		switch h {
		case kiln.HitTime:
			lines = append(lines, fmt.Sprintf("kiln: time limit reached: the program ran longer than %v and was stopped", lim.Timeout))
		case kiln.HitMemory:
			lines = append(lines, fmt.Sprintf("kiln: memory limit reached: the program needed more than %s and was killed", kiln.FormatBytes(lim.MemoryBytes)))
		case kiln.HitPids:
			lines = append(lines, fmt.Sprintf("kiln: process limit reached: the program tried to run more than %d processes or threads at once", lim.Pids))
		case kiln.HitOutput:
			lines = append(lines, fmt.Sprintf("kiln: output limit reached: the program wrote more than %s; the output was truncated and the program stopped", kiln.FormatBytes(lim.OutputBytes)))
		}
	}
	if x.Canceled {
		lines = append(lines, "kiln: the run was cancelled")
	}
	return lines
}
