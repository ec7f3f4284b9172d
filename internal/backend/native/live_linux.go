package native

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"
)

// A live sandbox holds an flock on /run/kiln/live/<id> for as long as it
// exists. A sandbox whose file is not locked lost its owner (a kiln process
// that crashed or was killed), and the cleanup at start removes what it left.

func (b *Backend) liveDir() string { return filepath.Join(b.cfg.RuntimeDir, "live") }

// markLive creates and locks the sandbox's live file.
func (b *Backend) markLive(id string) (*os.File, error) {
	if err := os.MkdirAll(b.liveDir(), 0o700); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(filepath.Join(b.liveDir(), id), os.O_RDWR|os.O_CREATE|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, err
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		return nil, fmt.Errorf("lock %s: %w", f.Name(), err)
	}
	// Another process may have removed the file between our open and our
	// lock; a lock on a removed file protects nothing.
	var held, now unix.Stat_t
	if unix.Fstat(int(f.Fd()), &held) != nil || unix.Stat(f.Name(), &now) != nil || held.Ino != now.Ino {
		f.Close()
		return nil, fmt.Errorf("lock %s: the file was replaced while locking", f.Name())
	}
	return f, nil
}

// unmarkLive removes the live file; the lock goes with the descriptor.
func (b *Backend) unmarkLive(id string, f *os.File) {
	os.Remove(filepath.Join(b.liveDir(), id))
	f.Close()
}

// CleanOrphans removes the cgroups and live files of sandboxes whose owner
// is gone. Killing a sandbox's PID 1 is the kernel's job once its owner
// dies (the parent-death signal); what remains are cgroups and files.
func (b *Backend) CleanOrphans(ctx context.Context) (int, error) {
	ids, err := b.cg.Orphans()
	if err != nil {
		return 0, err
	}
	seen := map[string]bool{}
	for _, id := range ids {
		seen[id] = true
	}
	if ents, err := os.ReadDir(b.liveDir()); err == nil {
		for _, e := range ents {
			seen[e.Name()] = true
		}
	}
	n := 0
	var errs []error
	for id := range seen {
		f, err := b.markLive(id)
		if err != nil {
			continue // alive: another kiln process holds it
		}
		if g, err := b.cg.Group(id); err == nil {
			dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			if err := g.Destroy(dctx); err != nil {
				errs = append(errs, err)
			}
			cancel()
		}
		b.unmarkLive(id, f)
		n++
	}
	return n, errors.Join(errs...)
}
