package service

import (
	"crypto/rand"
	"encoding/hex"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/kiln-dev/kiln/internal/kiln"
	"github.com/kiln-dev/kiln/internal/lang"
)

// Build caches per user (package programs, usercache.go): one host
// directory per user, DataDir/caches/<user id>, bound read-write into that
// user's sandboxes only, so that Go's build cache, compiled programs and
// Cargo's target directory carry across the user's one-shot runs, batch
// items and fresh sessions (a session from the warm pool, made before its
// user was known, has none). One-shot runs of a program language skip
// the one-shot pool for it.
//
// On the host, caches/ is root's, mode 0711: no one else can list it, and
// a sandbox of another user is never given the path. A user's directory
// and its parts (go, build, cargo) are mode 0711 and 0777: each sandbox of
// the user has a host uid of its own, and programs writes there with
// umask 0. A cache over its bound is moved aside whole and deleted (a
// sandbox still using it keeps its bind until it ends); the next run
// starts cold.

// DefaultBuildCacheBytes bounds a user's build caches by default.
const DefaultBuildCacheBytes = 2 << 30

// buildCacheParts are the top-level folders programs writes in.
var buildCacheParts = []string{"go", "build", "cargo"}

// trimEvery is the least time between two measures of a user's cache.
const trimEvery = 30 * time.Second

// buildCaches remembers when each user's cache was last measured.
type buildCaches struct {
	mu      sync.Mutex
	trimmed map[string]time.Time
	trimmer sync.Map // user id -> *sync.Mutex, one measure at a time
}

// buildCacheFor returns the user's build cache directory, made if
// missing, for a sandbox that runs language ("" for a session, which may
// run any), or "" when it gets none: caches off, no directory, or a
// language that builds nothing.
func (s *Service) buildCacheFor(u kiln.User, language string) string {
	if s.cfg.BuildCacheBytes < 0 || s.cfg.DataDir == "" || u.ID == "" || filepath.Base(u.ID) != u.ID || !filepath.IsLocal(u.ID) {
		return ""
	}
	if language != "" {
		l, err := lang.Lookup(language)
		if err != nil || l.Kind != lang.Program {
			return ""
		}
	}
	top := filepath.Join(s.cfg.DataDir, "caches")
	dir := filepath.Join(top, u.ID)
	if err := makeBuildCache(top, dir); err != nil {
		s.log.Warn("build cache", "user", u.ID, "err", err)
		return ""
	}
	return dir
}

// makeBuildCache makes the caches' folder and a user's, with their
// modes (see above); an existing one has them already.
func makeBuildCache(top, dir string) error {
	if err := os.Mkdir(top, 0o711); err != nil && !os.IsExist(err) {
		return err
	}
	if fi, err := os.Lstat(dir); err == nil && fi.IsDir() {
		return nil
	}
	// Made beside and renamed into place, so a sandbox never gets half
	// of one.
	tmp := filepath.Join(top, ".new-"+randomHex())
	if err := os.Mkdir(tmp, 0o711); err != nil {
		return err
	}
	for _, p := range buildCacheParts {
		if err := os.Mkdir(filepath.Join(tmp, p), 0o777); err != nil {
			os.RemoveAll(tmp)
			return err
		}
		// Mkdir's mode passes the process's umask.
		if err := os.Chmod(filepath.Join(tmp, p), 0o777); err != nil {
			os.RemoveAll(tmp)
			return err
		}
	}
	if err := os.Rename(tmp, dir); err != nil {
		os.RemoveAll(tmp)
		if fi, err2 := os.Lstat(dir); err2 == nil && fi.IsDir() {
			return nil // made by another run meanwhile
		}
		return err
	}
	return nil
}

// trimBuildCache measures the user's cache, at most every trimEvery, and
// drops it when it is over the bound.
func (s *Service) trimBuildCache(u kiln.User) {
	limit := s.cfg.BuildCacheBytes
	if limit == 0 {
		limit = DefaultBuildCacheBytes
	}
	s.caches.mu.Lock()
	if s.caches.trimmed == nil {
		s.caches.trimmed = map[string]time.Time{}
	}
	if time.Since(s.caches.trimmed[u.ID]) < trimEvery {
		s.caches.mu.Unlock()
		return
	}
	s.caches.trimmed[u.ID] = time.Now()
	s.caches.mu.Unlock()
	m, _ := s.caches.trimmer.LoadOrStore(u.ID, &sync.Mutex{})
	mu := m.(*sync.Mutex)
	if !mu.TryLock() {
		return
	}
	defer mu.Unlock()
	dir := filepath.Join(s.cfg.DataDir, "caches", u.ID)
	if size := treeSize(dir); size > limit {
		s.log.Info("build cache over its bound: dropped", "user", u.ID, "bytes", size, "limit", limit)
		dropBuildCache(dir)
	}
}

// dropBuildCache moves a user's cache aside and deletes it.
func dropBuildCache(dir string) {
	old := filepath.Join(filepath.Dir(dir), ".old-"+randomHex())
	if os.Rename(dir, old) == nil {
		os.RemoveAll(old)
	}
}

// treeSize is the bytes of the regular files below dir; symlinks are not
// followed.
func treeSize(dir string) int64 {
	var n int64
	filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if fi, err := d.Info(); err == nil {
				n += fi.Size()
			}
		}
		return nil
	})
	return n
}

func randomHex() string {
	var b [8]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
