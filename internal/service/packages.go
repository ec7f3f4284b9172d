package service

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/kiln-dev/kiln/internal/engine"
	"github.com/kiln-dev/kiln/internal/kiln"
	"github.com/kiln-dev/kiln/internal/protocol"
	"github.com/kiln-dev/kiln/internal/store"
)

// Package managers.
const (
	ManagerPip = "pip"
	ManagerNPM = "npm"
)

// Bounds on a package request: what a hostile client can make kiln parse
// and pass on.
const (
	MaxPackages        = 100
	maxSpecBytes       = 256
	maxRequirementFile = 256 << 10
	installTimeout     = 5 * time.Minute
	installOutput      = 4 << 20
)

// Where a session's packages live, below its sandbox's build area (the
// private /tmp, outside the workspace): not listed, archived or charged to
// the workspace, and gone with the sandbox, hence with the session. The
// kernels find the same places from $TMPDIR (kernel.py, kernel.js).
const (
	venvDir     = "packages/python"    // a venv with --system-site-packages
	nodeDir     = "packages/node"      // npm's --prefix: node_modules below it
	pipCacheDir = "packages/cache/pip" // pip's cache and npm's, never ~
	npmCacheDir = "packages/cache/npm" // (~ is the workspace)
	npmLogsDir  = "packages/cache/npm-logs"
	pipReport   = "packages/pip-report.json"
)

// PackageRequest asks for packages in a session: names with optional
// versions, or a requirements.txt (pip) or package.json (npm) in the
// workspace, or both.
type PackageRequest struct {
	Manager      string   // ManagerPip or ManagerNPM
	Packages     []string // "requests==2.31.0", "left-pad@1.3.0"
	Requirements string   // a workspace path
}

// Package is one installed package.
type Package struct {
	Name    string `json:"name"`
	Version string `json:"version"`
	// Requested: named in the request (not only a dependency).
	Requested bool `json:"requested"`
	// Present: it was there already (the system's, or installed before),
	// so nothing was installed for it now.
	Present bool `json:"present,omitempty"`
}

// PackageResult is what an install did.
type PackageResult struct {
	Manager  string
	Packages []Package
	Wall     time.Duration
	CPU      time.Duration // of pip's or npm's processes, charged as a cell's
	// Egress is what pip or npm asked of the egress proxy: the package
	// mirrors' requests, each saying whether the shared cache served it.
	Egress []kiln.EgressRecord
}

// PackageEvents receive an install's progress; any may be nil.
type PackageEvents struct {
	Queued  func(Place)
	Started func()
	Stdout  func([]byte)
	Stderr  func([]byte)
}

// ManagerFor is the package manager of a language's packages: pip for
// Python, npm for JavaScript and TypeScript, "" for the others.
func ManagerFor(language string) string {
	switch language {
	case "python":
		return ManagerPip
	case "javascript", "typescript":
		return ManagerNPM
	}
	return ""
}

// InstallPackages installs packages into u's session (or one shared with
// u as a collaborator: the owner is charged) and says what it installed.
// It runs as a cell does: in the session's turn, with a place in the
// queue; its output goes to ev as it comes. A session whose network
// policy allows nothing is refused at once, before anything runs.
func (s *Service) InstallPackages(ctx context.Context, u kiln.User, sessionID string, req PackageRequest, ev PackageEvents) (PackageResult, error) {
	specs, err := CheckPackages(req)
	if err != nil {
		return PackageResult{}, err
	}
	a, err := s.liveAs(ctx, u, sessionID, kiln.RoleCollaborator)
	if err != nil {
		return PackageResult{}, err
	}
	if err := s.packagesReachable(a.l, req.Manager); err != nil {
		return PackageResult{}, err
	}
	return s.install(ctx, a, u, req, specs, ev)
}

