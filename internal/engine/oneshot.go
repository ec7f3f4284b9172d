package engine

import (
	"context"
	"path"

	"github.com/kiln-dev/kiln/internal/kiln"
	"github.com/kiln-dev/kiln/internal/lang"
)

// RunCell is a one-shot run of any language, REPL or program, as one cell
// in a session made for it and closed afterwards. It returns the whole
// result model (rich outputs, errors, artifacts); Run is the faster path
// for script languages that need none of that.
func (e *Engine) RunCell(ctx context.Context, r Run, ev Events) (kiln.CellResult, error) {
	return e.RunCellThen(ctx, r, ev, nil)
}

// RunCellThen is RunCell that calls then, when not nil, with the session
// and the result before the sandbox goes: to copy out the artifacts.
func (e *Engine) RunCellThen(ctx context.Context, r Run, ev Events, then func(*Session, kiln.CellResult) error) (kiln.CellResult, error) {
	l, err := lang.Lookup(r.Language)
	if err != nil {
		return kiln.CellResult{}, err
	}
	if err := l.Available(); err != nil {
		return kiln.CellResult{}, err
	}
	if err := validateCode(r); err != nil {
		return kiln.CellResult{}, err
	}
	if err := validateFiles(l, r.Files); err != nil {
		return kiln.CellResult{}, err
	}
	if l.Kind == lang.REPL && len(r.Args) > 0 {
		return kiln.CellResult{}, kiln.Errorf(kiln.Invalid, "%s code runs in a kernel and takes no arguments", l.Name)
	}
	cell := Cell{Language: l.Name, Code: r.Code, Args: r.Args}
	if l.Kind == lang.Program && r.Name != "" {
		// The program keeps its name, on disk beside its files, as on the
		// host: it is the workspace's entry.
		if err := ValidatePath(r.Name); err != nil {
			return kiln.CellResult{}, err
		}
		for _, f := range r.Files {
			if path.Clean(f.Path) == path.Clean(r.Name) {
				return kiln.CellResult{}, kiln.Errorf(kiln.Invalid, "file %q would replace the program itself; give it another destination", f.Path)
			}
		}
		r.Files = append(r.Files, File{Path: r.Name, Data: []byte(r.Code), Mode: 0o644})
		cell.Code, cell.Entry = "", path.Clean(r.Name)
	}
	s, err := e.NewSession(ctx, SessionSpec{Limits: r.Limits})
	if err != nil {
		return kiln.CellResult{}, err
	}
	defer s.Close(context.Background())
	for _, f := range r.Files {
		if err := s.Agent().WriteFile(ctx, f.Path, f.Data, f.Mode); err != nil {
			return kiln.CellResult{}, fileError(f.Path, err)
		}
	}
	stdin := string(r.Stdin)
	cell.Stdin = &stdin
	res, err := s.Run(ctx, cell, ev)
	if err == nil && then != nil {
		err = then(s, res)
	}
	return res, err
}
