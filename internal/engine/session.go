package engine

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/kiln-dev/kiln/internal/agentclient"
	"github.com/kiln-dev/kiln/internal/backend"
	"github.com/kiln-dev/kiln/internal/kernelproto"
	"github.com/kiln-dev/kiln/internal/kernels"
	"github.com/kiln-dev/kiln/internal/kiln"
	"github.com/kiln-dev/kiln/internal/lang"
	"github.com/kiln-dev/kiln/internal/programs"
	"github.com/kiln-dev/kiln/internal/protocol"
)

// SessionSpec describes a session's sandbox.
type SessionSpec struct {
	Limits kiln.Limits // per cell for time and output; for the whole sandbox for the rest
	Env    []string    // extra KEY=VALUE for every process
	// HostDir, when set, is the host directory used as the workspace (the
	// service keeps workspaces outside the sandbox so they outlive it);
	// else the workspace is a tmpfs that dies with the sandbox.
	HostDir string
	// Mounts are host folders shown read-only in the sandbox (project
	// code), resolved and allowed by the caller (native.ResolveMount).
	Mounts []backend.Mount
	// EgressSocket is the host unix socket of the sandbox's egress proxy
	// session (backend.Spec.EgressSocket), or "" for none.
	EgressSocket string
	// BuildCache is the host directory of the user's build caches
	// (backend.Spec.BuildCache), or "" for none: package programs builds
	// there instead of the sandbox's own build area.
	BuildCache string
	// Resources are extended resources (GPUs) for the sandbox
	// (backend.Spec.Resources), already checked against the allowlist.
	Resources map[string]int64
}

// Session is one long-lived sandbox with one workspace, in which cells run
// one after another, in one or several languages. It is safe for
// concurrent use; cells queue.
type Session struct {
	sb  *sandbox
	lim kiln.Limits
	env []string

	run    sync.Mutex // one cell at a time
	closed chan struct{}
	once   sync.Once

	mu     sync.Mutex
	cancel context.CancelFunc // stops the running program cell, if any
	told   map[string]bool    // languages whose kernel command the agent has
}

// kernelFor is the kernel part of a request: the whole command line the
// first time, then only the language, which the agent remembers.
func (s *Session) kernelFor(l *lang.Language, spec kernels.Spec) protocol.Kernel {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.told[l.Name] {
		return protocol.Kernel{Language: l.Name}
	}
	s.told[l.Name] = true
	argv, source := spec.Boot()
	return protocol.Kernel{Language: l.Name, Argv: argv, Source: source, Env: append(append([]string{}, l.Env...), spec.Env...)}
}

func (s *Session) setCancel(c context.CancelFunc) {
	s.mu.Lock()
	s.cancel = c
	s.mu.Unlock()
}

// NewSession makes a session's sandbox. Kernels start with the first cell
// of their language.
func (e *Engine) NewSession(ctx context.Context, spec SessionSpec) (*Session, error) {
	if err := spec.Limits.Validate(); err != nil {
		return nil, err
	}
	sb, err := e.create(ctx, backend.Spec{Limits: spec.Limits, Env: spec.Env, HostDir: spec.HostDir, Mounts: spec.Mounts, EgressSocket: spec.EgressSocket, BuildCache: spec.BuildCache, Resources: spec.Resources})
	if err != nil {
		return nil, err
	}
	return &Session{sb: sb, lim: spec.Limits.WithDefaults(), env: spec.Env, closed: make(chan struct{}), told: map[string]bool{}}, nil
}

// Cell is one unit of work in a session: kiln.CellRequest, the one cell
// request type of every layer.
type Cell = kiln.CellRequest

// Events receive a cell's output as it happens: kiln.CellEvents.
type Events = kiln.CellEvents

// Agent is the session's agent connection, for file operations.
func (s *Session) Agent() *agentclient.Client { return s.sb.Agent }

// ID is the session's sandbox id.
func (s *Session) ID() string { return s.sb.ID }

// BuildArea is the private place outside the workspace, on the sandbox's
// /tmp, as the sandbox's processes see it (package programs' BuildArea
// unless the backend says otherwise). The service installs a session's
// packages below it.
func (s *Session) BuildArea() string { return cmp.Or(s.sb.BuildArea, programs.BuildArea) }

// Run checks a cell against the engine's own bounds and runs it; the
// service, which has bounds of its own, uses CheckCell and RunChecked.
// The error is non-nil only when the cell could not run at all (bad
// input, a broken sandbox); how the cell itself ended is in the result's
// Status.
func (s *Session) Run(ctx context.Context, c Cell, ev Events) (kiln.CellResult, error) {
	checked, err := CheckCell(c, DefaultCellBounds())
	if err != nil {
		return kiln.CellResult{}, err
	}
	return s.RunChecked(ctx, checked, ev)
}