// install is InstallPackages once the request and the policy are checked:
// u acts, the session's owner is charged, as for a cell.
func (s *Service) install(ctx context.Context, a access, u kiln.User, req PackageRequest, specs []string, ev PackageEvents) (PackageResult, error) {
	l := a.l
	if err := s.budgetOf(ctx, a, u); err != nil {
		return PackageResult{}, err
	}
	release := l.hold()
	defer release()
	t, err := s.enterQueue(a.owner)
	if err != nil {
		return PackageResult{}, err
	}
	defer t.release()
	if err := l.lockCells(ctx, func(n int) {
		if ev.Queued != nil {
			ev.Queued(Place{Position: n, Reason: WaitSession})
		}
	}); err != nil {
		return PackageResult{}, err
	}
	defer l.unlockCells()
	if err := t.run(ctx, ev.Queued); err != nil {
		return PackageResult{}, err
	}
	sess, err := l.sandbox(ctx, s.engine)
	if err != nil {
		return PackageResult{}, err
	}
	if ev.Started != nil {
		ev.Started()
	}
	start := time.Now()
	egressOf := l.netNow()
	res, err := installIn(ctx, sess, req, specs, ev)
	res.Wall = time.Since(start)
	res.Egress = egressOf.endCell()
	if err != nil {
		err = refusedBy(err, res.Egress)
	}
	outcome := "ok"
	if err != nil {
		outcome = string(kiln.KindOf(err))
	}
	// pip's and npm's CPU time counts against the owner's day, as a
	// cell's does; the audit row goes in the same write.
	audit := store.AuditEntry{UserID: a.owner.ID, Actor: u.ID, Action: "packages.install", SessionID: l.rec.ID, Outcome: outcome,
		Detail: jsonDetail(map[string]any{"manager": req.Manager, "packages": specs, "installed": res.Packages})}
	f := store.CellFinish{UserID: a.owner.ID, Day: s.cpu.currentDay(), CPU: res.CPU, Audit: &audit}
	if ferr := s.store.FinishCell(context.WithoutCancel(ctx), f); ferr != nil {
		s.log.Error("record an install's cpu time and audit row", "session", l.rec.ID, "err", ferr)
	} else {
		s.cpu.counted(a.owner.ID, f.Day, f.CPU)
	}
	return res, err
}

// packagesReachable refuses an install that cannot reach an index: under
// the network policy "none" pip and npm would only fail after their
// retries, so the API says why at once. Under "allowlist" the proxy's
// package mirrors (the administrator's indexes) are reachable whatever
// the list holds, and the package policy is the proxy's to apply.
func (s *Service) packagesReachable(l *live, manager string) error {
	l.mu.Lock()
	pol := l.policy.Normal()
	l.mu.Unlock()
	if pol.Mode != kiln.NetworkNone {
		return nil
	}
	return kiln.Errorf(kiln.Forbidden, "this session's network policy is %q, so %s cannot reach a package index; "+
		"installing packages needs a session whose network policy is \"allowlist\" (set it at creation or with PUT /v1/sessions/{id}/network)", pol.Mode, manager)
}

// CheckPackages checks a request's manager and names before anything
// runs and returns the names as they will be passed on. A requirements
// file is read and checked later, in the sandbox's turn.
func CheckPackages(req PackageRequest) ([]string, error) {
	if req.Manager != ManagerPip && req.Manager != ManagerNPM {
		return nil, kiln.Errorf(kiln.Invalid, "manager %q is not a package manager kiln runs; use \"pip\" or \"npm\"", trunc(req.Manager, 40))
	}
	if len(req.Packages) == 0 && req.Requirements == "" {
		return nil, kiln.Errorf(kiln.Invalid, "name packages to install, or a requirements file (requirements.txt for pip, package.json for npm) in the workspace")
	}
	if len(req.Packages) > MaxPackages {
		return nil, kiln.Errorf(kiln.Invalid, "%d packages in one request; at most %d", len(req.Packages), MaxPackages)
	}
	if req.Requirements != "" {
		if _, err := CleanPath(req.Requirements, false); err != nil {
			return nil, err
		}
	}
	out := make([]string, 0, len(req.Packages))
	for i, p := range req.Packages {
		spec, err := checkSpec(req.Manager, p)
		if err != nil {
			return nil, kiln.Errorf(kiln.Invalid, "packages[%d]: %s", i, kiln.Message(err))
		}
		out = append(out, spec)
	}
	return out, nil
}

