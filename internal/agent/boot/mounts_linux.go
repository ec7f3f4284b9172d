package boot

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/kiln-dev/kiln/internal/protocol"
)

// buildRoot assembles the sandbox's root on a tmpfs at cfg.StageDir and
// pivots into it. Every mount is private to this mount namespace.
func buildRoot(cfg *protocol.Boot) error {
	// Nothing we mount may propagate back to the host.
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("make / private: %w", err)
	}
	root := cfg.StageDir
	if err := unix.Mount("kiln-root", root, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "size=1m,nr_inodes=4096,mode=0755"); err != nil {
		return fmt.Errorf("mount root tmpfs on %s: %w", root, err)
	}
	if err := os.Mkdir(filepath.Join(root, emptyLower), 0o555); err != nil {
		return fmt.Errorf("mkdir %s: %w", emptyLower, err)
	}
	steps := []func(string, *protocol.Boot) error{
		bindSystem, buildEtc, mountProc, buildDev, mountTmp, mountWorkspace, mountProject, mountEgress,
	}
	for _, step := range steps {
		if err := step(root, cfg); err != nil {
			return err
		}
	}
	// The overlays keep what they need of it; the root shows nothing.
	if err := os.Remove(filepath.Join(root, emptyLower)); err != nil {
		return fmt.Errorf("remove %s: %w", emptyLower, err)
	}
	return pivot(root)
}

// bindSystem binds the host's runtime directories read-only and recreates
// the top-level symlinks (/bin -> usr/bin on merged-/usr systems).
func bindSystem(root string, cfg *protocol.Boot) error {
	for _, dir := range cfg.ROBinds {
		fi, err := os.Lstat(dir)
		if err != nil {
			continue // not on this host
		}
		dst := filepath.Join(root, dir)
		if fi.Mode()&os.ModeSymlink != 0 {
			target, err := os.Readlink(dir)
			if err != nil {
				return err
			}
			if err := mkdirAll(filepath.Dir(dst)); err != nil {
				return err
			}
			if err := os.Symlink(target, dst); err != nil {
				return fmt.Errorf("symlink %s: %w", dir, err)
			}
			continue
		}
		if err := shareRO(root, dir, dst); err != nil {
			return err
		}
	}
	return nil
}

// emptyLower is an empty directory in the stage, the second layer of the
// overlays shareRO makes (a read-only overlay needs two), removed before
// the pivot.
const emptyLower = ".kiln-empty"

// shareRO shows the host directory src at dst, read-only. It is an overlay
// rather than a bind: a file seen through an overlay is an inode of that
// overlay, so file locks (flock, POSIX and OFD locks) taken on it in one
// sandbox are not seen by another, where through a bind every sandbox
// would lock the host's one inode and could signal to the others by it.
// The data is still the host's: the page cache is shared and nothing is
// copied. A kernel that refuses overlays in a user namespace (before
// Linux 5.11) gets the bind; docs/SECURITY.md says what that leaves.
func shareRO(root, src, dst string) error {
	if err := mkdirAll(dst); err != nil {
		return err
	}
	opts := "lowerdir=" + escapeOverlay(src) + ":" + escapeOverlay(filepath.Join(root, emptyLower))
	if unix.Mount("kiln-ro", dst, "overlay", unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV, opts) == nil {
		return nil
	}
	return bindRO(src, dst, true)
}

