package agent

import (
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/kiln-dev/kiln/internal/agent/spawn"
	"github.com/kiln-dev/kiln/internal/cgroups"
	"github.com/kiln-dev/kiln/internal/protocol"
)

// Unisolated is the configuration of an agent that runs as a plain host
// process: no namespaces, no cgroups, no seccomp or Landlock, user code
// as the calling user. Only the in-process test backend
// (internal/backend/unboxed, which no command imports) starts one; the
// sandbox's boot path never can, as nothing in protocol.Boot selects it.
type Unisolated struct {
	Workspace string   // a host directory
	Env       []string // the whole environment of user processes
	// OpenFiles and FileSize, when set, are the rlimits of user processes
	// (as a native spawn stage sets them, with no core dumps): a
	// container's agent runs each program through the rlimit stage of its
	// own binary (spawn.RlimitArg), so the agent's own limits stay. Zero
	// (the unboxed test backend) sets none.
	OpenFiles int64 `json:",omitempty"`
	FileSize  int64 `json:",omitempty"`
	// Confine, with the rlimits, has the rlimit stage confine each user
	// program further (spawn.RlimitConfineArg: kiln's seccomp filter, a
	// priority below the agent's): for a container that is not the whole
	// of the isolation, a Pod.
	Confine bool `json:",omitempty"`
	// Egress, when set, is the egress proxy's unix socket (a container's
	// bind mount of it); the agent bridges protocol.EgressProxyAddr to it,
	// as in a native sandbox.
	Egress string `json:",omitempty"`
}

// ServeUnisolated runs an agent on conn, for tests only, in the calling
// process, which it makes the subreaper of everything it starts: its
// descendants are the "sandbox" that killAll and killCell stop. It
// returns when the service hangs up. The caller's process must be
// dedicated to it: it clears the environment and reaps every child.
func ServeUnisolated(conn *os.File, cfg Unisolated) error {
	// The connection must not reach user processes.
	syscall.CloseOnExec(int(conn.Fd()))
	a, err := newUnisolated(cfg, conn)
	if err != nil {
		return err
	}
	return a.serve(protocol.NewReader(conn))
}

// newUnisolated is an unisolated agent whose messages go to out, with its
// first spare started and its egress bridge serving.
func newUnisolated(cfg Unisolated, out io.Writer) (*Agent, error) {
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		return nil, err
	}
	os.Clearenv()
	a := &Agent{
		cfg: protocol.AgentConfig{
			Workspace: cfg.Workspace,
			Env:       cfg.Env,
			UserUID:   -1, // files keep the caller's owner: Lchown(-1, -1) changes nothing
			OpenFiles: cfg.OpenFiles,
			FileSize:  cfg.FileSize,
		},
		unisolated: true,
		confine:    cfg.Confine,
		cg:         &cgroups.Handles{}, // no cgroup: usage comes from rusage
		out:        protocol.NewWriter(out),
		reaper:     startReaper(),
		log:        slog.New(slog.NewTextHandler(os.Stderr, nil)),
		execs:      map[uint64]*execution{},
		kernels:    map[string]*kernel{},
		specs:      map[string]protocol.Kernel{},
		cells:      map[uint64]*cellRun{},
		stdins:     map[uint64]*stdinQueue{},
	}
	a.refill()
	if cfg.Egress != "" {
		b, err := listenEgress(protocol.EgressProxyAddr, cfg.Egress)
		if err != nil {
			return nil, fmt.Errorf("egress bridge: %w", err)
		}
		go b.serve()
	}
	return a, nil
}

// newPlainSpare is a spare without a process: the program itself starts
// when the request comes, as the caller, in a session of its own, with
// the same descriptors a spawn stage would give it.
func (a *Agent) newPlainSpare() (*spare, error) {
	p, err := newPipes()
	if err != nil {
		return nil, err
	}
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		p.closeAll()
		return nil, err
	}
	ours, theirs := os.NewFile(uintptr(fds[0]), "channel"), os.NewFile(uintptr(fds[1]), "channel-kernel")
	outW, errW := dupFile(p.stdoutW), dupFile(p.stderrW)
	s := &spare{pipes: p, channel: ours, outW: outW, errW: errW, held: []*os.File{theirs}}
	if outW == nil || errW == nil {
		s.discard()
		return nil, os.ErrInvalid
	}
	s.start = func(req spawn.Request) error {
		defer closeFiles(theirs)
		defer p.closeChildEnds()
		files := []uintptr{p.stdinR.Fd(), p.stdoutW.Fd(), p.stderrW.Fd()}
		if req.Channel {
			files = append(files, theirs.Fd())
		}
		argv, err := plainArgv(req)
		if err != nil {
			return err
		}
		argv = a.withRlimits(argv)
		pid, done, err := a.reaper.start(func() (int, error) {
			return withUserOOMScore(func() (int, error) {
				return syscall.ForkExec(argv[0], argv, &syscall.ProcAttr{
					Dir: req.Dir, Env: req.Env, Files: files,
					Sys: &syscall.SysProcAttr{Setsid: true},
				})
			})
		})
		if err != nil {
			return err
		}
		s.pid, s.done = pid, done
		return nil
	}
	return s, nil
}

