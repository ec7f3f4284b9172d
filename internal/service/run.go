package service

import (
	"context"
	"time"

	"github.com/kiln-dev/kiln/internal/engine"
	"github.com/kiln-dev/kiln/internal/kiln"
	"github.com/kiln-dev/kiln/internal/store"
)

// RunRequest is a one-shot run as a front end asks for it.
type RunRequest = engine.Run

// File is a file of a one-shot run: copied in, or written by the run.
type File = engine.File

// RunResult is a one-shot run's result and the contents of the files it
// created or changed, up to the configured sizes; larger ones are only
// listed in the result's artifacts.
type RunResult struct {
	Result kiln.CellResult
	Files  []File
	Cached bool // from the user's result cache (RunCached), not run now
	// Packages is what was installed before the code ran (RunRequest's
	// Packages), nil when none were asked for. Its egress is in the
	// result's, with the code's.
	Packages *PackageResult `json:",omitempty"`
}

// Run is a one-shot run in a fresh sandbox that is destroyed afterwards.
// It takes a place in the execution queue like a cell.
func (s *Service) Run(ctx context.Context, u kiln.User, r RunRequest) (RunResult, error) {
	p, err := engine.PrepareRun(r, s.cellBounds())
	if err != nil {
		return RunResult{}, err
	}
	lim, err := s.capLimits(u, r.Limits)
	if err != nil {
		return RunResult{}, err
	}
	p = p.WithLimits(lim)
	pol, preq, specs, err := s.runNetwork(u, r)
	if err != nil {
		return RunResult{}, err
	}
	var layer string
	if r.Environment != "" {
		if layer, err = s.resolveEnvironment(ctx, r.Environment); err != nil {
			return RunResult{}, err
		}
	}
	if err := s.checkBudget(ctx, u); err != nil {
		return RunResult{}, err
	}
	t, err := s.enterQueue(u)
	if err != nil {
		return RunResult{}, err
	}
	defer t.release()
	queued := time.Now()
	if err := t.run(ctx, nil); err != nil {
		return RunResult{}, err
	}
	wait := time.Since(queued)
	start := time.Now()
	var out RunResult
	then := func(sess *engine.Session, res kiln.CellResult) error {
		out.Files = s.collect(ctx, sess, res.Artifacts)
		return nil
	}
	var res kiln.CellResult
	// A run's sandbox has a proxy session with the policy "none", whose
	// refusals are in the result (network.go).
	// A pooled sandbox was made before its user was known, so it has no
	// user's build caches: a compiled program gains more from them.
	cache := s.buildCacheFor(u, p.Language())
	pd, refill := (*pooled)(nil), func() {}
	if cache == "" {
		pd, refill = s.runs.take(p)
	} else {
		defer s.trimBuildCache(u)
	}
	defer refill()
	var sess *engine.Session
	var n *netSession
	if pd != nil {
		sess, n = pd.sess, pd.net
		n.adopt("", u.ID, pol)
	} else if n, err = s.nets.openNet("", u.ID, pol); err == nil { // as engine.RunPrepared
		if sess, err = s.engine.NewSession(ctx, engine.SessionSpec{Limits: p.Limits(), Mounts: s.sandboxMounts(nil), EgressSocket: n.socket(),
			BuildCache: cache}); err != nil {
			n.close()
		}
	}
	if err == nil && layer != "" {
		if err = linkEnvironment(ctx, sess, layer); err != nil {
			s.runs.closeLater(sess, n)
		}
	}
	if err == nil && len(specs) > 0 {
		// The install's egress stays in the proxy session's records and
		// comes out with the code's below.
		var pr PackageResult
		istart := time.Now()
		pr, err = installIn(ctx, sess, preq, specs, PackageEvents{})
		pr.Wall = time.Since(istart)
		if err != nil {
			err = refusedBy(err, n.endCell())
			s.runs.closeLater(sess, n)
		} else {
			out.Packages = &pr
		}
	}
	if err == nil {
		res, err = engine.RunPreparedIn(ctx, sess, p, engine.Events{}, then)
		res.Egress = n.endCell()
		s.runs.closeLater(sess, n)
	}
	if err != nil {
		if k := kiln.KindOf(err); k == kiln.SandboxError || k == kiln.Internal {
			s.metrics.SandboxFailure("exec")
		}
		return RunResult{}, err
	}
	out.Result = res
	s.metrics.Execution(res.Language, string(res.Status), wait, time.Since(start))
	// The CPU time and the audit row in one write; a store failure is
	// logged, not returned, because the run has happened.
	audit := store.AuditEntry{UserID: u.ID, Action: "run", CodeHash: store.HashCode(r.Code), Outcome: string(res.Status),
		Detail: jsonDetail(map[string]any{"language": res.Language})}
	cpu := res.Usage.CPU
	if out.Packages != nil {
		cpu += out.Packages.CPU // pip's and npm's, as an install in a session
		audit.Detail = jsonDetail(map[string]any{"language": res.Language, "network": pol, "packages": specs, "installed": out.Packages.Packages})
	}
	f := store.CellFinish{UserID: u.ID, Day: s.cpu.currentDay(), CPU: cpu, Audit: &audit}
	if err := s.store.FinishCell(context.WithoutCancel(ctx), f); err != nil {
		s.log.Error("record a run's cpu time and audit row", "user", u.ID, "err", err)
	} else {
		s.cpu.counted(u.ID, f.Day, f.CPU)
	}
	return out, nil
}

// collect reads the created and modified files, within the size bounds.
func (s *Service) collect(ctx context.Context, sess *engine.Session, arts []kiln.Artifact) []File {
	var files []File
	budget := s.cfg.MaxRunFilesBytes
	for _, a := range arts {
		if a.Change == "deleted" || a.Size > s.cfg.MaxRunFileBytes || a.Size > budget {
			continue
		}
		data, err := sess.Agent().ReadFile(ctx, a.Path, min(s.cfg.MaxRunFileBytes, budget))
		if err != nil {
			continue // changed or gone since the walk; it stays listed
		}
		budget -= int64(len(data))
		files = append(files, File{Path: a.Path, Data: data})
	}
	return files
}

// runNetwork checks a run's network policy (within the server's ceiling
// unless u is an admin) and its packages: the manager defaults to the
// language's, and packages under the policy "none" are refused at once,
// naming it, since no index would be reachable.
func (s *Service) runNetwork(u kiln.User, r RunRequest) (kiln.NetworkPolicy, PackageRequest, []string, error) {
	pol, err := s.checkNetwork(u, r.Network)
	if err != nil {
		return pol, PackageRequest{}, nil, err
	}
	if len(r.Packages) == 0 {
		return pol, PackageRequest{}, nil, nil
	}
	req := PackageRequest{Manager: r.PackageManager, Packages: r.Packages}
	if req.Manager == "" {
		if req.Manager = ManagerFor(r.Language); req.Manager == "" {
			return pol, req, nil, kiln.Errorf(kiln.Invalid, "packages can be installed for Python (pip) and JavaScript or TypeScript (npm), not for %q; name a package_manager (pip or npm)", r.Language)
		}
	}
	specs, err := CheckPackages(req)
	if err != nil {
		return pol, req, nil, err
	}
	if pol.Mode == kiln.NetworkNone {
		return pol, req, nil, kiln.Errorf(kiln.Forbidden, "this run's network policy is %q, so %s cannot reach a package index; "+
			"installing packages needs the network policy \"allowlist\" (network: {\"mode\": \"allowlist\"})", pol.Mode, req.Manager)
	}
	return pol, req, specs, nil
}
