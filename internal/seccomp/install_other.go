//go:build !linux || !(amd64 || arm64)

package seccomp

import (
	"errors"
	"fmt"
	"runtime"

	"golang.org/x/net/bpf"
)

var errUnsupported = fmt.Errorf("seccomp: no filter for %s/%s: %w", runtime.GOOS, runtime.GOARCH, errors.ErrUnsupported)

// Install fails: filters are built only for linux/amd64 and linux/arm64.
func Install() error { return errUnsupported }

// Load fails: filters are built only for linux/amd64 and linux/arm64.
func Load([]bpf.RawInstruction) error { return errUnsupported }

// Program fails: filters are built only for linux/amd64 and linux/arm64.
func Program() ([]bpf.RawInstruction, error) { return nil, errUnsupported }

// Supported reports false: filters are built only for linux/amd64 and
// linux/arm64.
func Supported() (bool, string) { return false, errUnsupported.Error() }