// A pip requirement kiln passes on: a project name (PEP 508), optional
// extras, optional version clauses. No markers, URLs, paths or options.
var (
	pipName = `[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?`
	pipOp   = `[ \t]*(?:===|==|!=|~=|<=|>=|<|>)[ \t]*[A-Za-z0-9.*+!_-]+`
	pipSpec = regexp.MustCompile(`^(` + pipName + `)[ \t]*(?:\[[ \t]*` + pipName + `(?:[ \t]*,[ \t]*` + pipName + `)*[ \t]*\])?(?:` + pipOp + `(?:[ \t]*,` + pipOp + `)*)?$`)
	// An npm package: a name, scoped or not, and an optional version,
	// range or tag. No aliases (npm:), git, URLs, paths or options.
	npmSpec = regexp.MustCompile(`^((?:@[A-Za-z0-9][A-Za-z0-9._~-]*/)?[A-Za-z0-9][A-Za-z0-9._~-]*)(?:@([0-9A-Za-z.^~<>=*|+ -]+))?$`)
)

// checkSpec checks one package as a client wrote it and says what is
// wrong and what is allowed.
func checkSpec(manager, p string) (string, error) {
	q := trunc(p, 80)
	allowed := `a name with an optional version, such as "requests", "requests==2.31.0" or "pandas>=2,<3"`
	if manager == ManagerNPM {
		allowed = `a name with an optional version or range, such as "left-pad", "left-pad@1.3.0" or "@types/node@^20"`
	}
	switch {
	case strings.TrimSpace(p) == "":
		return "", kiln.Errorf(kiln.Invalid, "an empty package name; give %s", allowed)
	case len(p) > maxSpecBytes:
		return "", kiln.Errorf(kiln.Invalid, "%q is longer than %d bytes", q, maxSpecBytes)
	case strings.HasPrefix(strings.TrimSpace(p), "-"):
		return "", kiln.Errorf(kiln.Invalid, "%q looks like an option; options are not allowed, only %s", q, allowed)
	case strings.ContainsAny(p, "/\\:") && !(manager == ManagerNPM && strings.HasPrefix(p, "@") && strings.Count(p, "/") == 1 && !strings.ContainsAny(p, "\\:")):
		return "", kiln.Errorf(kiln.Invalid, "%q is a URL or a path; packages come only from the administrator's index: give %s", q, allowed)
	case manager == ManagerPip && strings.Contains(p, ";"):
		return "", kiln.Errorf(kiln.Invalid, "%q has an environment marker (;); give %s", q, allowed)
	case manager == ManagerPip && strings.Contains(p, "@"):
		return "", kiln.Errorf(kiln.Invalid, "%q is a direct reference (name @ url); give %s", q, allowed)
	}
	re := pipSpec
	if manager == ManagerNPM {
		re = npmSpec
	}
	if !re.MatchString(p) {
		return "", kiln.Errorf(kiln.Invalid, "%q is not a package kiln can install; give %s", q, allowed)
	}
	if manager == ManagerPip {
		return strings.Join(strings.Fields(p), ""), nil
	}
	return strings.TrimSpace(p), nil
}

// specName is the package name of a checked spec.
func specName(manager, spec string) string {
	if manager == ManagerNPM {
		return npmSpec.FindStringSubmatch(spec)[1]
	}
	return pipSpec.FindStringSubmatch(spec)[1]
}

// normalizePip is a pip project name normalised as PEP 503 says.
func normalizePip(name string) string {
	return strings.ToLower(regexp.MustCompile(`[-_.]+`).ReplaceAllString(name, "-"))
}

// installIn installs into a session's sandbox: the requirements file's
// packages, if any, and specs.
func installIn(ctx context.Context, sess *engine.Session, req PackageRequest, specs []string, ev PackageEvents) (PackageResult, error) {
	res := PackageResult{Manager: req.Manager}
	if req.Requirements != "" {
		more, err := readRequirements(ctx, sess, req)
		if err != nil {
			return res, err
		}
		specs = append(more, specs...)
	}
	if len(specs) == 0 {
		return res, nil
	}
	ex := &installer{sess: sess, area: sess.BuildArea(), ev: ev}
	var err error
	if req.Manager == ManagerPip {
		res.Packages, err = ex.pip(ctx, specs)
	} else {
		res.Packages, err = ex.npm(ctx, specs)
	}
	res.CPU = ex.cpu
	return res, err
}

