//go:build linux

package security

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/kiln-dev/kiln/internal/kiln"
)

// TestReadOnlyRoot: nothing outside /workspace, /tmp and /dev/shm can be
// written, created, removed or renamed, in any language. Opening an
// existing file of /etc for writing fails with EACCES rather than EROFS:
// the files belong to users the sandbox's user is not, and the kernel
// checks that before it looks at the read-only mount. /usr is a read-only
// overlay (file locks stay private to the sandbox), which says EROFS
// first; where the kernel gives a bind instead, it is EACCES as for /etc.
func TestReadOnlyRoot(t *testing.T) {
	env(t)
	t.Run("python", func(t *testing.T) {
		res := attack(t, "python", py(`
probe("write /usr", write, "/usr/kiln-pwn")
probe("write /etc", write, "/etc/kiln-pwn")
probe("write /", write, "/kiln-pwn")
probe("write /bin", write, "/bin/kiln-pwn")
probe("write /sbin", write, "/sbin/kiln-pwn")
probe("write /lib", write, "/lib/kiln-pwn")
probe("overwrite /usr/bin/python3", lambda: open("/usr/bin/python3", "r+b"))
probe("overwrite /etc/passwd", write, "/etc/passwd")
probe("overwrite /etc/ld.so.cache", write, "/etc/ld.so.cache")
probe("append /etc/hosts", lambda: open("/etc/hosts", "a"))
probe("mkdir /usr/lib/kiln", os.mkdir, "/usr/lib/kiln")
probe("unlink /etc/passwd", os.unlink, "/etc/passwd")
probe("rename /etc/hosts", os.rename, "/etc/hosts", "/etc/hosts2")
probe("chmod /usr/bin/bash", os.chmod, "/usr/bin/bash", 0o4777)
probe("symlink /", os.symlink, "/workspace", "/kiln-link")
probe("utime /etc/passwd", os.utime, "/etc/passwd", None)
probe("truncate /etc/passwd", os.truncate, "/etc/passwd", 0)
probe("write /dev", write, "/dev/kiln-pwn")
probe("write /workspace", write, "/workspace/ok")
probe("write /tmp", write, "/tmp/ok")
probe("write /dev/shm", write, "/dev/shm/ok")
`), quick)
		expectLines(t, res,
			"write /usr EROFS",
			"write /etc EROFS",
			"write / EROFS",
			"write /bin EROFS",
			"write /sbin EROFS",
			"write /lib EROFS",
			"overwrite /usr/bin/python3 "+usrWriteErrno(t),
			"overwrite /etc/passwd EROFS",
			"overwrite /etc/ld.so.cache EROFS",
			"append /etc/hosts EACCES",
			"mkdir /usr/lib/kiln EROFS",
			"unlink /etc/passwd EROFS",
			"rename /etc/hosts EROFS",
			"chmod /usr/bin/bash EROFS",
			"symlink / EROFS",
			"utime /etc/passwd EROFS",
			"truncate /etc/passwd EACCES",
			"write /dev EROFS",
			"write /workspace ok",
			"write /tmp ok",
			"write /dev/shm ok",
		)
	})
	t.Run("bash", func(t *testing.T) {
		res := attack(t, "bash", sh(`
probe "write /usr" sh -c 'echo pwned > /usr/kiln-pwn'
probe "write /etc" sh -c 'echo pwned > /etc/kiln-pwn'
probe "write /" touch /kiln-pwn
probe "write /bin" cp /bin/true /bin/kiln-pwn
probe "overwrite /etc/passwd" sh -c 'echo "root::0:0::/:/bin/sh" >> /etc/passwd'
probe "rm /etc/hosts" rm -f /etc/hosts
probe "mkdir /usr/local/kiln" mkdir /usr/local/kiln
probe "ln /usr/bin" ln -s /workspace /usr/bin/kiln-link
probe "write /workspace" touch /workspace/ok
`), quick)
		expectLines(t, res,
			"write /usr EROFS",
			"write /etc EROFS",
			"write / EROFS",
			"write /bin EROFS",
			"overwrite /etc/passwd EACCES",
			"rm /etc/hosts EROFS",
			"mkdir /usr/local/kiln EROFS",
			"ln /usr/bin EROFS",
			"write /workspace ok",
		)
	})
	t.Run("node", func(t *testing.T) {
		res := attack(t, "node", js(`
probe("write /usr", () => fs.writeFileSync("/usr/kiln-pwn", "pwned"));
probe("write /etc", () => fs.writeFileSync("/etc/kiln-pwn", "pwned"));
probe("write /", () => fs.writeFileSync("/kiln-pwn", "pwned"));
probe("append /etc/passwd", () => fs.appendFileSync("/etc/passwd", "pwned"));
probe("unlink /etc/hosts", () => fs.unlinkSync("/etc/hosts"));
probe("mkdir /usr/kiln", () => fs.mkdirSync("/usr/kiln"));
probe("write /workspace", () => fs.writeFileSync("/workspace/ok", "fine"));
`), quick)
		expectLines(t, res,
			"write /usr EROFS",
			"write /etc EROFS",
			"write / EROFS",
			"append /etc/passwd EACCES",
			"unlink /etc/hosts EROFS",
			"mkdir /usr/kiln EROFS",
			"write /workspace ok",
		)
	})
}

