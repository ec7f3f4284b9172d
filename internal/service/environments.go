package service

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/kiln-dev/kiln/internal/backend"
	"github.com/kiln-dev/kiln/internal/engine"
	"github.com/kiln-dev/kiln/internal/kiln"
	"github.com/kiln-dev/kiln/internal/protocol"
	"github.com/kiln-dev/kiln/internal/store"
)

// Environments are prebuilt package layers an administrator defines
// (Config.Environments): pinned pip and npm packages on the host's
// runtimes. BuildEnvironment installs them once, in a sandbox whose only
// way out is the egress proxy (so the package mirrors and the package
// policy apply as for any install), into a directory under the data
// directory named by the hash of what went in: an unchanged definition
// builds to the same directory, so a rebuild is a no-op.
//
// Every sandbox sees the whole environments directory read-only at
// EnvironmentsTarget (a mount made when the sandbox is, so pooled
// sandboxes have it too and a session with an environment starts from
// the pool as fast as one without). A session that selects one gets a
// symlink, $TMPDIR/.kiln-environment, to its layer; the Python and Node.js
// kernels put the layer's site-packages and node_modules on their paths
// behind the session's own packages (packages.go), so the session can
// still add or upgrade packages. Environments hold only packages the
// administrator chose, so every sandbox seeing them read-only tells a
// user nothing that listing them (GET /v1/environments) does not.

// EnvironmentsTarget is where sandboxes see the environments directory.
const EnvironmentsTarget = "/mnt/.kiln-environments"

// envLink is the symlink, beside the build area in the sandbox's /tmp,
// to a session's environment layer, which the kernels read (kernel.py,
// kernel.js). Beside, not in: /tmp is there from the start, so one
// process makes it.
const envLink = ".kiln-environment"

// EnvironmentDef is an administrator's definition of an environment.
type EnvironmentDef struct {
	Name string   `json:"name"`
	Pip  []string `json:"pip,omitempty"` // "pandas==2.2.2"
	NPM  []string `json:"npm,omitempty"` // "lodash@4.17.21"
}

// Environment is a defined environment and, once built, what it holds.
type Environment struct {
	Name  string    `json:"name"`
	Pip   []string  `json:"pip"`
	NPM   []string  `json:"npm"`
	Built bool      `json:"built"`
	Hash  string    `json:"hash,omitempty"` // of the definition and the runtimes' versions
	At    time.Time `json:"built_at,omitzero"`
	// Python and Node are the packages in the layer with their versions
	// (dependencies too), once built.
	Python []Package `json:"python,omitempty"`
	Node   []Package `json:"node,omitempty"`
}

