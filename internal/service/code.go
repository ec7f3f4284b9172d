package service

import "github.com/kiln-dev/kiln/internal/kiln"

// checkCode applies the one code-size limit (--max-code) to a session's
// cell and to a one-shot run alike.
func (s *Service) checkCode(code string) error {
	if n := int64(len(code)); n > s.cfg.MaxCodeBytes {
		return kiln.Errorf(kiln.TooLarge, "the code is %s, over the %s allowed", kiln.FormatBytes(n), kiln.FormatBytes(s.cfg.MaxCodeBytes))
	}
	return nil
}