// TestHostSecretsUnreachable: /etc/shadow and /root do not exist, and the
// suite's canary secret (under /root and, world-readable, under the host's
// /tmp) is not reachable by its path, through /proc, or by searching.
func TestHostSecretsUnreachable(t *testing.T) {
	s := env(t)
	rootSecret := filepath.Join(s.rootCanary, "secret.txt")
	tmpSecret := filepath.Join(s.tmpCanary, "secret.txt")
	// The program gets the secret in two pieces so that its own source
	// does not contain the string it searches for.
	prefix, rest, _ := strings.Cut(s.secret, "SECRET-")
	prefix += "SECRET-"
	t.Run("python", func(t *testing.T) {
		res := attack(t, "python", py(`
ROOT_SECRET = `+quote(rootSecret)+`
TMP_SECRET = `+quote(tmpSecret)+`
NAME = `+quote(filepath.Base(s.rootCanary))+`
TMPNAME = `+quote(filepath.Base(s.tmpCanary))+`
SECRET = `+quote(prefix)+` + `+quote(rest)+`
probe("read /etc/shadow", lambda: open("/etc/shadow").read())
probe("stat /etc/shadow", os.stat, "/etc/shadow")
probe("stat /etc/gshadow", os.stat, "/etc/gshadow")
probe("list /root", os.listdir, "/root")
probe("list /home", os.listdir, "/home")
probe("read root canary", lambda: open(ROOT_SECRET).read())
probe("read tmp canary", lambda: open(TMP_SECRET).read())
probe("read via /proc/1/root", lambda: open("/proc/1/root" + ROOT_SECRET).read())
probe("read via /proc/self/root", lambda: open("/proc/self/root" + TMP_SECRET).read())
probe("read /proc/1/root/etc/shadow", lambda: open("/proc/1/root/etc/shadow").read())
# Only /etc/ssl/certs and openssl.cnf are bound from the host: its private
# TLS keys are not in the sandbox at all.
probe("list /etc/ssl/private", os.listdir, "/etc/ssl/private")
probe("read snakeoil key", lambda: open("/etc/ssl/private/ssl-cert-snakeoil.key").read())
# Search the whole visible tree by name, and every writable or synthetic
# place by content.
names = []
for d, dirs, files in os.walk("/", onerror=lambda e: None):
    if d == "/":
        dirs[:] = [x for x in dirs if x != "proc"]
    for n in dirs + files:
        if NAME in n or TMPNAME in n or n in ("shadow", "gshadow") and d == "/etc":
            names.append(os.path.join(d, n))
print("found by name", names)
hits = []
for top in ("/etc", "/tmp", "/workspace", "/dev/shm"):
    for d, dirs, files in os.walk(top, onerror=lambda e: None):
        for n in files:
            p = os.path.join(d, n)
            try:
                with open(p, "rb") as f:
                    if SECRET.encode() in f.read(8 << 20):
                        hits.append(p)
            except OSError:
                pass
print("found by content", hits)
`), kiln.Limits{Timeout: 30 * time.Second})
		expectLines(t, res,
			"read /etc/shadow ENOENT",
			"stat /etc/shadow ENOENT",
			"stat /etc/gshadow ENOENT",
			"list /root ENOENT",
			"list /home ENOENT",
			"read root canary ENOENT",
			"read tmp canary ENOENT",
			"read via /proc/1/root ENOENT",
			"read via /proc/self/root ENOENT",
			"read /proc/1/root/etc/shadow ENOENT",
			"list /etc/ssl/private ENOENT",
			"read snakeoil key ENOENT",
			"found by name []",
			"found by content []",
		)
	})
	t.Run("bash", func(t *testing.T) {
		res := attack(t, "bash", sh(`
probe "cat /etc/shadow" cat /etc/shadow
probe "ls /root" ls /root
probe "cat root canary" cat `+quote(rootSecret)+`
probe "cat tmp canary" cat `+quote(tmpSecret)+`
probe "getent shadow" sh -c 'getent shadow root | grep .'
`), quick)
		expectLines(t, res,
			"cat /etc/shadow ENOENT",
			"ls /root ENOENT",
			"cat root canary ENOENT",
			"cat tmp canary ENOENT",
			"getent shadow failed: ",
		)
	})
	t.Run("node", func(t *testing.T) {
		res := attack(t, "node", js(`
probe("read /etc/shadow", () => fs.readFileSync("/etc/shadow"));
probe("readdir /root", () => fs.readdirSync("/root"));
probe("read root canary", () => fs.readFileSync(`+quote(rootSecret)+`));
probe("read tmp canary", () => fs.readFileSync(`+quote(tmpSecret)+`));
`), quick)
		expectLines(t, res,
			"read /etc/shadow ENOENT",
			"readdir /root ENOENT",
			"read root canary ENOENT",
			"read tmp canary ENOENT",
		)
	})
}

