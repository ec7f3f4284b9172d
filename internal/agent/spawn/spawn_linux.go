package spawn

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/landlock-lsm/go-landlock/landlock"
	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"

	"github.com/kiln-dev/kiln/internal/cgroups"
	"github.com/kiln-dev/kiln/internal/seccomp"
)

// Main runs the spawn stage and never returns.
func Main() {
	code, err := run()
	if err != nil {
		fmt.Fprintf(os.Stderr, "kiln: %v\n", err)
	}
	os.Exit(code)
}

func run() (int, error) {
	// Everything below acts on the calling thread and must reach execve on it.
	runtime.LockOSThread()
	ctl := json.NewDecoder(io.LimitReader(os.NewFile(CtlFD, "ctl"), 2*MaxRequest))
	var cfg Config
	if err := ctl.Decode(&cfg); err != nil {
		return ExitSetupFailed, fmt.Errorf("spawn config: %w", err)
	}
	filter, err := prepare(cfg)
	if err != nil {
		return ExitSetupFailed, err
	}
	var req Request
	if err := ctl.Decode(&req); err != nil {
		if errors.Is(err, io.EOF) {
			return 0, nil // a spare that was not needed
		}
		return ExitSetupFailed, fmt.Errorf("spawn request: %w", err)
	}
	if len(req.Argv) == 0 || req.Argv[0] == "" {
		return ExitSetupFailed, errors.New("spawn: no program given")
	}
	return start(cfg, req, filter)
}

// prepare is phase 1.
func prepare(cfg Config) ([]bpf.RawInstruction, error) {
	filter, err := seccomp.Program()
	if err != nil {
		return nil, fmt.Errorf("seccomp: %w", err)
	}
	// Joining costs an RCU grace period on cgroup v1 (several ms on an idle
	// machine), which is why it happens here, before the request.
	if err := joinCgroup(cfg.Cgroup); err != nil {
		return nil, err
	}
	// A cgroup namespace rooted at the user cgroup: the program sees its
	// own cgroup as "/" and nothing of the agent's or the host's layout.
	if err := unix.Unshare(unix.CLONE_NEWCGROUP); err != nil {
		return nil, fmt.Errorf("cgroup namespace: %w", err)
	}
	if err := setRlimits(cfg); err != nil {
		return nil, err
	}
	return filter, nil
}

// start is phase 2.
func start(cfg Config, req Request, filter []bpf.RawInstruction) (int, error) {
	if err := dropPrivileges(cfg.UID); err != nil {
		return ExitSetupFailed, err
	}
	if err := os.Chdir(req.Dir); err != nil {
		return ExitSetupFailed, fmt.Errorf("working directory %s: %w", req.Dir, errors.Unwrap(err))
	}
	path, err := lookPath(req.Argv[0], req.Env)
	if err != nil {
		return ExitNotFound, err
	}
	if err := restrictPaths(cfg); err != nil {
		return ExitSetupFailed, err
	}
	// close_range marks rather than closes, so stdio and the runtime keep
	// working until the exec itself drops every descriptor above 2 (above
	// 3 for a kernel, whose channel is fd 3).
	first := uint(ChannelFD)
	if req.Channel {
		first = ChannelFD + 1
		if _, err := unix.FcntlInt(ChannelFD, unix.F_SETFD, 0); err != nil {
			return ExitSetupFailed, fmt.Errorf("kernel channel: %w", err)
		}
	}
	if err := unix.CloseRange(first, ^uint(0), unix.CLOSE_RANGE_CLOEXEC); err != nil {
		return ExitSetupFailed, fmt.Errorf("close inherited descriptors: %w", err)
	}
	disableSpeculation()
	if err := seccomp.Load(filter); err != nil {
		return ExitSetupFailed, fmt.Errorf("seccomp: %w", err)
	}
	err = unix.Exec(path, req.Argv, req.Env)
	switch {
	case errors.Is(err, unix.ENOENT):
		return ExitNotFound, fmt.Errorf("%s: no such file or directory", req.Argv[0])
	case errors.Is(err, unix.EACCES):
		return ExitSetupFailed, fmt.Errorf("%s: permission denied", req.Argv[0])
	}
	return ExitSetupFailed, fmt.Errorf("exec %s: %w", req.Argv[0], err)
}

func joinCgroup(spec []byte) error {
	if len(spec) == 0 {
		return errors.New("spawn: no cgroup given; refusing to run without limits")
	}
	var hs cgroups.HandleSpec
	if err := json.Unmarshal(spec, &hs); err != nil {
		return fmt.Errorf("cgroup spec: %w", err)
	}
	h, err := cgroups.FromSpec(hs)
	if err != nil {
		return err
	}
	if err := h.Join(); err != nil {
		return fmt.Errorf("join user cgroup: %w", err)
	}
	return h.Close()
}