// readRequirements reads and checks the workspace's requirements.txt or
// package.json. Each entry is checked as a name in the request would be:
// the file is the user's, as hostile as the request.
func readRequirements(ctx context.Context, sess *engine.Session, req PackageRequest) ([]string, error) {
	p, _ := CleanPath(req.Requirements, false)
	q := trunc(p, 200)
	data, err := sess.Agent().ReadFile(ctx, p, maxRequirementFile+1)
	if err != nil {
		return nil, kiln.Wrap(kiln.Invalid, err, "cannot read the requirements file %q in the workspace", q)
	}
	if len(data) > maxRequirementFile {
		return nil, kiln.Errorf(kiln.TooLarge, "the requirements file %q is over %d KiB", q, maxRequirementFile>>10)
	}
	var entries []string
	if req.Manager == ManagerNPM {
		var pkg struct {
			Dependencies    map[string]string `json:"dependencies"`
			DevDependencies map[string]string `json:"devDependencies"`
		}
		if err := json.Unmarshal(data, &pkg); err != nil {
			return nil, kiln.Errorf(kiln.Invalid, "%q is not a package.json kiln can read: %v", q, err)
		}
		for _, deps := range []map[string]string{pkg.Dependencies, pkg.DevDependencies} {
			for name, rng := range deps {
				entries = append(entries, name+"@"+rng)
			}
		}
		slices.Sort(entries)
	} else {
		for i, line := range strings.Split(string(data), "\n") {
			line = strings.TrimSpace(line)
			if c := strings.Index(line, " #"); c >= 0 {
				line = strings.TrimSpace(line[:c])
			}
			if line == "" || strings.HasPrefix(line, "#") {
				continue
			}
			if strings.HasPrefix(line, "-") {
				return nil, kiln.Errorf(kiln.Invalid, "%s line %d: %q is an option; a requirements file may hold only names with optional versions (no -r, -e, --index-url, --hash or other options)", q, i+1, trunc(line, 80))
			}
			entries = append(entries, line)
		}
	}
	if len(entries) > MaxPackages {
		return nil, kiln.Errorf(kiln.Invalid, "%q names %d packages; at most %d", q, len(entries), MaxPackages)
	}
	out := make([]string, 0, len(entries))
	for _, e := range entries {
		spec, err := checkSpec(req.Manager, e)
		if err != nil {
			return nil, kiln.Errorf(kiln.Invalid, "%s: %s", q, kiln.Message(err))
		}
		out = append(out, spec)
	}
	return out, nil
}

// installer runs pip and npm in a session's sandbox, as the session's
// user, through ordinary execs that stop only themselves.
type installer struct {
	sess *engine.Session
	area string
	ev   PackageEvents
	cpu  time.Duration // of every exec so far
}

func (x *installer) at(p string) string { return path.Join(x.area, p) }

// run runs argv, streaming its output to the events; a failure is an
// error quoting the end of what it printed.
func (x *installer) run(ctx context.Context, what string, argv ...string) (stdout []byte, err error) {
	return x.exec(ctx, what, true, argv)
}

// quiet runs argv as run does, without streaming its output: kiln's own
// steps (reading a report), not the package manager's progress.
func (x *installer) quiet(ctx context.Context, what string, argv ...string) (stdout []byte, err error) {
	return x.exec(ctx, what, false, argv)
}

func (x *installer) exec(ctx context.Context, what string, streamed bool, argv []string) (stdout []byte, err error) {
	var out, errs bytes.Buffer
	stream := func(f func([]byte), b *bytes.Buffer) writerTo {
		return func(p []byte) {
			b.Write(p) // bounded by the exec's output limit
			if f != nil && streamed {
				f(p)
			}
		}
	}
	info, err := x.sess.Agent().Exec(ctx, protocol.Exec{Argv: argv, TimeoutMs: installTimeout.Milliseconds(),
		OutputBytes: installOutput, KillScope: protocol.KillGroup}, stream(x.ev.Stdout, &out), stream(x.ev.Stderr, &errs))
	if err != nil {
		return nil, kiln.Wrap(kiln.SandboxError, err, "%s: the sandbox did not run it", what)
	}
	x.cpu += time.Duration(info.CPUNs)
	switch {
	case info.TimedOut:
		return out.Bytes(), kiln.Errorf(kiln.Invalid, "%s took longer than %v and was stopped", what, installTimeout)
	case info.Canceled:
		return out.Bytes(), kiln.Errorf(kiln.Invalid, "%s was cancelled", what)
	case info.Code != 0:
		return out.Bytes(), failed(what, out.String()+"\n"+errs.String())
	}
	return out.Bytes(), nil
}

