package cgroups

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"
	"syscall"
	"time"
)

// pollInterval is how long Destroy waits between rounds of killing and
// between attempts to remove a busy directory.
const pollInterval = 10 * time.Millisecond

// Destroy kills every process in the group (agent/, user/ and anything
// below them) with SIGKILL, over and over until none is left, then removes
// the group's directories, children first, in every hierarchy. A fork bomb
// cannot outrun it: the pids limit bounds what each round must kill, and on
// cgroup v2 cgroup.kill (Linux 5.14) kills the forks racing with it too.
//
// It gives up when ctx is done, with an error that wraps ctx.Err(); call it
// again to finish. Destroying a group that is gone already returns nil.
func (g *Group) Destroy(ctx context.Context) error {
	dirs := g.dirs("")
	if err := g.host.killAll(ctx, dirs); err != nil {
		return fmt.Errorf("destroy group %s: %w", g.id, err)
	}
	for _, d := range dirs {
		if err := removeTree(ctx, g.host.fs.rmdir, d); err != nil {
			return fmt.Errorf("destroy group %s: %w", g.id, err)
		}
	}
	return nil
}

func (h *Host) killAll(ctx context.Context, dirs []string) error {
	useKillFile := h.Version == V2
	for {
		pids, err := listProcs(dirs)
		if err != nil {
			return err
		}
		if len(pids) == 0 {
			return nil
		}
		if useKillFile {
			for _, d := range dirs {
				if err := writeValue(filepath.Join(d, "cgroup.kill"), "1"); err != nil {
					// Before Linux 5.14: kill pid by pid.
					useKillFile = false
				}
			}
		}
		if !useKillFile {
			relist := func() (map[int]bool, error) {
				pids, err := listProcs(dirs)
				set := map[int]bool{}
				for _, p := range pids {
					set[p] = true
				}
				return set, err
			}
			if err := killPids(pids, relist); err != nil {
				return err
			}
		}
		if err := sleep(ctx, pollInterval); err != nil {
			return fmt.Errorf("%d processes still alive: %w", len(pids), err)
		}
	}
}

// listProcs returns the pids in cgroup.procs of dirs and all their
// subgroups. Pids read by the host are in the host's pid namespace.
func listProcs(dirs []string) ([]int, error) {
	var pids []int
	for _, d := range dirs {
		groups, err := subgroups(d)
		if err != nil {
			return nil, err
		}
		for _, sub := range groups {
			path := filepath.Join(sub, "cgroup.procs")
			b, err := readFile(path)
			if errors.Is(err, fs.ErrNotExist) {
				continue // removed while we looked
			}
			if err != nil {
				return nil, err
			}
			p, err := parsePids(b)
			if err != nil {
				return nil, fmt.Errorf("read %s: %w", path, err)
			}
			pids = append(pids, p...)
		}
	}
	slices.Sort(pids)
	return slices.Compact(pids), nil
}

// removeTree removes dir and every group below it, children first. The
// kernel answers EBUSY for a short while after the last process has died;
// that is retried until ctx is done.
func removeTree(ctx context.Context, rmdir func(string) error, dir string) error {
	groups, err := subgroups(dir)
	if err != nil {
		return err
	}
	for _, d := range slices.Backward(groups) {
		for {
			err := rmdir(d)
			if err == nil || errors.Is(err, fs.ErrNotExist) {
				break
			}
			if !errors.Is(err, syscall.EBUSY) {
				return fmt.Errorf("remove %s: %w", d, unwrapPath(err))
			}
			if err := sleep(ctx, pollInterval); err != nil {
				return fmt.Errorf("remove %s: still busy: %w", d, err)
			}
		}
	}
	return nil
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