var envName = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,62}$`)

// CheckEnvironments checks an administrator's definitions: names, no
// duplicates, and each package as the packages API checks it.
func CheckEnvironments(defs []EnvironmentDef) error {
	seen := map[string]bool{}
	for i, d := range defs {
		if !envName.MatchString(d.Name) {
			return fmt.Errorf("environments[%d]: the name %q must be 1 to 63 lowercase letters, digits, '.', '_' or '-', starting with a letter or digit", i, trunc(d.Name, 80))
		}
		if seen[d.Name] {
			return fmt.Errorf("environments[%d]: %q is defined twice", i, d.Name)
		}
		seen[d.Name] = true
		if len(d.Pip) == 0 && len(d.NPM) == 0 {
			return fmt.Errorf("environment %q names no packages: give \"pip\" or \"npm\" (or both)", d.Name)
		}
		for _, m := range []struct {
			manager string
			specs   []string
		}{{ManagerPip, d.Pip}, {ManagerNPM, d.NPM}} {
			if len(m.specs) == 0 {
				continue
			}
			if _, err := CheckPackages(PackageRequest{Manager: m.manager, Packages: m.specs}); err != nil {
				return fmt.Errorf("environment %q, %s: %s", d.Name, m.manager, kiln.Message(err))
			}
		}
	}
	return nil
}

// environments is the service's state of its environments.
type environments struct {
	root  string // DataDir/environments
	defs  map[string]EnvironmentDef
	names []string
	build sync.Mutex // one build at a time

	runtimes     sync.Once // read once: a session's create must not start them
	python, node string    // python3 --version, node --version
}

// openEnvironments checks the definitions and makes the directory every
// sandbox mounts; with no definitions there is nothing to mount.
func (s *Service) openEnvironments() error {
	e := &environments{root: filepath.Join(s.cfg.DataDir, "environments"), defs: map[string]EnvironmentDef{}}
	s.envs = e
	if len(s.cfg.Environments) == 0 {
		return nil
	}
	if err := CheckEnvironments(s.cfg.Environments); err != nil {
		return err
	}
	for _, d := range s.cfg.Environments {
		e.defs[d.Name] = d
		e.names = append(e.names, d.Name)
	}
	slices.Sort(e.names)
	// 0755: the sandboxes' unprivileged uids read the layers.
	if err := os.MkdirAll(e.root, 0o755); err != nil {
		return fmt.Errorf("environments: %w", err)
	}
	// The sandbox binds the real path (native.checkMounts).
	real, err := filepath.EvalSymlinks(e.root)
	if err != nil {
		return fmt.Errorf("environments: %w", err)
	}
	e.root = real
	// A build a stop or crash cut short left its temporary directory.
	left, _ := filepath.Glob(filepath.Join(e.root, "*", ".building-*"))
	for _, d := range left {
		os.RemoveAll(d)
	}
	return os.Chmod(e.root, 0o755)
}

// sandboxMounts are a sandbox's read-only mounts: ms, and the
// environments directory when any environment is defined.
func (s *Service) sandboxMounts(ms []backend.Mount) []backend.Mount {
	if s.envs == nil || len(s.envs.names) == 0 {
		return ms
	}
	return append(slices.Clip(ms), backend.Mount{Source: s.envs.root, Target: EnvironmentsTarget})
}

// manifest is what a built layer says of itself (manifest.json).
type manifest struct {
	Name   string    `json:"name"`
	Hash   string    `json:"hash"`
	Pip    []string  `json:"pip"`
	NPM    []string  `json:"npm"`
	At     time.Time `json:"built_at"`
	Python []Package `json:"python"`
	Node   []Package `json:"node"`
}

// hash is the content address of a definition on this host's
// runtimes: the sorted packages and the python3 and node versions.
func (e *environments) hash(ctx context.Context, d EnvironmentDef) string {
	e.runtimes.Do(func() { e.python, e.node = hostVersion(ctx, "python3"), hostVersion(ctx, "node") })
	pip, npm := slices.Sorted(slices.Values(d.Pip)), slices.Sorted(slices.Values(d.NPM))
	b, _ := json.Marshal(map[string]any{"pip": pip, "npm": npm, "python": e.python, "node": e.node})
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])[:32]
}

// hostVersion is what name --version says, or "" without it.
func hostVersion(ctx context.Context, name string) string {
	bin, err := SandboxBinary(name)
	if err != nil {
		return ""
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	out, _ := exec.CommandContext(ctx, bin, "--version").CombinedOutput()
	return strings.TrimSpace(string(out))
}

// layer is a definition's built layer on the host, if any.
func (e *environments) layer(ctx context.Context, d EnvironmentDef) (dir string, m manifest, ok bool) {
	dir = filepath.Join(e.root, d.Name, e.hash(ctx, d))
	b, err := os.ReadFile(filepath.Join(dir, "manifest.json"))
	if err != nil || json.Unmarshal(b, &m) != nil {
		return dir, m, false
	}
	return dir, m, true
}

// Environments lists the defined environments, built or not.
func (s *Service) Environments(ctx context.Context) []Environment {
	out := make([]Environment, 0, len(s.envs.names))
	for _, n := range s.envs.names {
		out = append(out, s.envs.describe(ctx, s.envs.defs[n]))
	}
	return out
}

func (e *environments) describe(ctx context.Context, d EnvironmentDef) Environment {
	env := Environment{Name: d.Name, Pip: append([]string{}, d.Pip...), NPM: append([]string{}, d.NPM...)}
	if _, m, ok := e.layer(ctx, d); ok {
		env.Built, env.Hash, env.At, env.Python, env.Node = true, m.Hash, m.At, m.Python, m.Node
	}
	return env
}

// resolveEnvironment is the layer of a session's environment, as the
// sandbox sees it, or a 400 (unknown) or 409 (not built) naming what
// there is.
func (s *Service) resolveEnvironment(ctx context.Context, name string) (string, error) {
	d, ok := s.envs.defs[name]
	if !ok {
		if len(s.envs.names) == 0 {
			return "", kiln.Errorf(kiln.Invalid, "environment %q: this server defines no environments", trunc(name, 80))
		}
		return "", kiln.Errorf(kiln.Invalid, "environment %q is not defined here; the environments are: %s", trunc(name, 80), strings.Join(s.envs.names, ", "))
	}
	dir, _, built := s.envs.layer(ctx, d)
	if !built {
		return "", kiln.Errorf(kiln.Conflict, "environment %q is defined but not built yet; an administrator builds it with kiln env build %s (built: %s)",
			name, name, strings.Join(s.builtNames(ctx), ", "))
	}
	rel, _ := filepath.Rel(s.envs.root, dir)
	return path.Join(EnvironmentsTarget, filepath.ToSlash(rel)), nil
}

func (s *Service) builtNames(ctx context.Context) []string {
	out := []string{}
	for _, n := range s.envs.names {
		if _, _, ok := s.envs.layer(ctx, s.envs.defs[n]); ok {
			out = append(out, n)
		}
	}
	if len(out) == 0 {
		out = append(out, "none")
	}
	return out
}

// linkEnvironment points the sandbox's build-area symlink at layer (a
// path in the sandbox), for the kernels to find.
func linkEnvironment(ctx context.Context, sess *engine.Session, layer string) error {
	link := path.Join(path.Dir(sess.BuildArea()), envLink)
	info, err := sess.Agent().Exec(ctx, protocol.Exec{Argv: []string{"ln", "-sfn", "--", layer, link},
		TimeoutMs: 10_000, OutputBytes: 4096, KillScope: protocol.KillGroup}, nil, nil)
	if err == nil && info.Code != 0 {
		err = fmt.Errorf("ln exited with %d", info.Code)
	}
	if err != nil {
		return kiln.Wrap(kiln.SandboxError, err, "cannot link the session's environment in its sandbox")
	}
	return nil
}

// BuildEnvironment builds a defined environment (admins only), or says
// it was built already (built false) when its layer for this definition
// and these runtimes is there. Progress goes to ev.
func (s *Service) BuildEnvironment(ctx context.Context, u kiln.User, name string, ev PackageEvents) (env Environment, built bool, err error) {
	if !u.Admin {
		return env, false, kiln.Errorf(kiln.Forbidden, "only an administrator builds environments")
	}
	d, ok := s.envs.defs[name]
	if !ok {
		_, err := s.resolveEnvironment(ctx, name)
		return env, false, err
	}
	s.envs.build.Lock()
	defer s.envs.build.Unlock()
	dir, _, done := s.envs.layer(ctx, d)
	if done {
		return s.envs.describe(ctx, d), false, nil
	}
	start := time.Now()
	m, err := s.buildLayer(ctx, u, d, dir, ev)
	outcome := "ok"
	if err != nil {
		outcome = string(kiln.KindOf(err))
	}
	s.audit(context.WithoutCancel(ctx), store.AuditEntry{UserID: u.ID, Actor: u.ID, Action: "environment.build", Outcome: outcome,
		Detail: jsonDetail(map[string]any{"name": name, "hash": filepath.Base(dir), "python": m.Python, "node": m.Node, "seconds": time.Since(start).Seconds()})})
	if err != nil {
		return env, false, err
	}
	return s.envs.describe(ctx, d), true, nil
}

// buildLayer installs d in a new sandbox whose workspace is a staging
// directory, copies what was installed to a temporary directory beside
// dir, and renames it to dir: a layer is there whole or not at all.
func (s *Service) buildLayer(ctx context.Context, u kiln.User, d EnvironmentDef, dir string, ev PackageEvents) (manifest, error) {
	m := manifest{Name: d.Name, Hash: filepath.Base(dir), Pip: d.Pip, NPM: d.NPM}
	id := store.NewID()
	lim := kiln.Limits{MemoryBytes: 2 * kiln.GiB, WorkspaceBytes: 8 * kiln.GiB, Inodes: 1 << 20, TmpBytes: 2 * kiln.GiB, Pids: 512, CPUMillis: 2000}.WithDefaults()
	ws, err := s.ws.Create(id, lim.WorkspaceBytes, lim.Inodes)
	if err != nil {
		return m, err
	}
	defer s.ws.Remove(id)
	// No session id: the build is no session's, and its egress goes to
	// the audit log as the admin's, as a one-shot run's does.
	n, err := s.nets.openNet("", u.ID, kiln.NetworkPolicy{Mode: kiln.NetworkAllowlist})
	if err != nil {
		return m, err
	}
	defer n.close()
	sess, err := s.engine.NewSession(ctx, engine.SessionSpec{Limits: lim, HostDir: ws, EgressSocket: n.socket()})
	if err != nil {
		return m, err
	}
	defer sess.Close(context.WithoutCancel(ctx))
	x := &installer{sess: sess, area: sess.BuildArea(), ev: ev}
	if len(d.Pip) > 0 {
		if m.Python, err = x.pipTarget(ctx, "/workspace/python/site-packages", d.Pip); err != nil {
			return m, refusedBy(err, n.endCell())
		}
	}
	if len(d.NPM) > 0 {
		if m.Node, err = x.npmPrefix(ctx, "/workspace/node", d.NPM); err != nil {
			return m, refusedBy(err, n.endCell())
		}
	}
	n.endCell()
	m.At = time.Now().UTC()
	return m, s.envs.commit(ws, dir, m)
}

// commit copies the staged layer to dir with its manifest, read-only.
func (e *environments) commit(ws, dir string, m manifest) error {
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return kiln.Wrap(kiln.Internal, err, "make the environment's directory")
	}
	tmp, err := os.MkdirTemp(filepath.Dir(dir), ".building-")
	if err != nil {
		return kiln.Wrap(kiln.Internal, err, "make the environment's directory")
	}
	defer os.RemoveAll(tmp)
	for _, sub := range []string{"python", "node"} {
		src := filepath.Join(ws, sub)
		if _, err := os.Lstat(src); errors.Is(err, os.ErrNotExist) {
			continue
		}
		// cp -a keeps npm's .bin symlinks as they are. --no-preserve=
		// ownership: the layer is root's; the sandboxes only read it.
		if out, err := exec.Command("cp", "-a", "--no-preserve=ownership", "--", src, filepath.Join(tmp, sub)).CombinedOutput(); err != nil {
			return kiln.Errorf(kiln.Internal, "copy the built environment: %v: %s", err, lastLines(string(out), 4))
		}
	}
	b, _ := json.MarshalIndent(m, "", "  ")
	if err := os.WriteFile(filepath.Join(tmp, "manifest.json"), b, 0o644); err != nil {
		return kiln.Wrap(kiln.Internal, err, "write the environment's manifest")
	}
	// Readable by all (the sandboxes' uids), writable by none.
	if out, err := exec.Command("chmod", "-R", "a+rX,a-w", "--", tmp).CombinedOutput(); err != nil {
		return kiln.Errorf(kiln.Internal, "make the environment read-only: %v: %s", err, lastLines(string(out), 4))
	}
	os.Chmod(tmp, 0o755)
	if err := os.Rename(tmp, dir); err != nil {
		return kiln.Wrap(kiln.Internal, err, "put the built environment in place")
	}
	return nil
}

// pipTarget installs specs into dir (pip --target: every dependency,
// whatever the system has) with a throwaway venv's pip, which PEP 668
// does not stop.
func (x *installer) pipTarget(ctx context.Context, dir string, specs []string) ([]Package, error) {
	venv := x.at("env-build/venv")
	if _, err := x.run(ctx, "making a Python environment to build with", "python3", "-m", "venv", "--without-pip", "--system-site-packages", venv); err != nil {
		return nil, err
	}
	report := x.at("env-build/pip-report.json")
	argv := []string{path.Join(venv, "bin", "python"), "-m", "pip", "install", "--no-input", "--disable-pip-version-check", "--no-warn-script-location",
		"--progress-bar", "off", "--no-compile", "--cache-dir", x.at(pipCacheDir), "--report", report, "--target", dir, "--"}
	if _, err := x.run(ctx, "pip install "+strings.Join(specs, " "), append(argv, specs...)...); err != nil {
		return nil, err
	}
	rep, err := x.quiet(ctx, "reading pip's report", "cat", report)
	if err != nil {
		return nil, err
	}
	return parsePipReport(rep)
}

// npmPrefix installs specs into prefix/node_modules.
func (x *installer) npmPrefix(ctx context.Context, prefix string, specs []string) ([]Package, error) {
	if _, err := x.run(ctx, "making node_modules", "mkdir", "-p", prefix); err != nil {
		return nil, err
	}
	argv := []string{"npm", "install", "--prefix", prefix, "--cache", x.at(npmCacheDir), "--logs-dir", x.at(npmLogsDir),
		"--no-update-notifier", "--no-audit", "--no-fund", "--color", "false", "--"}
	if _, err := x.run(ctx, "npm install "+strings.Join(specs, " "), append(argv, specs...)...); err != nil {
		return nil, err
	}
	lock, err := x.quiet(ctx, "reading node_modules", "cat", path.Join(prefix, "node_modules", ".package-lock.json"))
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(specs))
	for _, sp := range specs {
		names = append(names, specName(ManagerNPM, sp))
	}
	return parseNPMLock(lock, names)
}

// useEnvironment links the session's sandbox to its environment's layer
// and remembers it for the session's later sandboxes. The link (a
// process in the sandbox, some milliseconds) is made after the session
// is answered, holding the session's turn, so its first cell or install
// waits for it and session create costs what it does without one. A
// link that fails is told with the next cell.
func (s *Service) useEnvironment(l *live, name, layer string) {
	l.mu.Lock()
	l.envLayer = layer
	l.rec.Environment = name
	sess := l.sess
	l.mu.Unlock()
	if sess == nil {
		return // linked with the sandbox (live.sandbox)
	}
	l.cells <- struct{}{} // free: nobody has the session yet
	go func() {
		defer l.unlockCells()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := linkEnvironment(ctx, sess, layer); err != nil {
			s.log.Error("link a session's environment", "session", l.rec.ID, "environment", name, "err", err)
			l.mu.Lock()
			l.notice = fmt.Sprintf("the environment %q could not be set up in this session's sandbox (%s); its packages are not importable", name, kiln.Message(err))
			l.mu.Unlock()
		}
	}()
}