// failed is a failed install as an error: the policy's refusal when the
// proxy said so (forbidden), else what pip or npm said at the end.
func failed(what, output string) error {
	msg := lastLines(output, 8)
	if strings.Contains(output, "network policy") || strings.Contains(output, "package policy") {
		return kiln.Errorf(kiln.Forbidden, "%s was refused by this session's policy: %s", what, msg)
	}
	return kiln.Errorf(kiln.Invalid, "%s failed: %s", what, msg)
}

// refusedBy is a failed install's error when the egress proxy refused a
// request of it: pip says only that no version was found, and npm that it
// got a 403, but the proxy's records say which package or host and why
// (the package policy, the network policy).
func refusedBy(err error, records []kiln.EgressRecord) error {
	var why []string
	for _, r := range records {
		if r.Allowed || r.Reason == "" {
			continue
		}
		what := r.Package
		if what == "" {
			what = r.Host
		}
		if w := fmt.Sprintf("%s: %s", what, r.Reason); !slices.Contains(why, w) {
			why = append(why, w)
		}
	}
	if len(why) == 0 {
		return err
	}
	return kiln.Errorf(kiln.Forbidden, "the egress proxy refused what the install asked for, by the administrator's package policy or this session's network policy: %s; %s",
		trunc(strings.Join(why, "; "), 1000), kiln.Message(err))
}

// lastLines are the last n non-empty lines of s, joined by " | ".
func lastLines(s string, n int) string {
	var lines []string
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			lines = append(lines, l)
		}
	}
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return trunc(strings.Join(lines, " | "), 2000)
}

// pip installs into the session's venv, made first if it is not there.
// The venv sees the system's packages (--system-site-packages) and uses
// the system's pip (--without-pip: no copy of pip per session).
func (x *installer) pip(ctx context.Context, specs []string) ([]Package, error) {
	venv := x.at(venvDir)
	if _, err := x.run(ctx, "making the session's Python environment", "python3", "-m", "venv", "--without-pip", "--system-site-packages", venv); err != nil {
		return nil, err
	}
	if _, err := x.quiet(ctx, "making the session's pip", "sh", "-c", pipShims, "sh", venv); err != nil {
		return nil, err
	}
	py := path.Join(venv, "bin", "python")
	argv := []string{py, "-m", "pip", "install", "--no-input", "--disable-pip-version-check", "--no-warn-script-location",
		"--progress-bar", "off", "--cache-dir", x.at(pipCacheDir), "--report", x.at(pipReport), "--"}
	if _, err := x.run(ctx, "pip install "+strings.Join(specs, " "), append(argv, specs...)...); err != nil {
		return nil, err
	}
	rep, err := x.quiet(ctx, "reading pip's report", "cat", x.at(pipReport))
	if err != nil {
		return nil, err
	}
	pkgs, err := parsePipReport(rep)
	if err != nil {
		return nil, err
	}
	// Requested packages that were there already are not in the report;
	// their versions come from the venv's Python, which sees both.
	var missing []string
	for _, sp := range specs {
		n := normalizePip(specName(ManagerPip, sp))
		if !slices.ContainsFunc(pkgs, func(p Package) bool { return normalizePip(p.Name) == n }) {
			missing = append(missing, specName(ManagerPip, sp))
		}
	}
	if len(missing) > 0 {
		out, err := x.quiet(ctx, "reading installed versions", append([]string{py, "-c", pipVersions}, missing...)...)
		if err != nil {
			return nil, err
		}
		var vs map[string]string
		if err := json.Unmarshal(out, &vs); err != nil {
			return nil, kiln.Wrap(kiln.Internal, err, "reading installed versions")
		}
		for _, n := range missing {
			pkgs = append(pkgs, Package{Name: n, Version: vs[n], Requested: true, Present: true})
		}
	}
	return pkgs, nil
}

