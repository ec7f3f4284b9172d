package cgroups

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// Mount tables for the fake trees.
const (
	// hybridMountinfo is /proc/self/mountinfo of the development machine:
	// cgroup v1 controllers, and a cgroup2 mount with no useful controllers.
	hybridMountinfo = `22 27 0:21 / /proc rw,relatime - proc proc rw
23 27 0:22 / /sys rw,relatime - sysfs sysfs rw
24 27 0:6 / /dev rw,relatime - devtmpfs devtmpfs rw,size=12334492k,nr_inodes=3083623,mode=755
25 24 0:23 / /dev/shm rw,relatime - tmpfs tmpfs rw,size=24684092k
26 24 0:24 / /dev/pts rw,relatime - devpts devpts rw,mode=600,ptmxmode=000
27 1 254:0 / / rw,relatime - ext4 /dev/vda rw,discard,resv_strict,resuid=65534,resgid=65534
31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu
33 31 0:30 / /sys/fs/cgroup/cpuacct rw,relatime - cgroup cgroup rw,cpuacct
34 31 0:31 / /sys/fs/cgroup/cpuset rw,relatime - cgroup cgroup rw,cpuset
35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
36 31 0:33 / /sys/fs/cgroup/devices rw,relatime - cgroup cgroup rw,devices
37 31 0:34 / /sys/fs/cgroup/freezer rw,relatime - cgroup cgroup rw,freezer
38 31 0:35 / /sys/fs/cgroup/blkio rw,relatime - cgroup cgroup rw,blkio
39 31 0:36 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids
40 31 0:37 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,name=systemd
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
`
	// comountedMountinfo is a systemd v1 host: cpu and cpuacct share a
	// hierarchy, and there is no cgroup2 mount.
	comountedMountinfo = `25 18 0:22 / /sys/fs/cgroup ro,nosuid,nodev,noexec shared:9 - tmpfs tmpfs ro,mode=755
26 25 0:23 / /sys/fs/cgroup/systemd rw,nosuid,nodev,noexec,relatime shared:10 - cgroup cgroup rw,xattr,name=systemd
29 25 0:26 / /sys/fs/cgroup/cpu,cpuacct rw,nosuid,nodev,noexec,relatime shared:13 - cgroup cgroup rw,cpu,cpuacct
30 25 0:27 / /sys/fs/cgroup/memory rw,nosuid,nodev,noexec,relatime shared:14 - cgroup cgroup rw,memory
31 25 0:28 / /sys/fs/cgroup/pids rw,nosuid,nodev,noexec,relatime shared:15 - cgroup cgroup rw,pids
`
	// v2Mountinfo is a pure cgroup v2 host (systemd).
	v2Mountinfo = `22 1 259:2 / / rw,relatime shared:1 - ext4 /dev/nvme0n1p2 rw
24 22 0:22 / /sys rw,nosuid,nodev,noexec,relatime shared:2 - sysfs sysfs rw
27 24 0:25 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:4 - cgroup2 cgroup2 rw,nsdelegate,memory_recursiveprot
`
)

// Files the fake tree puts in every new group, and their first content.
var (
	v1GroupFiles = map[string]string{
		"cgroup.procs":                    "",
		"memory.limit_in_bytes":           "9223372036854771712\n",
		"memory.memsw.limit_in_bytes":     "9223372036854771712\n",
		"memory.swappiness":               "60\n",
		"memory.max_usage_in_bytes":       "0\n",
		"memory.oom_control":              "oom_kill_disable 0\nunder_oom 0\noom_kill 0\n",
		"memory.failcnt":                  "0\n",
		"pids.max":                        "max\n",
		"pids.events":                     "max 0\n",
		"cpu.cfs_period_us":               "100000\n",
		"cpu.cfs_quota_us":                "-1\n",
		"cpuacct.usage":                   "0\n",
		"notify_on_release":               "0\n",
		"memory.move_charge_at_immigrate": "0\n",
	}
	v2GroupFiles = map[string]string{
		"cgroup.procs":           "",
		"cgroup.controllers":     "cpu memory pids\n",
		"cgroup.subtree_control": "\n",
		"cgroup.kill":            "",
		"memory.max":             "max\n",
		"memory.swap.max":        "max\n",
		"memory.peak":            "0\n",
		"memory.events":          "low 0\nhigh 0\nmax 0\noom 0\noom_kill 0\noom_group_kill 0\n",
		"pids.max":               "max\n",
		"pids.events":            "max 0\n",
		"cpu.max":                "max 100000\n",
		"cpu.stat":               "usage_usec 0\nuser_usec 0\nsystem_usec 0\n",
	}
)