// escapeOverlay escapes the characters overlayfs options give a meaning.
func escapeOverlay(p string) string {
	return strings.NewReplacer(`\`, `\\`, `:`, `\:`, `,`, `\,`).Replace(p)
}

// buildEtc makes a small /etc: synthetic identity files, plus a few host
// entries that programs need to run (the dynamic linker cache, certificates,
// alternatives symlinks) bound read-only.
func buildEtc(root string, cfg *protocol.Boot) error {
	etc := filepath.Join(root, "etc")
	if err := mkdirAll(etc); err != nil {
		return err
	}
	for _, f := range cfg.EtcFiles {
		if err := os.WriteFile(filepath.Join(etc, filepath.Base(f.Name)), []byte(f.Data), 0o644); err != nil {
			return fmt.Errorf("write /etc/%s: %w", f.Name, err)
		}
	}
	for _, name := range cfg.EtcBinds {
		rel := filepath.Clean(name)
		if filepath.IsAbs(rel) || rel == ".." || strings.HasPrefix(rel, "../") {
			return fmt.Errorf("etc bind %q leaves /etc", name)
		}
		src := filepath.Join("/etc", rel)
		fi, err := os.Lstat(src)
		if err != nil {
			continue
		}
		dst := filepath.Join(etc, rel)
		if err := mkdirAll(filepath.Dir(dst)); err != nil {
			return err
		}
		if fi.Mode()&os.ModeSymlink != 0 {
			// A symlink into /usr (localtime -> /usr/share/zoneinfo/...) works as is.
			target, err := os.Readlink(src)
			if err == nil {
				err = os.Symlink(target, dst)
			}
			if err != nil {
				return fmt.Errorf("symlink /etc/%s: %w", rel, err)
			}
			continue
		}
		bind := bindRO
		if fi.IsDir() {
			bind = func(src, dst string, _ bool) error { return shareRO(root, src, dst) }
		}
		if err := bind(src, dst, fi.IsDir()); err != nil {
			return err
		}
	}
	return nil
}

// mountProc mounts a fresh procfs for the sandbox's pid namespace and masks
// the files that describe the host kernel.
func mountProc(root string, _ *protocol.Boot) error {
	proc := filepath.Join(root, "proc")
	if err := mkdirAll(proc); err != nil {
		return err
	}
	flags := uintptr(unix.MS_NOSUID | unix.MS_NODEV | unix.MS_NOEXEC)
	if err := unix.Mount("proc", proc, "proc", flags, "hidepid=invisible"); err != nil {
		return fmt.Errorf("mount /proc: %w", err)
	}
	// No nested user namespaces, even if seccomp let one through. This
	// sysctl belongs to the sandbox's own user namespace, so it must be
	// set here, before /proc/sys becomes read-only below.
	if err := os.WriteFile(filepath.Join(proc, "sys/user/max_user_namespaces"), []byte("0"), 0); err != nil {
		return fmt.Errorf("forbid nested user namespaces: %w", err)
	}
	for _, p := range []string{"sys", "sysrq-trigger", "irq", "bus", "fs"} {
		path := filepath.Join(proc, p)
		if fi, err := os.Stat(path); err == nil {
			if err := bindRO(path, path, fi.IsDir()); err != nil {
				return err
			}
		}
	}
	for _, p := range ProcMasks {
		path := filepath.Join(proc, p)
		if _, err := os.Stat(path); err == nil {
			if err := unix.Mount("/dev/null", path, "", unix.MS_BIND, ""); err != nil {
				return fmt.Errorf("mask /proc/%s: %w", p, err)
			}
		}
	}
	for _, p := range ProcDirMasks {
		path := filepath.Join(proc, p)
		if _, err := os.Stat(path); err == nil {
			if err := unix.Mount("kiln-mask", path, "tmpfs", unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "size=4k,nr_inodes=2,mode=0555"); err != nil {
				return fmt.Errorf("mask /proc/%s: %w", p, err)
			}
		}
	}
	return nil
}

// ProcMasks are /proc files that describe the host rather than the
// sandbox, shown empty (/dev/null bound over them): the kernel's memory
// and symbols, and facts about the host that no program needs and that
// tell one sandbox what the host and its other tenants do. /proc/locks
// lists every file lock on the host; cmdline and config.gz describe its
// kernel; diskstats, interrupts and softirqs its devices and activity.
// What stays (stat, meminfo, loadavg, cpuinfo, uptime) is read by
// ordinary tools; docs/SECURITY.md lists it with the reasons. The Docker
// backend masks the same list in its containers (HostConfig.MaskedPaths).
var ProcMasks = []string{
	"kcore", "keys", "timer_list", "sched_debug", "kallsyms", "kmsg",
	"locks", "cmdline", "config.gz", "diskstats", "interrupts", "softirqs", "partitions", "swaps",
	"modules", "vmallocinfo", "buddyinfo", "zoneinfo", "pagetypeinfo", "schedstat", "key-users",
}

// ProcDirMasks are /proc directories shown empty (a read-only tmpfs):
// pressure holds the host's CPU, memory and I/O pressure.
var ProcDirMasks = []string{"pressure"}

// devNodes are bound from the host's /dev; nothing else is there.
var devNodes = []string{"null", "zero", "full", "random", "urandom", "tty"}

func buildDev(root string, cfg *protocol.Boot) error {
	dev := filepath.Join(root, "dev")
	if err := mkdirAll(dev); err != nil {
		return err
	}
	if err := unix.Mount("kiln-dev", dev, "tmpfs", unix.MS_NOSUID|unix.MS_NOEXEC, "size=64k,nr_inodes=64,mode=0755"); err != nil {
		return fmt.Errorf("mount /dev: %w", err)
	}
	for _, n := range devNodes {
		dst := filepath.Join(dev, n)
		if err := os.WriteFile(dst, nil, 0o666); err != nil {
			return err
		}
		if err := unix.Mount("/dev/"+n, dst, "", unix.MS_BIND, ""); err != nil {
			return fmt.Errorf("bind /dev/%s: %w", n, err)
		}
	}
	pts := filepath.Join(dev, "pts")
	if err := mkdirAll(pts); err != nil {
		return err
	}
	if err := unix.Mount("devpts", pts, "devpts", unix.MS_NOSUID|unix.MS_NOEXEC, "newinstance,ptmxmode=0666,mode=0620"); err != nil {
		return fmt.Errorf("mount /dev/pts: %w", err)
	}
	links := [][2]string{
		{"pts/ptmx", "ptmx"}, {"/proc/self/fd", "fd"},
		{"/proc/self/fd/0", "stdin"}, {"/proc/self/fd/1", "stdout"}, {"/proc/self/fd/2", "stderr"},
	}
	for _, l := range links {
		if err := os.Symlink(l[0], filepath.Join(dev, l[1])); err != nil {
			return err
		}
	}
	shm := filepath.Join(dev, "shm")
	if err := mkdirAll(shm); err != nil {
		return err
	}
	opts := fmt.Sprintf("size=%d,nr_inodes=%d,mode=1777", cfg.ShmBytes, cfg.Inodes)
	if err := unix.Mount("kiln-shm", shm, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, opts); err != nil {
		return fmt.Errorf("mount /dev/shm: %w", err)
	}
	return remountRO(dev, unix.MS_NOSUID|unix.MS_NOEXEC)
}

func mountTmp(root string, cfg *protocol.Boot) error {
	tmp := filepath.Join(root, "tmp")
	if err := mkdirAll(tmp); err != nil {
		return err
	}
	opts := fmt.Sprintf("size=%d,nr_inodes=%d,mode=1777", cfg.TmpBytes, cfg.Inodes)
	if err := unix.Mount("kiln-tmp", tmp, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, opts); err != nil {
		return fmt.Errorf("mount /tmp: %w", err)
	}
	return mountBuildCache(root, cfg)
}

// mountBuildCache binds the user's build caches (protocol.Boot.BuildCache)
// read-write on the new /tmp, opened refusing every symlink on its path
// as project mounts are.
func mountBuildCache(root string, cfg *protocol.Boot) error {
	if cfg.BuildCache == "" {
		return nil
	}
	dst := filepath.Join(root, protocol.BuildCachePath)
	if err := mkdirAll(dst); err != nil {
		return err
	}
	fd, err := unix.Openat2(unix.AT_FDCWD, cfg.BuildCache, &unix.OpenHow{
		Flags:   unix.O_PATH | unix.O_DIRECTORY | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
	})
	if err != nil {
		return fmt.Errorf("open build cache %s: %w", cfg.BuildCache, err)
	}
	defer unix.Close(fd)
	if err := unix.Mount(fmt.Sprintf("/proc/self/fd/%d", fd), dst, "", unix.MS_BIND, ""); err != nil {
		return fmt.Errorf("bind build cache: %w", err)
	}
	return unix.Mount("", dst, "", unix.MS_BIND|unix.MS_REMOUNT|unix.MS_NOSUID|unix.MS_NODEV, "")
}

func mountWorkspace(root string, cfg *protocol.Boot) error {
	ws := filepath.Join(root, cfg.Workspace)
	if err := mkdirAll(ws); err != nil {
		return err
	}
	if cfg.HostDir != "" {
		if err := unix.Mount(cfg.HostDir, ws, "", unix.MS_BIND, ""); err != nil {
			return fmt.Errorf("bind workspace: %w", err)
		}
		return unix.Mount("", ws, "", unix.MS_BIND|unix.MS_REMOUNT|unix.MS_NOSUID|unix.MS_NODEV, "")
	}
	opts := fmt.Sprintf("size=%d,nr_inodes=%d,mode=0755,uid=%d,gid=%d", cfg.WorkBytes, cfg.Inodes, cfg.UserUID, cfg.UserUID)
	if err := unix.Mount("kiln-workspace", ws, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, opts); err != nil {
		return fmt.Errorf("mount workspace: %w", err)
	}
	return nil
}

// mountProject binds the read-only host directories (protocol.Boot.Mounts).
// Each source is opened refusing every symlink on its path, and the bind
// is of that open directory, so a path changed since package native
// checked it cannot lead elsewhere. Symlinks inside the mounted tree are
// resolved by the sandbox's processes, in the sandbox's root.
func mountProject(root string, cfg *protocol.Boot) error {
	for _, m := range cfg.Mounts {
		fd, err := unix.Openat2(unix.AT_FDCWD, m.Source, &unix.OpenHow{
			Flags:   unix.O_PATH | unix.O_DIRECTORY | unix.O_CLOEXEC,
			Resolve: unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
		})
		if err != nil {
			return fmt.Errorf("open mount source %s: %w", m.Source, err)
		}
		err = bindRO(fmt.Sprintf("/proc/self/fd/%d", fd), filepath.Join(root, m.Target), true)
		unix.Close(fd)
		if err != nil {
			return fmt.Errorf("mount %s: %w", m.Target, err)
		}
	}
	return nil
}

// mountEgress binds the host's unix socket of the sandbox's egress proxy
// session at protocol.EgressSocketPath, the only thing in /run. The
// socket is opened refusing every symlink on its path, as project mounts
// are. Its mode (0600, owned by the sandbox's root) keeps user code, uid
// 1000, from connecting to it; user code goes through the agent's
// loopback port.
func mountEgress(root string, cfg *protocol.Boot) error {
	if cfg.EgressSocket == "" {
		return nil
	}
	dst := filepath.Join(root, protocol.EgressSocketPath)
	if err := mkdirAll(filepath.Dir(dst)); err != nil {
		return err
	}
	if err := os.WriteFile(dst, nil, 0o600); err != nil {
		return err
	}
	fd, err := unix.Openat2(unix.AT_FDCWD, cfg.EgressSocket, &unix.OpenHow{
		Flags:   unix.O_PATH | unix.O_CLOEXEC | unix.O_NOFOLLOW,
		Resolve: unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
	})
	if err != nil {
		return fmt.Errorf("open egress socket %s: %w", cfg.EgressSocket, err)
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFSOCK {
		return fmt.Errorf("egress socket %s is not a socket", cfg.EgressSocket)
	}
	if err := unix.Mount(fmt.Sprintf("/proc/self/fd/%d", fd), dst, "", unix.MS_BIND, ""); err != nil {
		return fmt.Errorf("bind egress socket: %w", err)
	}
	return nil
}

// pivot makes root the new / and detaches the host's tree entirely.
func pivot(root string) error {
	if err := unix.Chdir(root); err != nil {
		return err
	}
	// pivot_root(".", ".") stacks the old root on top of the new one; the
	// unmount below then removes it without needing a directory for it.
	if err := unix.PivotRoot(".", "."); err != nil {
		return fmt.Errorf("pivot_root: %w", err)
	}
	if err := unix.Unmount(".", unix.MNT_DETACH); err != nil {
		return fmt.Errorf("detach old root: %w", err)
	}
	if err := unix.Chdir("/"); err != nil {
		return err
	}
	return remountRO("/", unix.MS_NOSUID|unix.MS_NODEV)
}

// bindRO binds src on dst read-only, nosuid and nodev. In a user namespace
// the remount must repeat the flags the source mount has locked (noexec,
// atime), so they are read back from the new mount first.
func bindRO(src, dst string, dir bool) error {
	if dir {
		if err := mkdirAll(dst); err != nil {
			return err
		}
	} else if _, err := os.Stat(dst); err != nil {
		if err := mkdirAll(filepath.Dir(dst)); err != nil {
			return err
		}
		if err := os.WriteFile(dst, nil, 0o644); err != nil {
			return err
		}
	}
	if err := unix.Mount(src, dst, "", unix.MS_BIND, ""); err != nil {
		return fmt.Errorf("bind %s: %w", src, err)
	}
	return remountRO(dst, unix.MS_NOSUID|unix.MS_NODEV)
}

func remountRO(path string, extra uintptr) error {
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		return fmt.Errorf("statfs %s: %w", path, err)
	}
	locked := uintptr(0)
	for _, f := range [][2]uintptr{
		{unix.ST_NOEXEC, unix.MS_NOEXEC}, {unix.ST_NOATIME, unix.MS_NOATIME},
		{unix.ST_NODIRATIME, unix.MS_NODIRATIME}, {unix.ST_RELATIME, unix.MS_RELATIME},
		{unix.ST_NOSUID, unix.MS_NOSUID}, {unix.ST_NODEV, unix.MS_NODEV},
	} {
		if uintptr(st.Flags)&f[0] != 0 {
			locked |= f[1]
		}
	}
	flags := unix.MS_BIND | unix.MS_REMOUNT | unix.MS_RDONLY | extra | locked
	if err := unix.Mount("", path, "", flags, ""); err != nil {
		return fmt.Errorf("remount %s read-only: %w", path, err)
	}
	return nil
}

func mkdirAll(p string) error {
	if err := os.MkdirAll(p, 0o755); err != nil {
		return fmt.Errorf("mkdir %s: %w", p, err)
	}
	return nil
}
