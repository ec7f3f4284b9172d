package cgroups

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"
	"strconv"
)

// Group is the cgroup of one sandbox: <root group>/<id> with agent/ and
// user/ below it, in every hierarchy.
type Group struct {
	host *Host
	id   string
}

// ID is the sandbox id the group was made for.
func (g *Group) ID() string { return g.id }

// rel is the path of the group, or of its child sub, below a mount point.
func (g *Group) rel(sub string) string {
	return filepath.Join(g.host.RootGroup, g.id, sub)
}

// dirs are the group's directories, or its child sub's, in every hierarchy.
func (g *Group) dirs(sub string) []string {
	var out []string
	for _, m := range g.host.hierarchies() {
		out = append(out, filepath.Join(m, g.rel(sub)))
	}
	return out
}

// Create makes the group of sandbox id, with user limits on user/ and agent
// limits on agent/ (see DefaultAgentLimits). It fails if the group exists
// already. If it fails part way, it removes the directories it made (but
// not the shared root group).
func (h *Host) Create(id string, user, agent Limits) (_ *Group, err error) {
	if err := h.check(); err != nil {
		return nil, err
	}
	if err := validID(id); err != nil {
		return nil, err
	}
	if err := user.Validate(); err != nil {
		return nil, fmt.Errorf("user limits: %w", err)
	}
	if err := agent.Validate(); err != nil {
		return nil, fmt.Errorf("agent limits: %w", err)
	}
	g := &Group{host: h, id: id}

	// Directories made so far, removed in reverse order if a later step fails.
	var made []string
	defer func() {
		if err == nil {
			return
		}
		for _, d := range slices.Backward(made) {
			if rerr := h.fs.rmdir(d); rerr != nil {
				err = errors.Join(err, fmt.Errorf("clean up: %w", rerr))
			}
		}
	}()
	mk := func(dir string) error {
		err := h.fs.mkdir(dir)
		if errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("create %s: group exists already", dir)
		}
		if err != nil {
			return fmt.Errorf("create %s: %w", dir, unwrapPath(err))
		}
		made = append(made, dir)
		return nil
	}

	for _, m := range h.hierarchies() {
		root := filepath.Join(m, h.RootGroup)
		group := filepath.Join(root, id)
		// The root group is shared by every sandbox: made once, never removed.
		if err := h.fs.mkdir(root); err != nil && !errors.Is(err, fs.ErrExist) {
			return nil, fmt.Errorf("create %s: %w", root, unwrapPath(err))
		}
		if h.Version == V2 {
			for _, d := range []string{m, root} {
				if err := enableControllers(d); err != nil {
					return nil, err
				}
			}
		}
		if err := mk(group); err != nil {
			return nil, err
		}
		if h.Version == V2 {
			if err := enableControllers(group); err != nil {
				return nil, err
			}
		}
		for _, sub := range []string{"agent", "user"} {
			if err := mk(filepath.Join(group, sub)); err != nil {
				return nil, err
			}
		}
	}
	for _, s := range slices.Concat(h.settings(g.rel("user"), user), h.settings(g.rel("agent"), agent)) {
		if err := s.apply(); err != nil {
			return nil, err
		}
	}
	return g, nil
}

func (h *Host) settings(rel string, l Limits) []setting {
	if h.Version == V2 {
		return h.v2Settings(rel, l)
	}
	return h.v1Settings(rel, l)
}

// AddAgent moves process pid, the sandbox's PID 1 agent, into agent/ in
// every hierarchy.
func (g *Group) AddAgent(pid int) error {
	if pid <= 0 {
		return fmt.Errorf("%w: pid %d", ErrInvalid, pid)
	}
	for _, d := range g.dirs("agent") {
		if err := writeValue(filepath.Join(d, "cgroup.procs"), strconv.Itoa(pid)); err != nil {
			return fmt.Errorf("add agent: %w", err)
		}
	}
	return nil
}

// Stats reads what user/ has used, from the host side.
func (g *Group) Stats() (Usage, error) {
	var files [numStats][]byte
	for s, path := range g.host.statFiles(g.rel("user")) {
		b, err := readFile(path)
		if stat(s) == statPeak && errors.Is(err, fs.ErrNotExist) {
			continue // cgroup v2 before Linux 5.19
		}
		if err != nil {
			return Usage{}, fmt.Errorf("stats: %w", err)
		}
		files[s] = b
	}
	if g.host.Version == V1 {
		if _, ok, _ := parseKey(files[statOOM], "oom_kill"); !ok {
			// Before Linux 4.13 memory.oom_control has no oom_kill count.
			// A non-zero memory.failcnt says only that the limit was hit,
			// which usually but not always ends in an OOM kill: report one
			// kill as a hint. kiln needs Linux 5.16 for Handles anyway; this
			// keeps Stats working on older hosts and nothing more.
			path := filepath.Join(g.host.Mounts.Memory, g.rel("user"), "memory.failcnt")
			b, err := readFile(path)
			if err != nil {
				return Usage{}, fmt.Errorf("stats: %w", err)
			}
			hint := "0"
			if n, err := parseInt(b); err == nil && n > 0 {
				hint = "1"
			}
			files[statOOM] = append(files[statOOM], "\noom_kill "+hint+"\n"...)
		}
	}
	u, err := usageFrom(g.host.Version, files)
	if err != nil {
		return Usage{}, fmt.Errorf("stats of %s: %w", filepath.Join(g.host.Mounts.Memory, g.rel("user")), err)
	}
	return u, nil
}