// fakeTree is a plain directory that mimics cgroupfs well enough to check
// what is written: mkdir fills a new group with control files, rmdir
// removes them with it.
type fakeTree struct {
	root  string
	files map[string]string // made in every new group
	first map[string]string // content each file started with, by path
}

// newFake makes a fake tree holding rootFiles (paths relative to the tree;
// a path ending in / is a directory) and detects a Host from mountinfo over
// it.
func newFake(t *testing.T, mountinfo string, rootFiles, groupFiles map[string]string) (*Host, *fakeTree) {
	t.Helper()
	f := &fakeTree{root: t.TempDir(), files: groupFiles, first: map[string]string{}}
	for p, content := range rootFiles {
		path := filepath.Join(f.root, p)
		if strings.HasSuffix(p, "/") {
			must(t, os.MkdirAll(path, 0o755))
			continue
		}
		must(t, os.MkdirAll(filepath.Dir(path), 0o755))
		must(t, os.WriteFile(path, []byte(content), 0o644))
		f.first[path] = content
	}
	h, err := DetectFrom(strings.NewReader(mountinfo), f.root)
	if err != nil {
		t.Fatalf("DetectFrom: %v", err)
	}
	h.fs = fsOps{mkdir: f.mkdir, rmdir: f.rmdir}
	return h, f
}

func (f *fakeTree) mkdir(path string) error {
	if err := os.Mkdir(path, 0o755); err != nil {
		return err
	}
	for name, content := range f.files {
		p := filepath.Join(path, name)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			return err
		}
		f.first[p] = content
	}
	return nil
}

func (f *fakeTree) rmdir(path string) error {
	entries, err := os.ReadDir(path)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if e.IsDir() {
			return &fs.PathError{Op: "rmdir", Path: path, Err: syscall.EBUSY}
		}
	}
	for _, e := range entries {
		if err := os.Remove(filepath.Join(path, e.Name())); err != nil {
			return err
		}
	}
	return os.Remove(path)
}

// written lists, relative to the tree, every directory below a root group
// (as "dir/") and every file whose content changed, with its content.
func (f *fakeTree) written(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(f.root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(f.root, path)
		if d.IsDir() {
			if strings.Contains(rel, "/kiln") {
				out[rel+"/"] = ""
			}
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if first, ok := f.first[path]; !ok || first != string(b) {
			out[rel] = string(b)
		}
		return nil
	})
	must(t, err)
	return out
}

// set gives the fake file at path (relative to the tree) new content.
func (f *fakeTree) set(t *testing.T, path, content string) {
	t.Helper()
	p := filepath.Join(f.root, path)
	must(t, os.WriteFile(p, []byte(content), 0o644))
	f.first[p] = content
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// Fake trees for each layout, ready for Create.
func newV1Fake(t *testing.T) (*Host, *fakeTree) {
	return newFake(t, hybridMountinfo, map[string]string{
		"sys/fs/cgroup/cpu/":                       "",
		"sys/fs/cgroup/cpuacct/":                   "",
		"sys/fs/cgroup/memory/":                    "",
		"sys/fs/cgroup/pids/":                      "",
		"sys/fs/cgroup/unified/cgroup.controllers": "hugetlb\n",
	}, v1GroupFiles)
}

func newV2Fake(t *testing.T) (*Host, *fakeTree) {
	return newFake(t, v2Mountinfo, map[string]string{
		"sys/fs/cgroup/cgroup.controllers":     "cpuset cpu io memory hugetlb pids rdma misc\n",
		"sys/fs/cgroup/cgroup.subtree_control": "memory\n",
	}, v2GroupFiles)
}
