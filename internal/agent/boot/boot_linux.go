package boot

import (
	"encoding/json"
	"fmt"
	"io"
	"os"

	"golang.org/x/sys/unix"

	"github.com/kiln-dev/kiln/internal/protocol"
)

// ReadConfig reads the service's Boot document. It refuses to run anywhere
// but as PID 1 of a new pid namespace.
func ReadConfig() (*protocol.Boot, error) {
	if os.Getpid() != 1 {
		return nil, fmt.Errorf("not PID 1 of a new pid namespace; this mode is started by kiln itself")
	}
	return readBoot()
}

// Build builds the sandbox from the inside: the root, the hostname and
// loopback. Processes already started keep running and find themselves in
// the new root, because pivot_root moves every process whose root was the
// old one.
func Build(cfg *protocol.Boot) error {
	if err := buildRoot(cfg); err != nil {
		return err
	}
	if err := unix.Sethostname([]byte(cfg.Hostname)); err != nil {
		return fmt.Errorf("sethostname: %w", err)
	}
	if err := loopbackUp(); err != nil {
		return err
	}
	return nil
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