func (s *Session) runREPL(ctx context.Context, l *lang.Language, c Cell, ev Events, script bool) (kiln.CellResult, error) {
	spec, ok := l.KernelSpec()
	if !ok || len(spec.Argv) == 0 {
		return kiln.CellResult{}, kiln.Errorf(kiln.Unsupported, "the %s kernel is not available yet", l.Name)
	}
	timeout := s.lim.Timeout
	if c.Timeout != 0 {
		timeout = c.Timeout
	}
	req := protocol.Cell{
		Kernel:      s.kernelFor(l, spec),
		Code:        c.Code,
		Warmup:      c.Warmup,
		TimeoutMs:   timeout.Milliseconds(),
		OutputBytes: s.lim.OutputBytes,
	}
	if c.Stdin != nil && c.StdinStream == nil {
		req.Stdin, req.HasStdin = *c.Stdin, true
	}
	if script {
		// The code sees its name and arguments as a script would.
		req.Argv = append([]string{ProgramName(l)}, c.Args...)
	}
	res := kiln.CellResult{Language: l.Name, Outputs: []kiln.Output{}, Artifacts: []kiln.Artifact{}}
	var stdout, stderr strings.Builder
	budget := outputBudget{left: s.lim.OutputBytes}
	events := agentclient.CellEvents{
		Stdout: func(p []byte) {
			p = budget.clip(p)
			stdout.Write(p)
			if ev.Stdout != nil && len(p) > 0 {
				ev.Stdout(p)
			}
		},
		Stderr: func(p []byte) {
			p = budget.clip(p)
			stderr.Write(p)
			if ev.Stderr != nil && len(p) > 0 {
				ev.Stderr(p)
			}
		},
		Display: func(d kernelproto.Display, result bool) {
			if !budget.take(displaySize(d)) {
				return
			}
			o := kiln.Output{Data: d.Data, Metadata: d.Metadata, Result: result}
			res.Outputs = append(res.Outputs, o)
			if ev.Output != nil {
				ev.Output(o)
			}
		},
		Error: func(e kernelproto.Error) {
			if !budget.take(errorSize(e)) {
				return
			}
			res.Error = &kiln.CellError{Name: e.Name, Message: e.Message, Traceback: e.Traceback, Line: e.Line}
		},
		Input: func(r protocol.InputRequest) {
			if ev.Input != nil {
				ev.Input(r.Prompt, r.Password)
			}
		},
	}
	var done protocol.CellDone
	var err error
	if c.StdinStream != nil {
		done, err = s.sb.Agent.CellStdin(ctx, req, c.StdinStream, events)
	} else {
		done, err = s.sb.Agent.Cell(ctx, req, events)
	}
	if err != nil {
		var re *agentclient.RemoteError
		if errors.As(err, &re) && re.Code == protocol.ErrBusy {
			return kiln.CellResult{}, kiln.Wrap(kiln.Unavailable, err, "the %s kernel is busy", l.Name)
		}
		if errors.As(err, &re) {
			return kiln.CellResult{}, kiln.Wrap(kiln.SandboxError, err, "the %s kernel could not run the cell: %s", l.Name, re.Message)
		}
		return kiln.CellResult{}, kiln.Wrap(kiln.SandboxError, err, "the session's sandbox stopped answering")
	}
	res.Stdout, res.Stderr = stdout.String(), stderr.String()
	res.Status = kiln.CellStatus(done.Status)
	res.ExitCode = done.ExitCode
	res.Notice = replNotice(res.Status, s.lim, timeout, done)
	if done.PidsLimited && res.Notice == "" {
		res.Notice = fmt.Sprintf("process limit reached: the program tried to run more than %d processes or threads at once", s.lim.Pids)
	}
	res.Usage = kiln.Usage{Wall: time.Duration(done.WallNs), CPU: time.Duration(done.CPUNs), PeakMemory: done.PeakMemory, OutputBytes: done.OutputBytes}
	for _, a := range done.Artifacts {
		res.Artifacts = append(res.Artifacts, kiln.Artifact{Path: a.Path, Size: a.Size, Change: a.Change})
	}
	if res.Status == kiln.StatusError && res.Error == nil && done.KernelLost {
		res.Error = &kiln.CellError{Name: "KernelDied", Message: done.Reason}
	}
	return res, nil
}