// pipShims writes pip and pip3 into the venv's bin/ ($1), unless they are
// there (pip installed into the venv): scripts that run the system's pip
// with the venv's python, so that pip typed in a cell (the venv's bin/ is
// first on the sandbox's PATH) installs into the venv, through the proxy,
// and is not refused by PEP 668. The bash kernel runs the same script
// (kernels/bash/init.bash) when a cell's pip makes the venv.
const pipShims = `for n in pip pip3; do [ -e "$1/bin/$n" ] || { printf "#!/bin/sh\n# kiln: the system pip, run by this venv python (the venv has no pip of its own)\nexec \"%s/bin/python\" -m pip \"\$@\"\n" "$1" >"$1/bin/$n" && chmod 755 "$1/bin/$n"; } || exit; done`

// pipVersions prints the installed version of each name in argv as JSON.
const pipVersions = `import json, sys
from importlib import metadata
def v(n):
    try:
        return metadata.version(n)
    except Exception:
        return ""
print(json.dumps({n: v(n) for n in sys.argv[1:]}))`

// parsePipReport reads pip's installation report (pip install --report).
func parsePipReport(b []byte) ([]Package, error) {
	var rep struct {
		Install []struct {
			Requested bool `json:"requested"`
			Metadata  struct {
				Name    string `json:"name"`
				Version string `json:"version"`
			} `json:"metadata"`
		} `json:"install"`
	}
	if err := json.Unmarshal(b, &rep); err != nil {
		return nil, kiln.Wrap(kiln.Internal, err, "pip's report is not JSON")
	}
	out := make([]Package, 0, len(rep.Install))
	for _, i := range rep.Install {
		out = append(out, Package{Name: i.Metadata.Name, Version: i.Metadata.Version, Requested: i.Requested})
	}
	return out, nil
}