// Golden views of the sandbox's file system, reviewed by hand. Entries
// marked "if on the host" are bound from the host only where it has them.
var (
	goldenRoot         = []string{"bin", "dev", "etc", "lib", "proc", "sbin", "tmp", "usr", "workspace"}
	goldenRootIfOnHost = []string{"lib32", "lib64", "libx32"}

	// Synthetic files kiln writes into /etc: identity, name service, no DNS.
	goldenEtc = []string{"group", "hostname", "hosts", "nsswitch.conf", "passwd", "resolv.conf"}
	// Host /etc entries programs need, none holding secrets, bound
	// read-only where the host has them. Never shadow, sudoers, ssh, ...
	goldenEtcIfOnHost = []string{
		"alternatives", "bash.bashrc", "ca-certificates", "fonts", "inputrc",
		"java-17-openjdk", "ld.so.cache", "ld.so.conf", "ld.so.conf.d", "localtime",
		"magic", "matplotlibrc", "mime.types", "php", "profile", "protocols", "python3",
		"python3.11", "services", "ssl", "timezone", "xdg",
	}

	// A minimal /dev: the harmless character devices, a private devpts,
	// a private /dev/shm and the usual symlinks. No disks, no mem, no kmsg.
	goldenDev    = []string{"fd", "full", "null", "ptmx", "pts", "random", "shm", "stderr", "stdin", "stdout", "tty", "urandom", "zero"}
	goldenDevPts = []string{"ptmx"}
)

func withHostEntries(always, ifOnHost []string, hostDir string) []string {
	want := slices.Clone(always)
	for _, n := range ifOnHost {
		if _, err := os.Lstat(filepath.Join(hostDir, n)); err == nil {
			want = append(want, n)
		}
	}
	slices.Sort(want)
	return want
}