// Interrupt stops the running cell, if any. A kernel keeps its state; a
// program is killed.
func (s *Session) Interrupt() error {
	s.mu.Lock()
	cancel := s.cancel
	s.mu.Unlock()
	if cancel != nil {
		cancel()
	}
	return s.sb.Agent.InterruptCells()
}

// Restart clears a language's kernel state ("" for all); files are kept.
func (s *Session) Restart(ctx context.Context, language string) error {
	if language != "" {
		l, err := lang.Lookup(language)
		if err != nil {
			return err
		}
		language = l.Name
	}
	return s.sb.Agent.Restart(ctx, language)
}

// Complete returns completions for code at cursor from the live kernel.
func (s *Session) Complete(ctx context.Context, language, code string, cursor int) (kernelproto.Completion, error) {
	q, err := s.query(language, code)
	if err != nil {
		return kernelproto.Completion{}, err
	}
	q.Cursor = cursor
	return s.sb.Agent.Complete(ctx, q)
}

// Check says whether code is complete and valid, without running it.
func (s *Session) Check(ctx context.Context, language, code string) (kernelproto.CheckResult, error) {
	q, err := s.query(language, code)
	if err != nil {
		return kernelproto.CheckResult{}, err
	}
	return s.sb.Agent.Check(ctx, q)
}

func (s *Session) query(language, code string) (protocol.KernelQuery, error) {
	l, err := lang.Lookup(language)
	if err != nil {
		return protocol.KernelQuery{}, err
	}
	spec, ok := l.KernelSpec()
	if !ok || len(spec.Argv) == 0 {
		return protocol.KernelQuery{}, kiln.Errorf(kiln.Unsupported, "%s has no kernel to ask", l.Name)
	}
	return protocol.KernelQuery{Kernel: s.kernelFor(l, spec), Code: code}, nil
}

// Close removes the session's sandbox and everything in it.
func (s *Session) Close(ctx context.Context) error {
	s.once.Do(func() { close(s.closed) })
	return s.sb.Destroy(ctx)
}

// text returns an output's text/plain, for terminals.
func Text(o kiln.Output) string {
	var t string
	if raw, ok := o.Data["text/plain"]; ok {
		json.Unmarshal(raw, &t)
	}
	return t
}

// outputBudget bounds what the host keeps and passes on of one cell's
// output, in every channel together: the cell's output limit. The agent
// stops a cell that goes past it; the budget holds the host to the bound
// even if a sandbox sends more.
type outputBudget struct{ left int64 }

// clip returns the part of p that fits.
func (b *outputBudget) clip(p []byte) []byte {
	n := min(int64(len(p)), max(b.left, 0))
	b.left -= n
	return p[:n]
}

// take reports whether n more bytes fit, and counts them if so.
func (b *outputBudget) take(n int64) bool {
	if n > b.left {
		b.left = 0 // nothing after a dropped message: the order stays true
		return false
	}
	b.left -= n
	return true
}

func displaySize(d kernelproto.Display) int64 {
	var n int64
	for k, v := range d.Data {
		n += int64(len(k) + len(v))
	}
	for k, v := range d.Metadata {
		n += int64(len(k) + len(v))
	}
	return n
}

func errorSize(e kernelproto.Error) int64 {
	n := int64(len(e.Name) + len(e.Message))
	for _, l := range e.Traceback {
		n += int64(len(l))
	}
	return n
}

// limitNotice names the limit that stopped a cell, in plain words, or ""
// if none did. Every language gets the same words.
func limitNotice(st kiln.CellStatus, lim kiln.Limits, timeout time.Duration) string {
	switch st {
	case kiln.StatusTimeout:
		return fmt.Sprintf("time limit reached: the cell ran longer than %v and was stopped", timeout)
	case kiln.StatusMemory:
		return fmt.Sprintf("memory limit reached: the cell needed more than the session's %s and was killed", kiln.FormatBytes(lim.MemoryBytes))
	case kiln.StatusOutput:
		return fmt.Sprintf("output limit reached: the cell wrote more than %s (stdout, stderr and displays together); the rest was dropped and the cell stopped", kiln.FormatBytes(lim.OutputBytes))
	}
	return ""
}

// replNotice is a kernel cell's notice: the limit that stopped it, if
// any, and what became of the kernel's state.
func replNotice(st kiln.CellStatus, lim kiln.Limits, timeout time.Duration, done protocol.CellDone) string {
	n := limitNotice(st, lim, timeout)
	switch {
	case n == "":
		return done.Reason
	case done.KernelLost && done.Reason != "":
		return n + "; " + done.Reason
	case done.KernelLost:
		return n + "; the kernel was restarted and its state is lost"
	}
	return n + "; the kernel kept its state"
}