// npm installs into node_modules below the session's node prefix, with
// its cache and logs beside it (never in the workspace, npm's default).
func (x *installer) npm(ctx context.Context, specs []string) ([]Package, error) {
	prefix := x.at(nodeDir)
	if _, err := x.run(ctx, "making the session's node_modules", "mkdir", "-p", prefix); err != nil {
		return nil, err
	}
	argv := []string{"npm", "install", "--prefix", prefix, "--cache", x.at(npmCacheDir), "--logs-dir", x.at(npmLogsDir),
		"--no-update-notifier", "--no-audit", "--no-fund", "--color", "false", "--"}
	if _, err := x.run(ctx, "npm install "+strings.Join(specs, " "), append(argv, specs...)...); err != nil {
		return nil, err
	}
	// npm's hidden lockfile says what node_modules holds; reading it is
	// much quicker than npm ls, which starts npm again.
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

// parseNPMLock lists the requested packages and everything they depend
// on, once each, from npm's lockfile (version 2 or 3): its packages are
// keyed by their path below the prefix, and a dependency resolves as
// require does, from the nearest node_modules upwards.
func parseNPMLock(b []byte, requested []string) ([]Package, error) {
	var lock struct {
		Packages map[string]struct {
			Version              string            `json:"version"`
			Dependencies         map[string]string `json:"dependencies"`
			OptionalDependencies map[string]string `json:"optionalDependencies"`
		} `json:"packages"`
	}
	if err := json.Unmarshal(b, &lock); err != nil {
		return nil, kiln.Wrap(kiln.Internal, err, "npm's lockfile is not JSON")
	}
	resolve := func(from, dep string) string {
		for p := from; ; {
			cand := path.Join(p, "node_modules", dep)
			if _, ok := lock.Packages[cand]; ok {
				return cand
			}
			if p == "" {
				return ""
			}
			i := strings.LastIndex(p, "/node_modules/")
			if i < 0 {
				p = ""
			} else {
				p = p[:i]
			}
		}
	}
	var out []Package
	seen := map[string]bool{}
	var walk func(key string)
	walk = func(key string) {
		if seen[key] {
			return
		}
		seen[key] = true
		e := lock.Packages[key]
		name := key[strings.LastIndex(key, "node_modules/")+len("node_modules/"):]
		out = append(out, Package{Name: name, Version: e.Version, Requested: strings.Count(key, "node_modules/") == 1 && slices.Contains(requested, name)})
		deps := make([]string, 0, len(e.Dependencies)+len(e.OptionalDependencies))
		for d := range e.Dependencies {
			deps = append(deps, d)
		}
		for d := range e.OptionalDependencies {
			deps = append(deps, d)
		}
		slices.Sort(deps)
		for _, d := range deps {
			if k := resolve(key, d); k != "" {
				walk(k)
			}
		}
	}
	for _, name := range requested {
		key := "node_modules/" + name
		if _, ok := lock.Packages[key]; !ok {
			return out, kiln.Errorf(kiln.Invalid, "npm install ended, but %q is not in node_modules", trunc(name, 100))
		}
		walk(key)
	}
	return out, nil
}

type writerTo func([]byte)

func (f writerTo) Write(p []byte) (int, error) { f(p); return len(p), nil }

// PackageVersion is a package and its version.
type PackageVersion struct {
	Name    string `json:"name"`
	Version string `json:"version"`
}

// DefaultPackages are the packages a session has before it installs
// any, read from this host at run time (sessions see the host's /usr):
// Python's from the system python3's metadata (isolated from this
// process's environment and user site), Node.js's from the folders on
// require's global paths. Built-in modules are not listed.
func DefaultPackages(ctx context.Context) (python, node []PackageVersion, err error) {
	python, err = hostPackages(ctx, "python3", "-I", "-c", pythonPackages)
	if err != nil {
		return nil, nil, err
	}
	node, err = hostPackages(ctx, "node", "-e", nodePackages)
	return python, node, err
}

const pythonPackages = `import json
from importlib import metadata
seen = {}
for d in metadata.distributions():
    n = d.metadata["Name"]
    if n and n.lower() not in seen:
        seen[n.lower()] = {"name": n, "version": d.version}
print(json.dumps([seen[k] for k in sorted(seen)]))`

const nodePackages = `const fs = require('fs'), path = require('path');
const out = new Map();
const add = (dir) => {
  try {
    const p = JSON.parse(fs.readFileSync(path.join(dir, 'package.json'), 'utf8'));
    if (p.name && !out.has(p.name)) out.set(p.name, { name: p.name, version: String(p.version || '') });
  } catch (e) {}
};
for (const g of require('module').globalPaths) {
  let names = [];
  try { names = fs.readdirSync(g); } catch (e) { continue; }
  for (const n of names) {
    if (n.startsWith('@')) {
      try { for (const m of fs.readdirSync(path.join(g, n))) add(path.join(g, n, m)); } catch (e) {}
    } else add(path.join(g, n));
  }
}
console.log(JSON.stringify([...out.values()].sort((a, b) => a.name.localeCompare(b.name))));`

// hostPackages runs a lister with the sandbox's PATH and nothing else of
// this process's environment, so that what it finds is what a session
// finds.
func hostPackages(ctx context.Context, argv ...string) ([]PackageVersion, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	bin, err := SandboxBinary(argv[0])
	if err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, bin, argv[1:]...)
	cmd.Env = []string{"PATH=" + sandboxPath, "HOME=/nonexistent", "LANG=C.UTF-8"}
	cmd.Dir = "/"
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("list %s's packages: %w", argv[0], err)
	}
	var list []PackageVersion
	if err := json.Unmarshal(out, &list); err != nil {
		return nil, fmt.Errorf("list %s's packages: %w", argv[0], err)
	}
	return list, nil
}

// sandboxPath is the PATH of a sandbox's processes (native.BaseEnv's),
// where sessions find python3, pip, node and npm.
const sandboxPath = "/usr/local/bin:/usr/bin:/bin"

// SandboxBinary is the file a sandbox runs for name: found on the
// sandbox's PATH, not this process's (which may hold another python3).
func SandboxBinary(name string) (string, error) {
	for _, dir := range filepath.SplitList(sandboxPath) {
		p := filepath.Join(dir, name)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s is not on the sandboxes' PATH (%s)", name, sandboxPath)
}