// TestGoldenFileSystemView: the top of the tree, /etc, /dev and /tmp hold
// exactly the reviewed entries and nothing else of the host.
func TestGoldenFileSystemView(t *testing.T) {
	s := env(t)
	res := attack(t, "python", `
import json, os
print(json.dumps({d: sorted(os.listdir(d)) for d in ("/", "/etc", "/dev", "/dev/pts", "/tmp", "/dev/shm")}))
`, quick)
	var got map[string][]string
	if err := json.Unmarshal([]byte(res.Stdout), &got); err != nil {
		t.Fatalf("cannot parse the listing: %v\n%v", err, res)
	}
	want := map[string][]string{
		"/":        withHostEntries(goldenRoot, goldenRootIfOnHost, "/"),
		"/etc":     withHostEntries(goldenEtc, goldenEtcIfOnHost, "/etc"),
		"/dev":     goldenDev,
		"/dev/pts": goldenDevPts,
		"/tmp":     {},
		"/dev/shm": {},
	}
	if s.onDocker() {
		for dir, extra := range dockerViewExtra {
			want[dir] = append(slices.Clone(want[dir]), extra...)
			slices.Sort(want[dir])
			t.Logf("held differently on Docker: %s also has %v: %s", dir, extra, dockerViewWhy)
		}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("the sandbox's file system differs from the reviewed view (-want +got):\n%s", diff)
	}
	t.Run("bash", func(t *testing.T) {
		res := attack(t, "bash", `ls -A / | tr '\n' ' '`, quick)
		if got, want := strings.Fields(res.Stdout), wantDir("/"); !slices.Equal(got, want) {
			t.Errorf("ls -A / = %v, want %v", got, want)
		}
	})
}

// TestSetuidBinariesDoNotElevate runs every setuid and setgid file the
// sandbox can see and records the credentials of each while it runs and as
// it exits (from /proc, before it is reaped): they must stay the user's.
func TestSetuidBinariesDoNotElevate(t *testing.T) {
	env(t)
	res := attack(t, "python", py(strings.ReplaceAll(`
import stat, subprocess, time
found = []
for top in ("/usr/bin", "/usr/sbin", "/usr/lib", "/usr/libexec"):
    for d, dirs, files in os.walk(top):
        for n in files:
            p = os.path.join(d, n)
            try:
                st = os.lstat(p)
            except OSError:
                continue
            if stat.S_ISREG(st.st_mode) and st.st_mode & (stat.S_ISUID | stat.S_ISGID):
                found.append(p)
print("setuid files", len(found))
bad = []
ran = []
for p in sorted(found):
    try:
        proc = subprocess.Popen([p], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    except PermissionError:
        continue  # not executable by others (e.g. dbus-daemon-launch-helper)
    ran.append(p)
    seen = set()
    deadline = time.time() + 2
    while True:
        try:
            with open("/proc/%d/status" % proc.pid) as f:
                for line in f:
                    if line.startswith(("Uid:", "Gid:")):
                        seen.add(line.split()[0] + " " + " ".join(line.split()[1:]))
        except OSError:
            pass
        # Wait without reaping, so that the exiting process's credentials
        # can still be read once more.
        r = os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
        if r is not None or time.time() > deadline:
            break
    if r is None:
        proc.kill()
    else:
        try:
            with open("/proc/%d/status" % proc.pid) as f:
                for line in f:
                    if line.startswith(("Uid:", "Gid:")):
                        seen.add(line.split()[0] + " " + " ".join(line.split()[1:]))
        except OSError:
            pass
    proc.stdin.close()
    proc.wait()
    for s in seen:
        if s not in ("Uid: KILNUID KILNUID KILNUID KILNUID", "Gid: KILNUID KILNUID KILNUID KILNUID"):
            bad.append((p, s))
print("ran", len(ran) > 0)
print("elevated", bad)
print("euid", os.geteuid())
`, "KILNUID", sandboxUID)), kiln.Limits{Timeout: 60 * time.Second})
	// The host's own setuid binaries are what the sandbox sees in /usr.
	var n int
	for _, top := range []string{"/usr/bin", "/usr/sbin", "/usr/lib", "/usr/libexec"} {
		filepath.WalkDir(top, func(p string, d os.DirEntry, err error) error {
			if err == nil && d.Type().IsRegular() {
				if fi, err := d.Info(); err == nil && fi.Mode()&(os.ModeSetuid|os.ModeSetgid) != 0 {
					n++
				}
			}
			return nil
		})
	}
	if n == 0 {
		t.Log("this host has no setuid or setgid binaries under /usr; the case proves little here")
	}
	expectLines(t, res, "setuid files "+itoa(n), "ran "+pyBool(n > 0), "elevated []", "euid "+sandboxUID)

	t.Run("su", func(t *testing.T) {
		if _, err := os.Stat("/usr/bin/su"); err != nil {
			t.Skip("no /usr/bin/su on this host")
		}
		res := attack(t, "bash", `echo id -u | /usr/bin/su -c 'id -u' root; echo "su exit $?"; id -u`, kiln.Limits{Timeout: 10 * time.Second})
		if strings.Contains(res.Stdout, "\n0\n") || strings.HasPrefix(res.Stdout, "0\n") {
			t.Errorf("su gave the sandbox uid 0:\n%v", res)
		}
		if !strings.HasSuffix(res.Stdout, "\n"+sandboxUID+"\n") || strings.Contains(res.Stdout, "su exit 0") {
			t.Errorf("su must fail and the user stay %s:\n%v", sandboxUID, res)
		}
	})
}

