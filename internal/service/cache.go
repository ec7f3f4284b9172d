package service

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"sync"
	"time"

	"github.com/kiln-dev/kiln/internal/kiln"
	"github.com/kiln-dev/kiln/internal/lang"
	"github.com/kiln-dev/kiln/internal/store"
)

// Bounds of the result cache of one-shot runs.
const (
	// CacheEntriesPerUser is how many results of one user are kept; the
	// oldest go first.
	CacheEntriesPerUser = 10000
	// CacheMaxResultBytes is the largest result kept (its JSON); a larger
	// one is returned, not cached.
	CacheMaxResultBytes = 1 << 20
)

// runtimeVersions remembers each language's runtime version for the
// cache key: probing it runs a process, and it changes only with an
// upgrade, which restarts kiln.
var runtimeVersions sync.Map // language name → version string

// probeVersion asks the runtime its version; a test replaces it.
var probeVersion = (*lang.Language).DetectVersion

func runtimeVersion(ctx context.Context, name string) (string, error) {
	if v, ok := runtimeVersions.Load(name); ok {
		return v.(string), nil
	}
	l, err := lang.Lookup(name)
	if err != nil {
		return "", err
	}
	v, err := probeVersion(l, ctx)
	if err != nil {
		return "", kiln.Wrap(kiln.Unavailable, err, "cannot tell the version of %s's runtime for the result cache", l.Name)
	}
	runtimeVersions.Store(name, v)
	return v, nil
}

// cacheKey is the hash of everything that decides a run's result, as far
// as kiln can know: the runtime's version, the code, the files, stdin,
// the arguments, the build options, whether it runs as tests and the
// limits in force.
func (s *Service) cacheKey(ctx context.Context, u kiln.User, r RunRequest) (string, error) {
	l, err := lang.Lookup(r.Language)
	if err != nil {
		return "", err
	}
	v, err := runtimeVersion(ctx, l.Name)
	if err != nil {
		return "", err
	}
	lim, err := s.capLimits(u, r.Limits)
	if err != nil {
		return "", err
	}
	var layer string // the environment's layer: its path holds its content hash
	if r.Environment != "" {
		if layer, err = s.resolveEnvironment(ctx, r.Environment); err != nil {
			return "", err
		}
	}
	b, err := json.Marshal(struct {
		Language, Version, Code, Name string
		Files                         []File
		Stdin                         []byte
		Args, BuildOptions            []string
		Test                          bool
		Limits                        kiln.Limits
		Environment                   string `json:",omitempty"` // keys without one stay as they were
	}{l.Name, v, r.Code, r.Name, r.Files, r.Stdin, r.Args, r.BuildOptions, r.Test, lim.WithDefaults(), layer})
	if err != nil {
		return "", err
	}
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:]), nil
}

// RunCached is Run through the user's result cache: a result stored for
// the same key is returned marked Cached, without running; otherwise the
// run's result is stored for the next time. The cache is the caller's
// choice (kiln cannot know whether a program reads the clock or
// randomness), and never shared between users.
func (s *Service) RunCached(ctx context.Context, u kiln.User, r RunRequest) (RunResult, error) {
	if len(r.Mounts) > 0 || len(r.Packages) > 0 || r.Network.Normal().Mode != kiln.NetworkNone {
		// A mounted project's files are not in the key, and may change;
		// nor are what an index serves or what the network answers.
		return s.Run(ctx, u, r)
	}
	key, err := s.cacheKey(ctx, u, r)
	if err != nil {
		// No key (the runtime's version probe failed, or the run is
		// refused): run uncached, and Run says what is wrong, if anything.
		return s.Run(ctx, u, r)
	}
	if raw, err := s.store.CachedRun(ctx, u.ID, key); err == nil {
		var out RunResult
		if json.Unmarshal([]byte(raw), &out) == nil {
			out.Cached = true
			s.audit(ctx, store.AuditEntry{UserID: u.ID, Action: "run", CodeHash: store.HashCode(r.Code), Outcome: "cached",
				Detail: jsonDetail(map[string]any{"language": out.Result.Language})})
			return out, nil
		}
	} else if kiln.KindOf(err) != kiln.NotFound {
		s.log.Warn("run cache read failed", "err", err)
	}
	out, err := s.Run(ctx, u, r)
	if err != nil || out.Result.Status == kiln.StatusInterrupted {
		return out, err
	}
	if b, err := json.Marshal(out); err == nil && len(b) <= CacheMaxResultBytes {
		if err := s.store.PutCachedRun(context.WithoutCancel(ctx), u.ID, key, string(b), time.Now(), CacheEntriesPerUser); err != nil {
			s.log.Warn("run cache write failed", "err", err)
		}
	}
	return out, nil
}