// withRlimits is argv run through the rlimit stage when the agent has
// rlimits to set (a container's; natively the spawn stage sets them).
func (a *Agent) withRlimits(argv []string) []string {
	if a.cfg.OpenFiles <= 0 || a.cfg.FileSize <= 0 {
		return argv
	}
	return spawn.RlimitArgv("/proc/self/exe", a.cfg.OpenFiles, a.cfg.FileSize, a.confine, argv)
}

// plainArgv resolves the program on the request's PATH. A program that is
// not found ends with status 127 and the spawn stage's message.
func plainArgv(req spawn.Request) ([]string, error) {
	name := req.Argv[0]
	if strings.Contains(name, "/") {
		return req.Argv, nil
	}
	for _, e := range req.Env {
		v, ok := strings.CutPrefix(e, "PATH=")
		if !ok {
			continue
		}
		for _, dir := range filepath.SplitList(v) {
			p := filepath.Join(dir, name)
			if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
				return append([]string{p}, req.Argv[1:]...), nil
			}
		}
	}
	return []string{"/bin/sh", "-c", `printf 'kiln: %s: command not found\n' "$0" >&2; exit 127`, name}, nil
}

// killDescendants is killAll without a pid namespace: every process that
// descends from this one (orphans come back to it, the subreaper), and
// then whatever those fork while they die, until none is left. A process
// that starts later for another request is spared: it descends from none
// of the doomed.
//
// Each round kills parents before their children. Killed the other way
// round, a shell could see its child die and exit 137 on its own before
// its own SIGKILL landed, and the exec would report an exit code, not the
// kill. (Stopping them all first also orders it, but a memory bomb then
// holds its memory while the rest is found: kills took seconds.)
func (a *Agent) killDescendants() {
	self := os.Getpid()
	doomed := map[int]bool{}
	keep := map[int]bool{self: true}
	for range 100 {
		procs := processes()
		var round []int
		for p, st := range procs {
			if p != self && !st.zombie && descends(p, procs, keep) {
				round = append(round, p)
			}
		}
		if len(round) == 0 {
			return
		}
		slices.SortFunc(round, func(x, y int) int { return depth(x, procs) - depth(y, procs) })
		for _, p := range round {
			doomed[p] = true
			unix.Kill(p, unix.SIGKILL)
		}
		keep = doomed
		time.Sleep(time.Millisecond)
	}
}

// depth is how many parents p has in the snapshot.
func depth(p int, procs map[int]procStat) int {
	n := 0
	for st, ok := procs[p]; ok && n <= len(procs); st, ok = procs[st.ppid] {
		n++
	}
	return n
}

// usage is what user code has used: the cgroup's counters, or without a
// cgroup (unisolated) the CPU time of this process's descendants, those
// reaped (RUSAGE_CHILDREN; the subreaper reaps orphans too) and those
// alive, such as a kernel between cells. Only differences are used.
func (a *Agent) usage() cgroups.Usage {
	if !a.unisolated {
		u, _ := a.cg.Usage()
		return u
	}
	var ru unix.Rusage
	unix.Getrusage(unix.RUSAGE_CHILDREN, &ru)
	cpu := time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	self := os.Getpid()
	procs := processes()
	for p := range procs {
		if p != self && descends(p, procs, map[int]bool{self: true}) {
			cpu += procCPU(p)
		}
	}
	return cgroups.Usage{CPUTime: cpu}
}

// procCPU is a live process's CPU time and that of the children it has
// reaped, from /proc/PID/stat (utime, stime, cutime, cstime).
func procCPU(pid int) time.Duration {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 15 {
		return 0
	}
	var ticks int64
	for _, s := range f[11:15] {
		n, _ := strconv.ParseInt(s, 10, 64)
		ticks += n
	}
	return time.Duration(ticks) * time.Second / clockTicks
}
