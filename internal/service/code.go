package service

import (
	"github.com/kiln-dev/kiln/internal/engine"
	"github.com/kiln-dev/kiln/internal/kiln"
)

// cellBounds are this server's bounds on a cell's code (--max-code) and
// stdin, for session cells and one-shot runs alike.
func (s *Service) cellBounds() kiln.CellBounds {
	return kiln.CellBounds{MaxCodeBytes: s.cfg.MaxCodeBytes, MaxStdinBytes: engine.MaxStdinBytes}
}
