package cgroups

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// DefaultRootGroup is the name of the group, directly below each hierarchy's
// mount point, that holds every sandbox's group.
const DefaultRootGroup = "kiln"

// Controllers kiln needs. On v1, cpuacct supplies the CPU time; on v2, cpu
// does both.
var (
	v1Controllers = []string{"memory", "pids", "cpu", "cpuacct"}
	v2Controllers = []string{"memory", "pids", "cpu"}
)

// Host is the cgroup setup of this machine.
type Host struct {
	Version Version
	// Mounts are the directories where each controller's hierarchy is
	// mounted. On v2 they are all the one unified mount; on v1 two may be the
	// same directory when co-mounted (cpu,cpuacct).
	Mounts Mounts
	// RootGroup is the name of the group below each mount that holds the
	// sandbox groups. Detect sets DefaultRootGroup; change it before use.
	RootGroup string

	fs fsOps
}

// Mounts are the mount points of the controllers kiln uses.
type Mounts struct {
	Memory, Pids, CPU, CPUAcct string
}

// fsOps make and remove cgroup directories. On cgroupfs the kernel fills a
// new directory with control files and lets rmdir remove a directory that
// still holds them; tests replace these to mimic that on a plain file system.
type fsOps struct {
	mkdir func(path string) error
	rmdir func(path string) error
}

// Detect finds the cgroup setup of this machine from /proc/self/mountinfo.
// The error, which wraps errors.ErrUnsupported, says what is missing.
func Detect() (*Host, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, fmt.Errorf("detect cgroups: %w", err)
	}
	defer f.Close()
	return DetectFrom(f, "/")
}

// DetectFrom is Detect with the mount table read from mountinfo and every
// mount point taken relative to fsRoot, so tests can point it at a fake tree.
//
// It picks cgroup v2 if a writable cgroup2 mount offers the memory, pids and
// cpu controllers; else cgroup v1 if memory, pids, cpu and cpuacct
// hierarchies are mounted writable; else it fails with an error that names
// what is missing and wraps errors.ErrUnsupported.
func DetectFrom(mountinfo io.Reader, fsRoot string) (*Host, error) {
	mounts, err := parseMountinfo(mountinfo)
	if err != nil {
		return nil, fmt.Errorf("detect cgroups: %w", err)
	}
	h := &Host{RootGroup: DefaultRootGroup, fs: fsOps{mkdir: mkdir, rmdir: rmdir}}

	var v2problems []string
	for _, m := range mounts {
		if m.fstype != "cgroup2" {
			continue
		}
		dir := filepath.Join(fsRoot, m.mountPoint)
		b, err := os.ReadFile(filepath.Join(dir, "cgroup.controllers"))
		if err != nil {
			v2problems = append(v2problems, fmt.Sprintf("cgroup2 at %s: %v", dir, err))
			continue
		}
		have := strings.Fields(string(b))
		if missing := without(v2Controllers, have); len(missing) > 0 {
			v2problems = append(v2problems, fmt.Sprintf("cgroup2 at %s lacks %s (has %s)",
				dir, strings.Join(missing, ", "), orNone(have)))
			continue
		}
		if m.readOnly {
			v2problems = append(v2problems, fmt.Sprintf("cgroup2 at %s is mounted read-only", dir))
			continue
		}
		h.Version = V2
		h.Mounts = Mounts{Memory: dir, Pids: dir, CPU: dir, CPUAcct: dir}
		return h, nil
	}
	if len(v2problems) == 0 {
		v2problems = append(v2problems, "no cgroup2 mount")
	}

	// v1: the first writable mount of each controller, preferring one that
	// shows the whole hierarchy (root "/") over a bind mount of a subtree.
	found := map[string]mount{}
	var readOnly []string
	for _, m := range mounts {
		if m.fstype != "cgroup" {
			continue
		}
		for _, c := range strings.Split(m.superOptions, ",") {
			if !slices.Contains(v1Controllers, c) {
				continue
			}
			if m.readOnly {
				readOnly = append(readOnly, fmt.Sprintf("%s at %s", c, filepath.Join(fsRoot, m.mountPoint)))
				continue
			}
			if old, ok := found[c]; !ok || old.root != "/" && m.root == "/" {
				found[c] = m
			}
		}
	}
	var missing []string
	for _, c := range v1Controllers {
		if _, ok := found[c]; !ok {
			missing = append(missing, c)
		}
	}
	if len(missing) == 0 {
		dir := func(c string) string { return filepath.Join(fsRoot, found[c].mountPoint) }
		h.Version = V1
		h.Mounts = Mounts{Memory: dir("memory"), Pids: dir("pids"), CPU: dir("cpu"), CPUAcct: dir("cpuacct")}
		return h, nil
	}
	v1problem := "cgroup v1 has no writable hierarchy for " + strings.Join(missing, ", ")
	if len(readOnly) > 0 {
		v1problem += " (read-only: " + strings.Join(readOnly, ", ") + ")"
	}
	return nil, fmt.Errorf("detect cgroups: %w: need cgroup v2 with memory, pids and cpu, or cgroup v1 with memory, pids, cpu and cpuacct: %s; %s",
		errors.ErrUnsupported, strings.Join(v2problems, "; "), v1problem)
}

