package cgroups

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"syscall"
)

// Handles are files of a sandbox's user/ group, opened by the host (root)
// and passed into the sandbox as inherited descriptors. The kernel checks
// writes through them against the credentials of the opener, not the writer
// (Linux 5.16 and later, v1 and v2), so the unprivileged agent can move
// processes into user/ without any cgroup file being writable by it.
//
// They hold only what the sandbox may use: cgroup.procs of user/ (to join
// it), the peak memory file (to reset it) and read-only statistics; never a
// limit. Whoever holds them can move any process it can name into user/, so
// they belong only to processes in the sandbox's own pid namespace, and
// FromSpec marks them close-on-exec so user code never inherits them.
type Handles struct {
	version Version
	procs   []*os.File         // cgroup.procs, one per hierarchy
	stats   [numStats]*os.File // statPeak may be nil
}

// HandleSpec says which inherited descriptor is which file. It is
// JSON-serialisable, to be passed to the sandbox next to the descriptors.
type HandleSpec struct {
	Version Version `json:"version"`
	// Procs are cgroup.procs of user/, one per hierarchy (v1 has up to four).
	Procs []int `json:"procs"`
	// Peak is memory.max_usage_in_bytes (v1) or memory.peak (v2), -1 if
	// the kernel has none.
	Peak int `json:"peak"`
	// OOM is memory.oom_control (v1) or memory.events (v2).
	OOM int `json:"oom"`
	// Pids is pids.events.
	Pids int `json:"pids"`
	// CPU is cpuacct.usage (v1) or cpu.stat (v2).
	CPU int `json:"cpu"`
}

// OpenHandles opens the files of user/ for the sandbox. Pass Files to
// exec.Cmd.ExtraFiles and Spec to the child, and Close the host's copies
// once the child has started.
func (g *Group) OpenHandles() (_ *Handles, err error) {
	h := &Handles{version: g.host.Version}
	defer func() {
		if err != nil {
			h.Close()
		}
	}()
	for _, d := range g.dirs("user") {
		f, err := os.OpenFile(filepath.Join(d, "cgroup.procs"), os.O_WRONLY, 0)
		if err != nil {
			return nil, fmt.Errorf("open handles: %w", err)
		}
		h.procs = append(h.procs, f)
	}
	for s, path := range g.host.statFiles(g.rel("user")) {
		flag := os.O_RDONLY
		if stat(s) == statPeak {
			flag = os.O_RDWR // to reset it
		}
		f, err := os.OpenFile(path, flag, 0)
		if stat(s) == statPeak && g.host.Version == V2 && err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				continue // before Linux 5.19
			}
			// Read-only before Linux 6.12.
			f, err = os.OpenFile(path, os.O_RDONLY, 0)
		}
		if err != nil {
			return nil, fmt.Errorf("open handles: %w", err)
		}
		h.stats[s] = f
	}
	return h, nil
}

// Files are the open files, in the order Spec numbers them.
func (h *Handles) Files() []*os.File {
	files := slices.Clone(h.procs)
	for _, f := range h.stats {
		if f != nil {
			files = append(files, f)
		}
	}
	return files
}

// Spec describes Files for a child in which the first of them has
// descriptor firstFD and the rest follow in order, as with
// exec.Cmd.ExtraFiles (where firstFD is 3).
func (h *Handles) Spec(firstFD int) HandleSpec {
	next := firstFD
	fd := func(f *os.File) int {
		if f == nil {
			return -1
		}
		next++
		return next - 1
	}
	s := HandleSpec{Version: h.version}
	for _, f := range h.procs {
		s.Procs = append(s.Procs, fd(f))
	}
	s.Peak = fd(h.stats[statPeak])
	s.OOM = fd(h.stats[statOOM])
	s.Pids = fd(h.stats[statPids])
	s.CPU = fd(h.stats[statCPU])
	return s
}

