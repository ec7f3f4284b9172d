//go:build amd64 || arm64

package seccomp

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"
)

// The kernel tests re-run this test binary as a child with helperEnv set.
// TestMain sends the child to helper, which locks its thread, calls Install
// and then does what its mode says; the parent checks what it reports.
const helperEnv = "KILN_SECCOMP_TEST_HELPER"

func TestMain(m *testing.M) {
	if mode := os.Getenv(helperEnv); mode != "" {
		os.Exit(helper(mode, os.Args[1:]))
	}
	os.Exit(m.Run())
}

// probe is one raw system call the probe child makes under the filter.
// Each is harmless without the filter too, and most would then give a
// different result (as root: success, EINVAL, EFAULT, EBADF), so they test
// the filter rather than the kernel's own permission checks.
type probe struct {
	name string
	nr   uintptr
	args [6]uintptr
	want string // "ok" or the errno's name
}

func probes() []probe {
	return []probe{
		{"getpid", unix.SYS_GETPID, [6]uintptr{}, "ok"},
		{"mount", unix.SYS_MOUNT, [6]uintptr{}, "EPERM"},
		{"umount2", unix.SYS_UMOUNT2, [6]uintptr{}, "EPERM"},
		{"unshare(CLONE_NEWUSER)", unix.SYS_UNSHARE, [6]uintptr{unix.CLONE_NEWUSER}, "EPERM"},
		// CLONE_FS makes the kernel refuse this with EINVAL if it gets there.
		{"clone(CLONE_NEWUSER|CLONE_FS)", unix.SYS_CLONE, [6]uintptr{unix.CLONE_NEWUSER | unix.CLONE_FS}, "EPERM"},
		{"clone3", unix.SYS_CLONE3, [6]uintptr{}, "ENOSYS"},
		{"io_uring_setup", unix.SYS_IO_URING_SETUP, [6]uintptr{1}, "ENOSYS"},
		{"number 999", 999, [6]uintptr{}, "ENOSYS"},
		{"socket(AF_PACKET)", unix.SYS_SOCKET, [6]uintptr{unix.AF_PACKET, unix.SOCK_RAW}, "EAFNOSUPPORT"},
		{"socket(AF_VSOCK)", unix.SYS_SOCKET, [6]uintptr{unix.AF_VSOCK, unix.SOCK_STREAM}, "EAFNOSUPPORT"},
		{"socket(AF_NETLINK, NETLINK_AUDIT)", unix.SYS_SOCKET, [6]uintptr{unix.AF_NETLINK, unix.SOCK_RAW, unix.NETLINK_AUDIT}, "EAFNOSUPPORT"},
		{"socket(AF_INET, SOCK_RAW)", unix.SYS_SOCKET, [6]uintptr{unix.AF_INET, unix.SOCK_RAW, unix.IPPROTO_ICMP}, "EPERM"},
		{"socket(AF_INET, SOCK_STREAM)", unix.SYS_SOCKET, [6]uintptr{unix.AF_INET, unix.SOCK_STREAM | unix.SOCK_CLOEXEC}, "ok"},
		{"socket(AF_NETLINK, NETLINK_ROUTE)", unix.SYS_SOCKET, [6]uintptr{unix.AF_NETLINK, unix.SOCK_RAW | unix.SOCK_CLOEXEC, unix.NETLINK_ROUTE}, "ok"},
		{"keyctl", unix.SYS_KEYCTL, [6]uintptr{0x7fffffff}, "EPERM"},
		{"ioctl(TIOCSTI)", unix.SYS_IOCTL, [6]uintptr{0, unix.TIOCSTI}, "EPERM"},
		{"personality(PER_LINUX32)", unix.SYS_PERSONALITY, [6]uintptr{8}, "EPERM"},
		{"personality(query)", unix.SYS_PERSONALITY, [6]uintptr{0xffffffff}, "ok"},
		{"ptrace", unix.SYS_PTRACE, [6]uintptr{0x7fff}, "EPERM"},
		{"bpf", unix.SYS_BPF, [6]uintptr{0x7fff}, "EPERM"},
		{"perf_event_open", unix.SYS_PERF_EVENT_OPEN, [6]uintptr{}, "EPERM"},
		{"userfaultfd", unix.SYS_USERFAULTFD, [6]uintptr{0x7fffffff}, "EPERM"},
		{"setns", unix.SYS_SETNS, [6]uintptr{^uintptr(0)}, "EPERM"},
		{"pidfd_getfd", unix.SYS_PIDFD_GETFD, [6]uintptr{^uintptr(0)}, "EPERM"},
		{"fanotify_init", unix.SYS_FANOTIFY_INIT, [6]uintptr{0x7fffffff}, "EPERM"},
	}
}