func setRlimits(cfg Config) error {
	for _, l := range []struct {
		res int
		v   uint64
	}{
		{unix.RLIMIT_NOFILE, uint64(cfg.OpenFiles)},
		{unix.RLIMIT_FSIZE, uint64(cfg.FileSize)},
		// 1, not 0: the kernel ignores RLIMIT_CORE when core_pattern pipes
		// to a helper program, except that 1 means "never dump".
		{unix.RLIMIT_CORE, 1},
	} {
		if err := unix.Setrlimit(l.res, &unix.Rlimit{Cur: l.v, Max: l.v}); err != nil {
			return fmt.Errorf("setrlimit %d: %w", l.res, err)
		}
	}
	return nil
}

// dropPrivileges empties the bounding set, becomes uid/gid, and clears every
// remaining capability set, so nothing can be regained by exec.
func dropPrivileges(uid int) error {
	for c := 0; c <= unix.CAP_LAST_CAP; c++ {
		if err := unix.Prctl(unix.PR_CAPBSET_DROP, uintptr(c), 0, 0, 0); err != nil && !errors.Is(err, unix.EINVAL) {
			return fmt.Errorf("drop capability %d from the bounding set: %w", c, err)
		}
	}
	if err := unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0); err != nil {
		return fmt.Errorf("clear ambient capabilities: %w", err)
	}
	// Raw calls change this thread only, which is the one that execs; the
	// other runtime threads die at execve. syscall.Setuid would stop the
	// world to change them all.
	for _, c := range []struct {
		name           string
		nr, a0, a1, a2 uintptr
	}{
		{"setgroups", unix.SYS_SETGROUPS, 0, 0, 0},
		{"setresgid", unix.SYS_SETRESGID, uintptr(uid), uintptr(uid), uintptr(uid)},
		{"setresuid", unix.SYS_SETRESUID, uintptr(uid), uintptr(uid), uintptr(uid)},
	} {
		if _, _, e := unix.RawSyscall(c.nr, c.a0, c.a1, c.a2); e != 0 {
			return fmt.Errorf("%s: %w", c.name, e)
		}
	}
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capset(&hdr, &data[0]); err != nil {
		return fmt.Errorf("clear capabilities: %w", err)
	}
	return nil
}

// lookPath finds name on the PATH of the program's own environment.
func lookPath(name string, env []string) (string, error) {
	if strings.Contains(name, "/") {
		return name, nil
	}
	path := ""
	for _, e := range env {
		if v, ok := strings.CutPrefix(e, "PATH="); ok {
			path = v
		}
	}
	for _, dir := range filepath.SplitList(path) {
		if dir == "" {
			dir = "."
		}
		p := filepath.Join(dir, name)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s: command not found", name)
}

// restrictPaths applies Landlock: read and execute anywhere in the (already
// read-only) root, write only where the sandbox allows writes. Within
// those, a file may be renamed or linked from one directory to another
// (Landlock's refer right): rustc writes its metadata in a temporary
// directory and renames it beside it, so Cargo's builds need it, and the
// file gains nothing by the move. Signals and
// abstract unix sockets are scoped to the user's own domain, which keeps
// user code from signalling the agent.
func restrictPaths(cfg Config) error {
	// One layer for paths and scopes: a layer always denies moving a file
	// between directories unless it grants refer, so a second, scope-only
	// layer would deny it everywhere. Networking is the sandbox's own
	// namespace's affair.
	conf := landlock.V6
	conf.HandledAccessNet = 0
	if !cfg.Landlock {
		conf = conf.BestEffort()
	}
	rules := []landlock.Rule{
		landlock.RODirs("/"),
		landlock.RWDirs(cfg.WritePath...).WithRefer().IgnoreIfMissing(),
		landlock.RWFiles("/dev/null", "/dev/zero", "/dev/full", "/dev/tty").WithIoctlDev().IgnoreIfMissing(),
		landlock.RWDirs("/dev/pts").WithIoctlDev().IgnoreIfMissing(),
	}
	if err := conf.Restrict(rules...); err != nil {
		return fmt.Errorf("landlock: %w", err)
	}
	return nil
}

// disableSpeculation turns off, for good, the speculative execution that
// lets one process read another's memory through a side channel: store
// bypass (Spectre v4) and, where the kernel leaves it to each process,
// indirect branch speculation (Spectre v2 between user processes). The
// setting is per thread; this thread is the one that execs, and children
// inherit it. A kernel that does not offer a control (the CPU is not
// affected, or the mitigation is always on or off) refuses the call, and
// that is fine: there is nothing to ask for then.
func disableSpeculation() {
	for _, which := range []uintptr{unix.PR_SPEC_STORE_BYPASS, unix.PR_SPEC_INDIRECT_BRANCH} {
		unix.Prctl(unix.PR_SET_SPECULATION_CTRL, which, unix.PR_SPEC_FORCE_DISABLE, 0, 0)
	}
}
