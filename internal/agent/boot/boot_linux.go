package boot

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"runtime"
	"strconv"

	"golang.org/x/sys/unix"

	"github.com/kiln-dev/kiln/internal/protocol"
)

// AgentArg is argv[1] of the agent stage.
const AgentArg = "__kiln-agent"

// AgentEnv carries the agent's configuration across the exec.
const AgentEnv = "KILN_AGENT_CONFIG"

// Main runs the boot stage and, on success, never returns: the process
// becomes the agent. Errors go to stderr, which the service reads.
func Main() {
	if err := run(); err != nil {
		fmt.Fprintf(os.Stderr, "kiln boot: %v\n", err)
		os.Exit(1)
	}
}

func run() error {
	// The namespace calls below must stay on one thread, the one that execs.
	runtime.LockOSThread()
	if os.Getpid() != 1 {
		return fmt.Errorf("not PID 1 of a new pid namespace; this mode is started by kiln itself")
	}
	cfg, err := readBoot()
	if err != nil {
		return err
	}
	// The service moved us into the agent cgroup before sending the config;
	// a new cgroup namespace makes that cgroup our root, hiding the host's layout.
	if err := unix.Unshare(unix.CLONE_NEWCGROUP); err != nil {
		return fmt.Errorf("unshare cgroup namespace: %w", err)
	}
	if err := buildRoot(cfg); err != nil {
		return err
	}
	if err := unix.Sethostname([]byte(cfg.Hostname)); err != nil {
		return fmt.Errorf("sethostname: %w", err)
	}
	if err := loopbackUp(); err != nil {
		return err
	}
	// Nested user namespaces are blocked by seccomp too; this is a second wall.
	_ = os.WriteFile("/proc/sys/user/max_user_namespaces", []byte("0"), 0)
	return execAgent(cfg.Agent)
}

func readBoot() (*protocol.Boot, error) {
	f := os.NewFile(protocol.BootFD, "boot")
	data, err := io.ReadAll(io.LimitReader(f, 1<<20))
	f.Close()
	if err != nil {
		return nil, fmt.Errorf("read boot config: %w", err)
	}
	cfg := new(protocol.Boot)
	if err := json.Unmarshal(data, cfg); err != nil {
		return nil, fmt.Errorf("decode boot config: %w", err)
	}
	return cfg, nil
}

func loopbackUp() error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("loopback: %w", err)
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return fmt.Errorf("loopback: %w", err)
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return fmt.Errorf("loopback flags: %w", err)
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	if err := unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr); err != nil {
		return fmt.Errorf("loopback up: %w", err)
	}
	return nil
}

func execAgent(a protocol.AgentConfig) error {
	data, err := json.Marshal(a)
	if err != nil {
		return err
	}
	// Only the descriptors the agent needs survive the exec.
	keep := map[int]bool{0: true, 1: true, 2: true, a.ConnFD: true}
	for _, fd := range a.KeepFDs {
		keep[fd] = true
	}
	if err := cloexecAllBut(keep); err != nil {
		return err
	}
	env := []string{AgentEnv + "=" + string(data)}
	err = unix.Exec("/proc/self/exe", []string{"kiln-agent", AgentArg}, env)
	return fmt.Errorf("exec agent: %w", err)
}

// cloexecAllBut marks every open descriptor close-on-exec except keep.
func cloexecAllBut(keep map[int]bool) error {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return fmt.Errorf("list fds: %w", err)
	}
	for _, e := range ents {
		fd, err := strconv.Atoi(e.Name())
		if err != nil || keep[fd] {
			continue
		}
		unix.CloseOnExec(fd)
	}
	return nil
}
