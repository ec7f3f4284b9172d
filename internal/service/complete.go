package service

import (
	"context"
	"unicode/utf8"

	"github.com/kiln-dev/kiln/internal/kiln"
)

// Completion is what a kernel offers at a cursor: Matches replace the
// code between CursorStart and CursorEnd (offsets in characters, as the
// cursor).
type Completion struct {
	Matches     []string
	CursorStart int
	CursorEnd   int
}

// CodeCheck says whether code is ready to run: Status is "complete",
// "incomplete" (more lines expected) or "invalid" (a syntax error at
// Line:Column, with Message).
type CodeCheck struct {
	Status  string
	Line    int
	Column  int
	Message string
}

// checkQuery bounds a completion's or check's code as a cell's: the same
// size limit and valid UTF-8, so that a front end (Jupyter) cannot send
// the kernel more than a cell may.
func (s *Service) checkQuery(code string, cursor int) error {
	if max := s.cellBounds().MaxCodeBytes; max > 0 && int64(len(code)) > max {
		return kiln.Errorf(kiln.TooLarge, "the code is %s, over the %s allowed", kiln.FormatBytes(int64(len(code))), kiln.FormatBytes(max))
	}
	if !utf8.ValidString(code) {
		return kiln.Errorf(kiln.Invalid, "the code is not valid UTF-8")
	}
	if n := utf8.RuneCountInString(code); cursor < 0 || cursor > n {
		return kiln.Errorf(kiln.Invalid, "cursor %d is outside the code (0 to %d characters)", cursor, n)
	}
	return nil
}

// Complete asks the kernel of language in u's session for completions at
// cursor (in characters). The same ownership as a cell's: another user's
// session is not found. It does not wait for a running cell's turn, so a
// front end can complete while a cell runs; the kernel answers when it can.
func (s *Service) Complete(ctx context.Context, u kiln.User, sessionID, language, code string, cursor int) (Completion, error) {
	if err := s.checkQuery(code, cursor); err != nil {
		return Completion{}, err
	}
	l, err := s.liveFor(ctx, u, sessionID)
	if err != nil {
		return Completion{}, err
	}
	if language == "" {
		language = l.rec.Languages[0]
	}
	release := l.hold()
	defer release()
	sess, err := l.sandbox(ctx, s.engine)
	if err != nil {
		return Completion{}, err
	}
	c, err := sess.Complete(ctx, language, code, cursor)
	if err != nil {
		return Completion{}, err
	}
	return Completion{Matches: c.Matches, CursorStart: c.CursorStart, CursorEnd: c.CursorEnd}, nil
}

// Check asks the kernel of language in u's session whether code is
// complete and valid, without running it.
func (s *Service) Check(ctx context.Context, u kiln.User, sessionID, language, code string) (CodeCheck, error) {
	if err := s.checkQuery(code, 0); err != nil {
		return CodeCheck{}, err
	}
	l, err := s.liveFor(ctx, u, sessionID)
	if err != nil {
		return CodeCheck{}, err
	}
	if language == "" {
		language = l.rec.Languages[0]
	}
	release := l.hold()
	defer release()
	sess, err := l.sandbox(ctx, s.engine)
	if err != nil {
		return CodeCheck{}, err
	}
	c, err := sess.Check(ctx, language, code)
	if err != nil {
		return CodeCheck{}, err
	}
	return CodeCheck{Status: c.Status, Line: c.Line, Column: c.Column, Message: c.Message}, nil
}
