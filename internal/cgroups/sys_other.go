//go:build !linux

package cgroups

import (
	"errors"
	"fmt"
	"runtime"
)

func killPids(pids []int, listed func() (map[int]bool, error)) error {
	return fmt.Errorf("kill processes on %s: %w", runtime.GOOS, errors.ErrUnsupported)
}

func checkFD(fd int) error {
	return fmt.Errorf("inherit descriptors on %s: %w", runtime.GOOS, errors.ErrUnsupported)
}

func closeOnExec(fd int) {}
