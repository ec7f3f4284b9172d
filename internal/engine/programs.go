package engine

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"

	"github.com/kiln-dev/kiln/internal/agentclient"
	"github.com/kiln-dev/kiln/internal/backend"
	"github.com/kiln-dev/kiln/internal/kiln"
	"github.com/kiln-dev/kiln/internal/lang"
	"github.com/kiln-dev/kiln/internal/programs"
	"github.com/kiln-dev/kiln/internal/protocol"
)

// runProgram runs a cell of a program language: its code is built outside
// the workspace (or, with Entry, the workspace's program is), if it changed,
// and run in the workspace.
func (s *Session) runProgram(ctx context.Context, l *lang.Language, c Cell, ev Events) (kiln.CellResult, error) {
	timeout := s.lim.Timeout
	if c.Timeout != 0 {
		timeout = c.Timeout
	}
	p := programs.Program{
		Language:     l,
		Args:         c.Args,
		BuildOptions: c.BuildOptions,
		Test:         c.Test,
		Timeout:      timeout,
		OutputBytes:  s.lim.OutputBytes,
		MemoryBytes:  s.lim.MemoryBytes,
		CPUMillis:    s.lim.CPUMillis,
	}
	switch {
	case c.Entry != "" && strings.TrimSpace(c.Code) != "":
		return kiln.CellResult{}, kiln.Errorf(kiln.Invalid, "a cell gives either code or an entry file in the workspace, not both")
	case c.Entry != "":
		if err := ValidatePath(c.Entry); err != nil {
			return kiln.CellResult{}, err
		}
		p.Entry = c.Entry
	default:
		p.Code, p.Name = []byte(c.Code), c.Name
	}
	if c.StdinStream != nil {
		p.StdinStream = c.StdinStream
	} else if c.Stdin != nil {
		p.Stdin = []byte(*c.Stdin)
	}
	a := s.sb.Agent
	before, err := a.Walk(ctx)
	if err != nil {
		return kiln.CellResult{}, sandboxError(err)
	}
	runCtx, cancel := context.WithCancel(ctx)
	s.setCancel(cancel)
	defer s.setCancel(nil)
	defer cancel()

	var stdout, stderr strings.Builder
	var mu sync.Mutex // stdout and stderr are pumped on goroutines of their own
	budget := outputBudget{left: s.lim.OutputBytes}
	out := writerFunc(func(b []byte) {
		mu.Lock()
		defer mu.Unlock()
		if b = budget.clip(b); len(b) > 0 {
			stdout.Write(b)
			if ev.Stdout != nil {
				ev.Stdout(b)
			}
		}
	})
	errw := writerFunc(func(b []byte) {
		mu.Lock()
		defer mu.Unlock()
		if b = budget.clip(b); len(b) > 0 {
			stderr.Write(b)
			if ev.Stderr != nil {
				ev.Stderr(b)
			}
		}
	})
	run := programs.Run
	if l.Kind == lang.REPL {
		// A script language's test file, with its runner (RunChecked).
		run = programs.RunScriptTests
	}
	pr, err := run(runCtx, groupExecer{Client: a, box: s.sb.Sandbox}, p, out, errw)
	if err != nil {
		return kiln.CellResult{}, err
	}
	after, err := a.Walk(ctx)
	if err != nil {
		return kiln.CellResult{}, sandboxError(err)
	}
	res := programResult(l.Name, pr)
	res.Notice = limitNotice(res.Status, s.lim, timeout)
	if res.Status == kiln.StatusError && pr.Phase != programs.PhaseCompile && toExit(pr.Exit).Hit(kiln.HitPids) {
		res.Notice = fmt.Sprintf("process limit reached: the program tried to run more than %d processes or threads at once", s.lim.Pids)
	}
	res.Stdout, res.Stderr = stdout.String(), stderr.String()
	// The code and the build are outside the workspace: every change in it
	// is the program's.
	for _, d := range protocol.Diff(before, after) {
		res.Artifacts = append(res.Artifacts, kiln.Artifact{Path: d.Path, Size: d.Size, Change: d.Change})
	}
	return res, nil
}