// TestMountFamilyFails: mount, umount, pivot_root, chroot and the new mount
// API all fail, from a program and from the command-line tools.
func TestMountFamilyFails(t *testing.T) {
	env(t)
	needAMD64(t)
	t.Run("python", func(t *testing.T) {
		res := attack(t, "python", py(`
sysc("mount tmpfs", 165, b"none", b"/tmp", b"tmpfs", 0, 0)
sysc("mount bind", 165, b"/", b"/tmp", None, 4096, 0)
sysc("mount remount rw", 165, None, b"/", None, 32 | 4096, 0)
sysc("umount2 /proc", 166, b"/proc", 2)
sysc("umount2 /", 166, b"/", 2)
sysc("pivot_root", 155, b"/tmp", b"/tmp")
sysc("chroot", 161, b"/tmp")
probe("os.chroot", os.chroot, "/tmp")
sysc("fsopen", 430, b"tmpfs", 0)
sysc("open_tree", 428, -100, b"/", 1)
sysc("move_mount", 429, -100, b"/tmp", -100, b"/", 0)
sysc("fspick", 433, -100, b"/", 0)
sysc("mount_setattr", 442, -100, b"/", 0, 0, 0)
`), quick)
		expectLines(t, res,
			"mount tmpfs EPERM",
			"mount bind EPERM",
			"mount remount rw EPERM",
			"umount2 /proc EPERM",
			"umount2 / EPERM",
			"pivot_root EPERM",
			"chroot EPERM",
			"os.chroot EPERM",
			"fsopen EPERM",
			"open_tree EPERM",
			"move_mount EPERM",
			"fspick EPERM",
			"mount_setattr EPERM",
		)
	})
	t.Run("bash", func(t *testing.T) {
		res := attack(t, "bash", sh(`
probe "mount tmpfs" mount -t tmpfs none /tmp
probe "mount proc" mount -t proc proc /tmp
umount /proc 2>/dev/null || echo "umount /proc refused"
umount -l / 2>/dev/null || echo "umount -l / refused"
mountpoint -q /proc && echo "/proc still mounted"
probe "chroot" /usr/sbin/chroot /tmp /bin/true
probe "unshare -m" unshare -m true
`), quick)
		expectLines(t, res,
			"mount tmpfs EPERM",
			"mount proc EPERM",
			"umount /proc refused",
			"umount -l / refused",
			"/proc still mounted",
			"chroot EPERM",
			"unshare -m EPERM",
		)
	})
}

