package cgroups

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
)

func mkdir(path string) error { return os.Mkdir(path, 0o755) }

func rmdir(path string) error {
	if err := syscall.Rmdir(path); err != nil {
		return &fs.PathError{Op: "rmdir", Path: path, Err: err}
	}
	return nil
}

// setting is one value written to one control file.
type setting struct {
	path, value string
	// optional settings are skipped when the kernel does not offer the file
	// (no swap accounting, for instance).
	optional bool
	// hint settings are tried, and their failure ignored.
	hint bool
}

func (s setting) apply() error {
	err := writeValue(s.path, s.value)
	if s.hint || s.optional && errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	return err
}

// writeValue writes value to the control file at path in one write, as
// cgroupfs wants. It never creates the file.
func writeValue(path, value string) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_TRUNC, 0)
	if err == nil {
		_, err = f.Write([]byte(value))
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		return fmt.Errorf("set %s to %s: %w", path, value, unwrapPath(err))
	}
	return nil
}

func readFile(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, unwrapPath(err))
	}
	return b, nil
}

// unwrapPath drops the *fs.PathError around err: the messages built here
// name the path already.
func unwrapPath(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// parseInt parses a file that holds one integer, such as
// memory.max_usage_in_bytes or cpuacct.usage.
func parseInt(b []byte) (int64, error) {
	return strconv.ParseInt(string(bytes.TrimSpace(b)), 10, 64)
}

// parseKey finds "key N" in a flat keyed file such as memory.events,
// memory.oom_control, pids.events or cpu.stat. ok is false if key is absent.
func parseKey(b []byte, key string) (n int64, ok bool, err error) {
	for line := range bytes.Lines(b) {
		k, v, _ := bytes.Cut(bytes.TrimSpace(line), []byte(" "))
		if string(k) != key {
			continue
		}
		n, err := strconv.ParseInt(string(bytes.TrimSpace(v)), 10, 64)
		if err != nil {
			return 0, false, fmt.Errorf("%s: %w", key, err)
		}
		return n, true, nil
	}
	return 0, false, nil
}

// parsePids parses cgroup.procs: one pid per line.
func parsePids(b []byte) ([]int, error) {
	var pids []int
	for f := range bytes.FieldsSeq(b) {
		pid, err := strconv.Atoi(string(f))
		if err != nil || pid <= 0 {
			return nil, fmt.Errorf("bad pid %q", f)
		}
		pids = append(pids, pid)
	}
	return pids, nil
}

// subgroups returns dir and every cgroup directory below it, parents before
// children. A dir that does not exist yields nothing.
func subgroups(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", dir, unwrapPath(err))
	}
	out := []string{dir}
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		sub, err := subgroups(filepath.Join(dir, e.Name()))
		if err != nil {
			return nil, err
		}
		out = append(out, sub...)
	}
	return out, nil
}
