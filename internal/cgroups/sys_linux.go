package cgroups

import (
	"errors"
	"fmt"

	"golang.org/x/sys/unix"
)

// killPids sends SIGKILL to those of pids that are still in the group.
//
// A pid read from cgroup.procs may die and be reused by an unrelated process
// before it is signalled. So open a pidfd for each pid first, then list the
// group again (listed): a process that is alive when its pidfd is signalled
// held its pid during that listing, so it was in the group then, and only
// root moves processes out.
func killPids(pids []int, listed func() (map[int]bool, error)) error {
	fds := map[int]int{}
	defer func() {
		for _, fd := range fds {
			unix.Close(fd)
		}
	}()
	for _, pid := range pids {
		fd, err := unix.PidfdOpen(pid, 0)
		switch {
		case err == nil:
			fds[pid] = fd
		case errors.Is(err, unix.ESRCH):
			// Gone already.
		case errors.Is(err, unix.ENOSYS):
			return killPidsRacy(pids, listed)
		default:
			return fmt.Errorf("pidfd_open %d: %w", pid, err)
		}
	}
	now, err := listed()
	if err != nil {
		return err
	}
	for pid, fd := range fds {
		if !now[pid] {
			continue
		}
		if err := unix.PidfdSendSignal(fd, unix.SIGKILL, nil, 0); err != nil && !errors.Is(err, unix.ESRCH) {
			return fmt.Errorf("kill %d: %w", pid, err)
		}
	}
	return nil
}

// killPidsRacy is killPids for kernels before 5.3, without pidfds: a pid
// reused between the listing and kill(2) gets the signal.
func killPidsRacy(pids []int, listed func() (map[int]bool, error)) error {
	now, err := listed()
	if err != nil {
		return err
	}
	for _, pid := range pids {
		if !now[pid] {
			continue
		}
		if err := unix.Kill(pid, unix.SIGKILL); err != nil && !errors.Is(err, unix.ESRCH) {
			return fmt.Errorf("kill %d: %w", pid, err)
		}
	}
	return nil
}

// checkFD reports whether fd is an open descriptor.
func checkFD(fd int) error {
	_, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0)
	return err
}

// closeOnExec keeps fd from leaking into programs the process execs.
func closeOnExec(fd int) { unix.CloseOnExec(fd) }