// TestProcAndInheritedFDs: the program cannot write its own or anyone's
// executable through /proc, cannot see PID 1 (the agent), and holds no
// descriptor but stdin, stdout and stderr.
func TestProcAndInheritedFDs(t *testing.T) {
	env(t)
	t.Run("python", func(t *testing.T) {
		res := attack(t, "python", py(`
probe("open /proc/self/exe for write", os.open, "/proc/self/exe", os.O_WRONLY)
probe("open /proc/self/exe O_RDWR", os.open, "/proc/self/exe", os.O_RDWR)
probe("readlink /proc/1/exe", os.readlink, "/proc/1/exe")
probe("open /proc/1/exe", os.open, "/proc/1/exe", os.O_RDONLY)
probe("list /proc/1/root", os.listdir, "/proc/1/root")
probe("list /proc/1/fd", os.listdir, "/proc/1/fd")
probe("read /proc/1/environ", lambda: open("/proc/1/environ").read())
probe("open /proc/1/mem", os.open, "/proc/1/mem", os.O_RDWR)
probe("readlink /proc/1/cwd", os.readlink, "/proc/1/cwd")
print("fds", sorted(os.listdir("/proc/self/fd"), key=int))
for fd in (0, 1, 2):
    print(fd, os.readlink("/proc/self/fd/%d" % fd).split(":")[0])
`), quick)
		expectLines(t, res,
			"open /proc/self/exe for write "+usrWriteErrno(t),
			"open /proc/self/exe O_RDWR "+usrWriteErrno(t),
			"readlink /proc/1/exe ENOENT",
			"open /proc/1/exe ENOENT",
			"list /proc/1/root ENOENT",
			"list /proc/1/fd ENOENT",
			"read /proc/1/environ ENOENT",
			"open /proc/1/mem ENOENT",
			"readlink /proc/1/cwd ENOENT",
			"fds ['0', '1', '2', '3']", // 3 is the listing's own
			"0 pipe",
			"1 pipe",
			"2 pipe",
		)
	})
	t.Run("bash", func(t *testing.T) {
		// ls lists its own /proc/self/fd: 0-2 and the directory it reads.
		res := attack(t, "bash", sh(`
echo "fds $(ls /proc/self/fd | tr '\n' ' ')"
ls /proc/$$/fd > /tmp/fds
echo "bash fds $(tr '\n' ' ' < /tmp/fds)"
probe "exe for write" sh -c 'exec 3>>/proc/self/exe'
`), quick)
		expectLines(t, res,
			"fds 0 1 2 3 ",
			"bash fds 0 1 2 255 ", // 255 is bash's own copy of its script
			"exe for write "+usrWriteErrno(t),
		)
	})
}

// TestDeviceNodes: no device can be made, and /dev holds only the reviewed
// harmless ones.
func TestDeviceNodes(t *testing.T) {
	env(t)
	res := attack(t, "python", py(`
import stat
probe("mknod /tmp/mem", os.mknod, "/tmp/mem", stat.S_IFCHR | 0o666, os.makedev(1, 1))
probe("mknod /tmp/sda", os.mknod, "/tmp/sda", stat.S_IFBLK | 0o666, os.makedev(8, 0))
probe("mknod /workspace/kmsg", os.mknod, "/workspace/kmsg", stat.S_IFCHR | 0o666, os.makedev(1, 11))
probe("mknod /dev/shm/port", os.mknod, "/dev/shm/port", stat.S_IFCHR | 0o666, os.makedev(1, 4))
probe("mknod /dev/mem", os.mknod, "/dev/mem", stat.S_IFCHR | 0o666, os.makedev(1, 1))
for d in ("mem", "kmem", "port", "kmsg", "sda", "vda", "nvme0", "kvm", "loop0", "loop-control", "fuse", "net/tun", "console", "tty0", "ttyS0", "cpu", "disk", "mapper", "autofs", "hpet", "rtc0", "snd", "dri", "vhost-net", "userfaultfd"):
    probe("stat /dev/" + d, os.stat, "/dev/" + d)
probe("read /dev/urandom", lambda: len(open("/dev/urandom", "rb").read(16)) == 16 or 1/0)
probe("write /dev/null", lambda: open("/dev/null", "w").write("x"))
probe("write /dev/full", os.write, os.open("/dev/full", os.O_WRONLY), b"x")
`), quick)
	want := []string{
		"mknod /tmp/mem EPERM",
		"mknod /tmp/sda EPERM",
		"mknod /workspace/kmsg EPERM",
		"mknod /dev/shm/port EPERM",
		"mknod /dev/mem EROFS",
	}
	for _, d := range []string{"mem", "kmem", "port", "kmsg", "sda", "vda", "nvme0", "kvm", "loop0", "loop-control", "fuse", "net/tun", "console", "tty0", "ttyS0", "cpu", "disk", "mapper", "autofs", "hpet", "rtc0", "snd", "dri", "vhost-net", "userfaultfd"} {
		want = append(want, "stat /dev/"+d+" ENOENT")
	}
	want = append(want, "read /dev/urandom ok", "write /dev/null ok", "write /dev/full ENOSPC")
	expectLines(t, res, want...)
}