// helper runs in the child. It returns the exit status.
func helper(mode string, args []string) int {
	runtime.LockOSThread()
	// A killed child must not leave a core file behind.
	if err := unix.Setrlimit(unix.RLIMIT_CORE, &unix.Rlimit{}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	if err := Install(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	switch mode {
	case "probe":
		for _, p := range probes() {
			r, _, errno := unix.RawSyscall6(p.nr, p.args[0], p.args[1], p.args[2], p.args[3], p.args[4], p.args[5])
			got := "ok"
			if errno != 0 {
				got = unix.ErrnoName(errno)
			} else if p.nr == unix.SYS_SOCKET {
				unix.Close(int(r))
			}
			fmt.Printf("%s\t%s\n", p.name, got)
		}
		// The Go runtime keeps working under the filter, and a child
		// started from the filtered thread runs.
		runtime.GC()
		done := make(chan bool)
		go func() { time.Sleep(time.Millisecond); done <- true }()
		<-done
		out, err := exec.Command("/bin/sh", "-c", "echo ok").Output()
		fmt.Printf("go os/exec\t%s%v\n", strings.TrimSpace(string(out)), errOrEmpty(err))
		return 0
	case "exec":
		env := slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, helperEnv+"=") })
		err := unix.Exec(args[0], args, env)
		fmt.Fprintf(os.Stderr, "exec %s: %v\n", args[0], err)
		return 2
	case "x32":
		unix.RawSyscall(x32Bit|unix.SYS_GETPID, 0, 0, 0)
		fmt.Println("survived an x32 call")
		return 0
	}
	fmt.Fprintf(os.Stderr, "unknown helper mode %q\n", mode)
	return 2
}

func errOrEmpty(err error) string {
	if err == nil {
		return ""
	}
	return " " + err.Error()
}

// runHelper starts the child in mode and returns its stdout and error.
func runHelper(t *testing.T, mode string, args ...string) (string, error) {
	t.Helper()
	ok, why := Supported()
	if !ok {
		t.Skipf("kernel does not accept seccomp filters: %s", why)
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(t.Context(), exe, args...)
	cmd.Env = append(os.Environ(), helperEnv+"="+mode)
	cmd.Dir = t.TempDir()
	cmd.WaitDelay = 5 * time.Second
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if stderr.Len() > 0 {
		t.Logf("%s child stderr:\n%s", mode, stderr.String())
	}
	return string(out), err
}

func TestKernelProbes(t *testing.T) {
	out, err := runHelper(t, "probe")
	if err != nil {
		t.Fatalf("probe child: %v\nstdout:\n%s", err, out)
	}
	got := make(map[string]string)
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		name, result, _ := strings.Cut(sc.Text(), "\t")
		got[name] = result
	}
	want := map[string]string{"go os/exec": "ok"}
	for _, p := range probes() {
		want[p.name] = p.want
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("results under the filter (-want +got):\n%s", diff)
	}
}

func TestKernelExec(t *testing.T) {
	const python = `import threading, subprocess
t = threading.Thread(target=lambda: None); t.start(); t.join()
print(subprocess.run(["/bin/sh", "-c", "echo ok"], capture_output=True, text=True).stdout, end="")`
	tests := []struct {
		name string
		argv []string
	}{
		{"sh", []string{"/bin/sh", "-c", "echo ok"}},
		{"sh pipeline", []string{"/bin/sh", "-c", `x=$(echo ok | cat); echo "$x"`}},
		{"python3 threads and subprocess", []string{"/usr/bin/python3", "-c", python}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := os.Stat(tt.argv[0]); err != nil {
				t.Skipf("needs %s: %v", tt.argv[0], err)
			}
			got, err := runHelper(t, "exec", tt.argv...)
			if err != nil {
				t.Fatalf("%q: %v\nstdout:\n%s", tt.argv, err, got)
			}
			if got != "ok\n" {
				t.Errorf("%q: got stdout %q, want %q", tt.argv, got, "ok\n")
			}
		})
	}
}

func TestKernelKillsX32(t *testing.T) {
	if !native.x32 {
		t.Skipf("%s has no x32 ABI", native.name)
	}
	out, err := runHelper(t, "x32")
	var exit *exec.ExitError
	if !errors.As(err, &exit) {
		t.Fatalf("x32 child: got error %v, stdout %q; want it killed by SIGSYS", err, out)
	}
	ws := exit.Sys().(syscall.WaitStatus)
	if !ws.Signaled() || ws.Signal() != syscall.SIGSYS {
		t.Errorf("x32 child: got %v, want killed by SIGSYS", exit)
	}
}
