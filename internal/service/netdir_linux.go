package service

import (
	"os"

	"golang.org/x/sys/unix"
)

// openSocketDir holds the egress socket directory open by an O_PATH
// descriptor, so sockets are made beneath it through /proc/self/fd even if
// something renames the path.
func openSocketDir(dir string) (*os.File, error) {
	fd, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	return os.NewFile(uintptr(fd), dir), nil
}
