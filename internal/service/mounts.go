package service

import (
	"path/filepath"

	"github.com/kiln-dev/kiln/internal/backend"
	"github.com/kiln-dev/kiln/internal/backend/native"
	"github.com/kiln-dev/kiln/internal/kiln"
)

// resolveMounts checks a session's read-only mounts against the
// administrator's roots: each source must be a folder under one of them,
// reached without a symlink out of it (native.ResolveMount). Admins are
// held to the roots too: the roots are the host's policy, not a limit.
func (s *Service) resolveMounts(ms []backend.Mount) ([]backend.Mount, error) {
	if len(ms) == 0 {
		return nil, nil
	}
	if len(s.cfg.MountRoots) == 0 {
		return nil, kiln.Errorf(kiln.Forbidden, "this server allows no mounts: an administrator allows folders with kiln serve --mount-root DIR")
	}
	if len(ms) > native.MaxMounts {
		return nil, kiln.Errorf(kiln.TooLarge, "%d mounts given; the limit is %d", len(ms), native.MaxMounts)
	}
	out := make([]backend.Mount, 0, len(ms))
	for _, m := range ms {
		if !filepath.IsAbs(m.Source) {
			return nil, kiln.Errorf(kiln.Invalid, "the mount source %q must be an absolute path on the server", m.Source)
		}
		real, err := native.ResolveMount(s.cfg.MountRoots, m.Source)
		if err != nil {
			return nil, err
		}
		out = append(out, backend.Mount{Source: real, Target: m.Target})
	}
	return out, nil
}

// storedMounts are a session's resolved mounts as the store keeps them.
func storedMounts(ms []backend.Mount) []kiln.Mount {
	var out []kiln.Mount
	for _, m := range ms {
		out = append(out, kiln.Mount{Source: m.Source, Target: m.Target})
	}
	return out
}

// resumedMounts are a resumed session's stored mounts, checked against
// today's roots: one the administrator no longer allows, or whose folder
// is gone or now a symlink, is left out, and logged.
func (s *Service) resumedMounts(rec kiln.Session) []backend.Mount {
	var out []backend.Mount
	for _, m := range rec.Mounts {
		ok, err := s.resolveMounts([]backend.Mount{{Source: m.Source, Target: m.Target}})
		if err != nil {
			s.log.Warn("a resumed session's mount is left out", "session", rec.ID, "source", m.Source, "err", kiln.Message(err))
			continue
		}
		out = append(out, ok...)
	}
	return out
}