// TestProcSysAndSys: kernel tunables cannot be written, /sys is absent,
// and the knobs a process has over itself cannot raise its standing.
func TestProcSysAndSys(t *testing.T) {
	env(t)
	t.Run("python", func(t *testing.T) {
		res := attack(t, "python", py(`
probe("core_pattern", lambda: open("/proc/sys/kernel/core_pattern", "w").write("|/tmp/x"))
probe("hostname", lambda: open("/proc/sys/kernel/hostname", "w").write("pwned"))
probe("drop_caches", lambda: open("/proc/sys/vm/drop_caches", "w").write("3"))
probe("max_user_namespaces", lambda: open("/proc/sys/user/max_user_namespaces", "w").write("100"))
probe("ip_forward", lambda: open("/proc/sys/net/ipv4/ip_forward", "w").write("1"))
probe("poweroff_cmd", lambda: open("/proc/sys/kernel/poweroff_cmd", "w").write("/tmp/x"))
probe("sysrq-trigger", lambda: open("/proc/sysrq-trigger", "w").write("b"))
probe("list /sys", os.listdir, "/sys")
probe("cgroup release_agent", lambda: open("/sys/fs/cgroup/memory/release_agent", "w").write("/tmp/x"))
probe("oom_score_adj -1000", lambda: open("/proc/self/oom_score_adj", "w").write("-1000"))
probe("own uid_map", lambda: open("/proc/self/uid_map", "w").write("0 0 1"))
`), quick)
		sysrq := "sysrq-trigger EACCES"
		if _, err := os.Stat("/proc/sysrq-trigger"); err != nil {
			sysrq = "sysrq-trigger ENOENT" // the host kernel has no magic SysRq
		}
		expectLines(t, res,
			"core_pattern EROFS",
			"hostname EROFS",
			"drop_caches EROFS",
			"max_user_namespaces EROFS",
			"ip_forward EROFS",
			"poweroff_cmd EROFS",
			sysrq,
			"list /sys ENOENT",
			"cgroup release_agent ENOENT",
			"oom_score_adj -1000 EACCES",
			"own uid_map EACCES",
		)
	})
	t.Run("bash", func(t *testing.T) {
		res := attack(t, "bash", sh(`
probe "core_pattern" sh -c 'echo "|/tmp/x" > /proc/sys/kernel/core_pattern'
probe "ls /sys" ls /sys
`), quick)
		expectLines(t, res, "core_pattern EROFS", "ls /sys ENOENT")
	})
}

// usrWriteErrno is how opening a file of /usr for writing fails: EROFS on
// the /usr overlay, EACCES on the read-only bind a kernel without overlays
// in user namespaces gets (the permission check comes first there).
func usrWriteErrno(t *testing.T) string {
	if usrFSType(t) == "overlay" {
		return "EROFS"
	}
	return "EACCES"
}