// programResult turns a build-and-run into the one result model.
func programResult(language string, pr programs.Result) kiln.CellResult {
	x := toExit(pr.Exit)
	res := kiln.CellResult{Language: language, Status: kiln.StatusOK, Outputs: []kiln.Output{}, Artifacts: []kiln.Artifact{}, Usage: x.Usage}
	code := x.Code
	switch {
	case x.Hit(kiln.HitTime):
		res.Status = kiln.StatusTimeout
	case x.Hit(kiln.HitMemory):
		res.Status = kiln.StatusMemory
	case x.Hit(kiln.HitOutput):
		res.Status = kiln.StatusOutput
	case x.Canceled:
		res.Status = kiln.StatusInterrupted
	case pr.Phase == programs.PhaseCompile || x.Code != 0 || x.Signal != "":
		res.Status = kiln.StatusError
	}
	if !pr.Cached && pr.Build.WallNs > 0 {
		u := toExit(pr.Build).Usage
		res.BuildUsage = &u
	}
	if pr.Phase == programs.PhaseCompile {
		res.Error = compileError(pr)
		return res
	}
	// The run's own stderr stays the program's: warnings are diagnostics.
	res.Diagnostics = pr.Diagnostics
	if pr.Tests {
		res.Tests = programs.Report(pr.TestCases)
	}
	res.ExitCode = &code
	if res.Status == kiln.StatusError {
		msg := fmt.Sprintf("exit status %d", x.Code)
		if x.Signal != "" {
			msg = "killed by " + x.Signal
		}
		res.Error = &kiln.CellError{Name: "ExitStatus", Message: msg}
	}
	return res
}

func compileError(pr programs.Result) *kiln.CellError {
	e := &kiln.CellError{Name: "CompileError", Message: "the program did not compile", Diagnostics: pr.Diagnostics}
	for _, d := range pr.Diagnostics {
		if d.Severity == "error" {
			e.Message, e.Line = d.Message, d.Line
			switch {
			case d.File != "" && d.Line > 0:
				e.Message = fmt.Sprintf("%s:%d: %s", d.File, d.Line, d.Message)
			case d.File != "":
				// A linker's message has a file but no line.
				e.Message = fmt.Sprintf("%s: %s", d.File, d.Message)
			}
			break
		}
	}
	if pr.CompileLog != "" {
		e.Traceback = strings.Split(strings.TrimRight(pr.CompileLog, "\n"), "\n")
	}
	return e
}

func sandboxError(err error) error {
	var re *agentclient.RemoteError
	if errors.As(err, &re) {
		return kiln.Wrap(kiln.SandboxError, err, "the session's sandbox refused: %s", re.Message)
	}
	return kiln.Wrap(kiln.SandboxError, err, "the session's sandbox stopped answering")
}

type writerFunc func([]byte)

func (f writerFunc) Write(p []byte) (int, error) { f(p); return len(p), nil }

// groupExecer runs a session's programs so that stopping one kills only its
// own process group and session, never the session's kernels.
// It tells package programs where the backend's processes see the
// workspace and the build area.
type groupExecer struct {
	*agentclient.Client
	box backend.Sandbox
}

func (g groupExecer) WorkspaceDir() string { return cmp.Or(g.box.Workspace, programs.Workspace) }
func (g groupExecer) BuildArea() string    { return cmp.Or(g.box.BuildArea, programs.BuildArea) }
func (g groupExecer) BuildCache() string   { return g.box.BuildCache }

var _ programs.StdinExecer = groupExecer{}

func (g groupExecer) Exec(ctx context.Context, req protocol.Exec, stdout, stderr io.Writer) (protocol.ExitInfo, error) {
	req.KillScope = protocol.KillGroup
	return g.Client.Exec(ctx, req, stdout, stderr)
}

func (g groupExecer) ExecStdin(ctx context.Context, req protocol.Exec, in io.Reader, stdout, stderr io.Writer) (protocol.ExitInfo, error) {
	req.KillScope = protocol.KillGroup
	return g.Client.ExecStdin(ctx, req, in, stdout, stderr)
}
