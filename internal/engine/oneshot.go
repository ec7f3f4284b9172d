package engine

import (
	"bytes"
	"context"
	"path"
	"strings"
	"unicode/utf8"

	"github.com/kiln-dev/kiln/internal/backend"
	"github.com/kiln-dev/kiln/internal/kiln"
	"github.com/kiln-dev/kiln/internal/lang"
	"github.com/kiln-dev/kiln/internal/programs"
)

// PreparedRun is a one-shot run that passed its one validation
// (PrepareRun), ready to run as one cell.
type PreparedRun struct {
	files  []File
	limits kiln.Limits
	cell   CheckedCell
	mounts []backend.Mount
}

// PrepareRun checks a one-shot run of any language, REPL or program: its
// files, arguments and limits, and its program as a cell against b.
func PrepareRun(r Run, b kiln.CellBounds) (PreparedRun, error) {
	l, err := lang.Lookup(r.Language)
	if err != nil {
		return PreparedRun{}, err
	}
	if err := l.Available(); err != nil {
		return PreparedRun{}, err
	}
	if strings.TrimSpace(r.Code) == "" {
		return PreparedRun{}, kiln.Errorf(kiln.Invalid, "the program is empty")
	}
	if len(r.Args) > MaxArgs {
		return PreparedRun{}, kiln.Errorf(kiln.TooLarge, "%d arguments given; the limit is %d", len(r.Args), MaxArgs)
	}
	if err := r.Limits.Validate(); err != nil {
		return PreparedRun{}, err
	}
	if err := validateFiles(l, r.Files); err != nil {
		return PreparedRun{}, err
	}
	if l.Kind == lang.REPL && !l.OneShot() && len(r.Args) > 0 {
		return PreparedRun{}, kiln.Errorf(kiln.Invalid, "%s code runs in a kernel and takes no arguments; %s and the program languages do", l.Name, strings.Join(oneShotNames(), ", "))
	}
	c := Cell{Language: l.Name, Code: r.Code, Args: r.Args, BuildOptions: r.BuildOptions, Test: r.Test}
	if utf8.Valid(r.Stdin) || l.Kind == lang.Program {
		stdin := string(r.Stdin)
		c.Stdin = &stdin
	} else {
		// Bytes that are not text reach a kernel's code as they are, in
		// chunks, not in a JSON string.
		c.StdinStream = bytes.NewReader(r.Stdin)
	}
	cell, err := CheckCell(c, b)
	if err != nil {
		return PreparedRun{}, err
	}
	cell.script = true
	if (l.Kind == lang.Program || programs.IsScriptTest(l.Name, r.Name, r.Test)) && r.Name != "" {
		// The program keeps its name, on disk beside its files, as on the
		// host: it is the workspace's entry.
		if err := ValidatePath(r.Name); err != nil {
			return PreparedRun{}, err
		}
		for _, f := range r.Files {
			if path.Clean(f.Path) == path.Clean(r.Name) {
				return PreparedRun{}, kiln.Errorf(kiln.Invalid, "file %q would replace the program itself; give it another destination", f.Path)
			}
		}
		r.Files = append(r.Files, File{Path: r.Name, Data: []byte(r.Code), Mode: 0o644})
		cell.req.Code, cell.req.Entry = "", path.Clean(r.Name)
	}
	return PreparedRun{files: r.Files, limits: r.Limits, cell: cell, mounts: r.Mounts}, nil
}

// WithLimits is p with its sandbox's limits replaced (the service's caps
// and defaults); they are validated again when the sandbox is made.
func (p PreparedRun) WithLimits(l kiln.Limits) PreparedRun {
	p.limits = l
	return p
}

// Limits are the limits p's sandbox gets.
func (p PreparedRun) Limits() kiln.Limits { return p.limits }

// RunCell is a one-shot run of any language, REPL or program, as one cell
// in a session made for it and closed afterwards. It returns the whole
// result model (rich outputs, errors, artifacts), the same as the API's
// one-shot run; Run is the faster path for script languages that need
// none of that.
func (e *Engine) RunCell(ctx context.Context, r Run, ev Events) (kiln.CellResult, error) {
	p, err := PrepareRun(r, DefaultCellBounds())
	if err != nil {
		return kiln.CellResult{}, err
	}
	return e.RunPrepared(ctx, p, ev, nil)
}

// RunPrepared runs a prepared one-shot run. then, when not nil, is called
// with the session and the result before the sandbox goes: to copy out
// the artifacts.
func (e *Engine) RunPrepared(ctx context.Context, p PreparedRun, ev Events, then func(*Session, kiln.CellResult) error) (kiln.CellResult, error) {
	s, err := e.NewSession(ctx, SessionSpec{Limits: p.limits, Mounts: p.mounts})
	if err != nil {
		return kiln.CellResult{}, err
	}
	defer s.Close(context.Background())
	return RunPreparedIn(ctx, s, p, ev, then)
}

// Language is the canonical name of p's language.
func (p PreparedRun) Language() string { return p.cell.req.Language }

// RunPreparedIn runs p in s, a session made for it alone (a fresh one, or
// one from the service's one-shot pool whose kernel has started with a
// warm-up cell and run nothing else). The caller closes s afterwards, off
// the answer's path if it likes: a one-shot sandbox is never reused.
func RunPreparedIn(ctx context.Context, s *Session, p PreparedRun, ev Events, then func(*Session, kiln.CellResult) error) (kiln.CellResult, error) {
	for _, f := range p.files {
		if err := s.Agent().WriteFile(ctx, f.Path, f.Data, f.Mode); err != nil {
			return kiln.CellResult{}, fileError(f.Path, err)
		}
	}
	res, err := s.RunChecked(ctx, p.cell, ev)
	if err == nil && then != nil {
		err = then(s, res)
	}
	return res, err
}