// FromSpec rebuilds Handles in the sandbox from inherited descriptors, and
// marks them close-on-exec. The error wraps ErrInvalid if s is malformed.
func FromSpec(s HandleSpec) (_ *Handles, err error) {
	if s.Version != V1 && s.Version != V2 {
		return nil, fmt.Errorf("%w: handle spec: unknown version %d", ErrInvalid, s.Version)
	}
	if len(s.Procs) == 0 || len(s.Procs) > len(v1Controllers) {
		return nil, fmt.Errorf("%w: handle spec: %d cgroup.procs descriptors", ErrInvalid, len(s.Procs))
	}
	all := slices.Concat(s.Procs, []int{s.OOM, s.Pids, s.CPU})
	if s.Peak != -1 {
		all = append(all, s.Peak)
	}
	for i, fd := range all {
		if fd < 0 || slices.Contains(all[:i], fd) {
			return nil, fmt.Errorf("%w: handle spec: bad or repeated descriptor %d", ErrInvalid, fd)
		}
	}

	h := &Handles{version: s.Version}
	defer func() {
		if err != nil {
			h.Close()
		}
	}()
	open := func(fd int, name string) (*os.File, error) {
		// Check before os.NewFile, whose finalizer would close the number
		// later, when it may belong to another file.
		if err := checkFD(fd); err != nil {
			return nil, fmt.Errorf("%w: handle %s: descriptor %d: %w", ErrInvalid, name, fd, err)
		}
		closeOnExec(fd)
		return os.NewFile(uintptr(fd), name), nil
	}
	for i, fd := range s.Procs {
		f, err := open(fd, fmt.Sprintf("cgroup.procs#%d", i))
		if err != nil {
			return nil, err
		}
		h.procs = append(h.procs, f)
	}
	for st, fd := range [numStats]int{statPeak: s.Peak, statOOM: s.OOM, statPids: s.Pids, statCPU: s.CPU} {
		if fd == -1 {
			continue
		}
		f, err := open(fd, statName(s.Version, stat(st)))
		if err != nil {
			return nil, err
		}
		h.stats[st] = f
	}
	return h, nil
}

func statName(v Version, s stat) string {
	names := map[Version][numStats]string{
		V1: {"memory.max_usage_in_bytes", "memory.oom_control", "pids.events", "cpuacct.usage"},
		V2: {"memory.peak", "memory.events", "pids.events", "cpu.stat"},
	}
	return names[v][s]
}

// Join moves the calling process into user/ in every hierarchy.
func (h *Handles) Join() error {
	for _, f := range h.procs {
		if _, err := f.Write([]byte("0\n")); err != nil {
			return fmt.Errorf("join user group: %w", err)
		}
	}
	return nil
}

// ResetPeak restarts peak memory tracking from current use. On v1 the reset
// is seen by every reader; on v2 (Linux 6.12 and later) only by reads through
// these Handles. Where the kernel cannot reset it, ResetPeak does nothing.
func (h *Handles) ResetPeak() error {
	f := h.stats[statPeak]
	if f == nil {
		return nil
	}
	_, err := f.Write([]byte("0\n"))
	// Before Linux 6.12 memory.peak cannot be written: the handle was opened
	// read-only (EBADF), or read-write by root, which cgroupfs allows, and
	// the write is refused (EINVAL).
	if h.version == V2 && (errors.Is(err, syscall.EBADF) || errors.Is(err, syscall.EINVAL)) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("reset peak memory: %w", err)
	}
	return nil
}

// Usage reads what user/ has used through the handles.
func (h *Handles) Usage() (Usage, error) {
	var files [numStats][]byte
	for s, f := range h.stats {
		if f == nil {
			continue
		}
		b, err := readAt0(f)
		if err != nil {
			return Usage{}, fmt.Errorf("usage: %w", err)
		}
		files[s] = b
	}
	u, err := usageFrom(h.version, files)
	if err != nil {
		return Usage{}, fmt.Errorf("usage: %w", err)
	}
	return u, nil
}

// readAt0 reads f from the start with pread, which, unlike seek and read,
// shares no file offset with other readers.
func readAt0(f *os.File) ([]byte, error) {
	const max = 64 << 10 // the statistics files are well under 1 KiB
	buf := make([]byte, 4<<10)
	n, err := f.ReadAt(buf, 0)
	switch {
	case errors.Is(err, io.EOF):
		return buf[:n], nil
	case err != nil:
		return nil, err
	}
	// Filled the buffer: read the rest, up to max.
	rest, err := io.ReadAll(io.NewSectionReader(f, int64(n), max-int64(n)+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", f.Name(), err)
	}
	if n+len(rest) > max {
		return nil, fmt.Errorf("read %s: longer than %d bytes", f.Name(), max)
	}
	return append(buf[:n], rest...), nil
}

// Close closes the files. Handles are unusable afterwards.
func (h *Handles) Close() error {
	var errs []error
	for _, f := range h.Files() {
		errs = append(errs, f.Close())
	}
	h.procs, h.stats = nil, [numStats]*os.File{}
	return errors.Join(errs...)
}
