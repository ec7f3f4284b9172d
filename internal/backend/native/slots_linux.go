package native

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// slot is a lease on one host uid range. The lease is an flock on a file in
// the runtime directory, so it is shared correctly between kiln processes
// and released by the kernel if its holder dies.
type slot struct {
	n    int
	file *os.File
}

func (b *Backend) acquireSlot() (*slot, error) {
	dir := filepath.Join(b.cfg.RuntimeDir, "slots")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("slots: %w", err)
	}
	start := rand.IntN(b.cfg.Slots)
	for i := 0; i < b.cfg.Slots; i++ {
		n := (start + i) % b.cfg.Slots
		f, err := os.OpenFile(filepath.Join(dir, fmt.Sprint(n)), os.O_RDWR|os.O_CREATE|unix.O_CLOEXEC, 0o600)
		if err != nil {
			return nil, fmt.Errorf("slot %d: %w", n, err)
		}
		err = unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			return &slot{n: n, file: f}, nil
		}
		f.Close()
		if !errors.Is(err, unix.EWOULDBLOCK) {
			return nil, fmt.Errorf("slot %d: %w", n, err)
		}
	}
	return nil, fmt.Errorf("all %d sandbox slots are in use", b.cfg.Slots)
}

func (s *slot) release() { s.file.Close() }

// hostUID is the host uid that uid 0 of the sandbox maps to.
func (b *Backend) hostUID(s *slot) uint32 { return b.cfg.UIDBase + uint32(s.n)*uidsPerSandbox }