// Describe says in plain words what h uses, for `kiln doctor`.
func (h *Host) Describe() string {
	var parts []string
	if h.Version == V2 {
		parts = append(parts, "memory,pids,cpu at "+h.Mounts.Memory)
	} else {
		var dirs []string
		names := map[string][]string{}
		for _, c := range h.controllerMounts() {
			if names[c.dir] == nil {
				dirs = append(dirs, c.dir)
			}
			names[c.dir] = append(names[c.dir], c.name)
		}
		for _, d := range dirs {
			parts = append(parts, strings.Join(names[d], ",")+" at "+d)
		}
	}
	return fmt.Sprintf("%s (%s); sandbox groups under %s/", h.Version, strings.Join(parts, "; "), h.RootGroup)
}

type controllerMount struct{ name, dir string }

func (h *Host) controllerMounts() []controllerMount {
	return []controllerMount{
		{"memory", h.Mounts.Memory},
		{"pids", h.Mounts.Pids},
		{"cpu", h.Mounts.CPU},
		{"cpuacct", h.Mounts.CPUAcct},
	}
}

// hierarchies are the distinct mount points h uses, in a stable order.
func (h *Host) hierarchies() []string {
	var dirs []string
	for _, c := range h.controllerMounts() {
		if !slices.Contains(dirs, c.dir) {
			dirs = append(dirs, c.dir)
		}
	}
	return dirs
}

// check reports whether h can be used: it was made by Detect and RootGroup
// is one plain name.
func (h *Host) check() error {
	if h.Version != V1 && h.Version != V2 || h.fs.mkdir == nil {
		return fmt.Errorf("%w: cgroups.Host not made by Detect", ErrInvalid)
	}
	r := h.RootGroup
	if r == "" || r == "." || r == ".." || strings.ContainsAny(r, "/\x00") {
		return fmt.Errorf("%w: root group %q is not a plain directory name", ErrInvalid, r)
	}
	return nil
}

// Orphans lists the ids of the sandbox groups under the root group, in any
// hierarchy, sorted. Call it at start to find groups a crash left behind, and
// destroy them with Host.Group and Group.Destroy.
func (h *Host) Orphans() ([]string, error) {
	if err := h.check(); err != nil {
		return nil, err
	}
	var ids []string
	for _, m := range h.hierarchies() {
		dir := filepath.Join(m, h.RootGroup)
		entries, err := os.ReadDir(dir)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("list sandbox groups: %w", err)
		}
		for _, e := range entries {
			if e.IsDir() && validID(e.Name()) == nil && !slices.Contains(ids, e.Name()) {
				ids = append(ids, e.Name())
			}
		}
	}
	slices.Sort(ids)
	return ids, nil
}

// Group returns the group of sandbox id without checking that it exists, so
// that a group listed by Orphans can be inspected or destroyed.
func (h *Host) Group(id string) (*Group, error) {
	if err := h.check(); err != nil {
		return nil, err
	}
	if err := validID(id); err != nil {
		return nil, err
	}
	return &Group{host: h, id: id}, nil
}

// mount is one line of /proc/self/mountinfo, the fields kiln needs.
type mount struct {
	root, mountPoint     string
	readOnly             bool
	fstype, superOptions string
}

// parseMountinfo parses the format of proc(5) /proc/pid/mountinfo:
//
//	36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 - ext3 /dev/root rw,errors=continue
func parseMountinfo(r io.Reader) ([]mount, error) {
	var mounts []mount
	s := bufio.NewScanner(r)
	// Lines of overlay mounts with many layers are longer than the default 64 KiB.
	s.Buffer(nil, 4<<20)
	for n := 1; s.Scan(); n++ {
		f := strings.Fields(s.Text())
		sep := slices.Index(f, "-")
		if sep < 6 || len(f) < sep+4 {
			return nil, fmt.Errorf("mountinfo line %d: malformed: %q", n, s.Text())
		}
		mounts = append(mounts, mount{
			root:         unescapeOctal(f[3]),
			mountPoint:   unescapeOctal(f[4]),
			readOnly:     slices.Contains(strings.Split(f[5], ","), "ro"),
			fstype:       f[sep+1],
			superOptions: f[sep+3],
		})
	}
	if err := s.Err(); err != nil {
		return nil, fmt.Errorf("mountinfo: %w", err)
	}
	return mounts, nil
}

// unescapeOctal undoes the kernel's escaping of space, tab, newline and
// backslash in mountinfo paths (\040 and so on).
func unescapeOctal(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) && isOctal(s[i+1]) && isOctal(s[i+2]) && isOctal(s[i+3]) {
			b.WriteByte((s[i+1]-'0')<<6 | (s[i+2]-'0')<<3 | (s[i+3] - '0'))
			i += 3
			continue
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func isOctal(c byte) bool { return '0' <= c && c <= '7' }

// without returns the elements of want that are not in have.
func without(want, have []string) []string {
	var out []string
	for _, w := range want {
		if !slices.Contains(have, w) {
			out = append(out, w)
		}
	}
	return out
}

func orNone(s []string) string {
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, ", ")
}
