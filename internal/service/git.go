package service

import (
	"bytes"
	"context"
	"os"
	"path"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/kiln-dev/kiln/internal/kiln"
	"github.com/kiln-dev/kiln/internal/protocol"
	"github.com/kiln-dev/kiln/internal/store"
)

// The workspace as a git repository, for the notebook's git panel and
// the API's /git routes: each operation runs the host's git (the
// sandbox's read-only /usr/bin/git) inside the session's sandbox as
// user code runs, in the workspace, never on the host.

const (
	gitBin         = "/usr/bin/git"
	gitTimeout     = 30 * time.Second
	MaxGitDiff     = 1 << 20 // bytes of a diff returned; the rest is cut and said so
	maxGitOut      = 8 << 20
	MaxGitPaths    = 1000
	MaxGitMessage  = 16 << 10
	MaxGitLogItems = 200
)

// gitSafety goes before every command: no hooks, no fsmonitor and no
// pager, whatever the repository's own config says, so that a panel
// operation runs git and nothing a file in the workspace names.
var gitSafety = []string{"-c", "core.hooksPath=/dev/null", "-c", "core.fsmonitor=false", "-c", "core.pager=cat",
	"-c", "color.ui=false", "-c", "commit.gpgSign=false", "-c", "init.defaultBranch=main"}

// GitFile is one changed path: X (index) and Y (worktree) as git status
// --porcelain gives them ('?' for untracked).
type GitFile struct {
	Path     string
	Index    string
	Worktree string
}

// GitStatus is the workspace's repository state; Repo false when the
// workspace is not a repository.
type GitStatus struct {
	Repo   bool
	Branch string
	Files  []GitFile
}

// GitCommit is one commit of the log.
type GitCommit struct {
	Hash    string
	Author  string
	Time    time.Time
	Subject string
}

type gitResult struct {
	out, errs string
	code      int
}

// git runs git with args in the session's sandbox for u, who needs role.
func (s *Service) git(ctx context.Context, u kiln.User, sessionID string, need kiln.Role, maxOut int64, args ...string) (gitResult, error) {
	a, err := s.liveAs(ctx, u, sessionID, need)
	if err != nil {
		return gitResult{}, err
	}
	if _, err := os.Stat(gitBin); err != nil {
		return gitResult{}, kiln.Errorf(kiln.Unsupported, "git is not installed on this server; install Debian's git package")
	}
	release := a.l.hold()
	defer release()
	sess, err := a.l.sandbox(ctx, s.engine)
	if err != nil {
		return gitResult{}, err
	}
	name := strings.Map(func(r rune) rune {
		if r < 0x20 || r == '<' || r == '>' {
			return '_'
		}
		return r
	}, cmpOr(u.Name, u.ID))
	env := []string{"HOME=/tmp", "GIT_TERMINAL_PROMPT=0", "GIT_CONFIG_NOSYSTEM=1", "GIT_CEILING_DIRECTORIES=/",
		"GIT_AUTHOR_NAME=" + name, "GIT_AUTHOR_EMAIL=" + u.ID + "@kiln", "GIT_COMMITTER_NAME=" + name, "GIT_COMMITTER_EMAIL=" + u.ID + "@kiln"}
	var out, errs bytes.Buffer
	argv := append(append([]string{gitBin}, gitSafety...), args...)
	info, err := sess.Agent().Exec(ctx, protocol.Exec{Argv: argv, Env: env, TimeoutMs: gitTimeout.Milliseconds(),
		OutputBytes: maxOut, KillScope: protocol.KillGroup}, &out, &errs)
	switch {
	case err != nil:
		return gitResult{}, kiln.Wrap(kiln.SandboxError, err, "the sandbox did not run git")
	case info.TimedOut:
		return gitResult{}, kiln.Errorf(kiln.Invalid, "git %s took longer than %v and was stopped", args[0], gitTimeout)
	}
	return gitResult{out: out.String(), errs: errs.String(), code: info.Code}, nil
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// failed is git's refusal as an error that says what git said.
func (r gitResult) failed(what string) error {
	msg := strings.TrimSpace(strings.ToValidUTF8(r.errs+"\n"+r.out, "?"))
	if len(msg) > 2000 {
		msg = msg[:2000] + "..."
	}
	return kiln.Errorf(kiln.Invalid, "git %s failed: %s", what, msg)
}

// notRepo says that git found no repository.
func (r gitResult) notRepo() bool { return strings.Contains(r.errs, "not a git repository") }

// GitStatus reports the workspace's repository: branch and changed files.
func (s *Service) GitStatus(ctx context.Context, u kiln.User, sessionID string) (GitStatus, error) {
	r, err := s.git(ctx, u, sessionID, kiln.RoleViewer, maxGitOut, "status", "--porcelain=v1", "-z", "--branch", "--untracked-files=all")
	if err != nil {
		return GitStatus{}, err
	}
	if r.notRepo() {
		return GitStatus{}, nil
	}
	if r.code != 0 {
		return GitStatus{}, r.failed("status")
	}
	st := GitStatus{Repo: true, Files: []GitFile{}}
	entries := strings.Split(r.out, "\x00")
	for i := 0; i < len(entries); i++ {
		e := entries[i]
		switch {
		case strings.HasPrefix(e, "## "):
			b := strings.TrimPrefix(e, "## ")
			b, _, _ = strings.Cut(b, "...")
			b = strings.TrimPrefix(b, "No commits yet on ")
			st.Branch, _, _ = strings.Cut(b, " ")
		case len(e) > 3:
			f := GitFile{Index: e[:1], Worktree: e[1:2], Path: e[3:]}
			if f.Index == "R" || f.Index == "C" {
				i++ // the source of a rename follows
			}
			st.Files = append(st.Files, f)
		}
	}
	return st, nil
}

// GitInit makes the workspace a repository (git init), then reports it.
func (s *Service) GitInit(ctx context.Context, u kiln.User, sessionID string) (GitStatus, error) {
	r, err := s.git(ctx, u, sessionID, kiln.RoleCollaborator, 64<<10, "init", "--quiet")
	if err != nil {
		return GitStatus{}, err
	}
	if r.code != 0 {
		return GitStatus{}, r.failed("init")
	}
	s.audit(ctx, store.AuditEntry{UserID: u.ID, Actor: u.ID, Action: "session.git.init", SessionID: sessionID, Outcome: "ok"})
	return s.GitStatus(ctx, u, sessionID)
}

// checkGitPaths refuses paths that are not plain relative paths inside
// the workspace; they go to git as literal pathspecs.
func checkGitPaths(paths []string) ([]string, error) {
	if len(paths) > MaxGitPaths {
		return nil, kiln.Errorf(kiln.Invalid, "%d paths; at most %d at once", len(paths), MaxGitPaths)
	}
	out := make([]string, 0, len(paths))
	for _, p := range paths {
		c := path.Clean(p)
		if p == "" || !utf8.ValidString(p) || strings.ContainsAny(p, "\x00\n") || path.IsAbs(p) || c == ".." || strings.HasPrefix(c, "../") || len(p) > 4096 {
			return nil, kiln.Errorf(kiln.Invalid, "path %q is not a relative path inside the workspace", trunc(p, 100))
		}
		out = append(out, ":(literal)"+c)
	}
	return out, nil
}

// GitDiff is the diff of the worktree against the index (staged false)
// or of the index against HEAD (staged true), for one path or all; a
// diff over MaxGitDiff is cut, and cut says so.
func (s *Service) GitDiff(ctx context.Context, u kiln.User, sessionID, p string, staged bool) (diff string, cut bool, _ error) {
	args := []string{"diff", "--no-ext-diff", "--no-textconv"}
	if staged {
		args = append(args, "--cached")
	}
	args = append(args, "--")
	if p != "" {
		specs, err := checkGitPaths([]string{p})
		if err != nil {
			return "", false, err
		}
		args = append(args, specs...)
	}
	r, err := s.git(ctx, u, sessionID, kiln.RoleViewer, MaxGitDiff+1, args...)
	if err != nil {
		return "", false, err
	}
	if r.code != 0 && len(r.out) <= MaxGitDiff {
		return "", false, r.failed("diff")
	}
	if len(r.out) > MaxGitDiff {
		return strings.ToValidUTF8(r.out[:MaxGitDiff], "?"), true, nil
	}
	return strings.ToValidUTF8(r.out, "?"), false, nil
}

// GitStage stages paths (git add -A, so that deletions are staged too).
func (s *Service) GitStage(ctx context.Context, u kiln.User, sessionID string, paths []string) (GitStatus, error) {
	if len(paths) == 0 {
		return GitStatus{}, kiln.Errorf(kiln.Invalid, "paths is empty: name the files to stage")
	}
	specs, err := checkGitPaths(paths)
	if err != nil {
		return GitStatus{}, err
	}
	r, err := s.git(ctx, u, sessionID, kiln.RoleCollaborator, 64<<10, append([]string{"add", "-A", "--"}, specs...)...)
	if err != nil {
		return GitStatus{}, err
	}
	if r.code != 0 {
		return GitStatus{}, r.failed("add")
	}
	return s.GitStatus(ctx, u, sessionID)
}

// GitUnstage takes paths out of the index, keeping the worktree's files
// (git reset -- PATHS; in a repository without commits too).
func (s *Service) GitUnstage(ctx context.Context, u kiln.User, sessionID string, paths []string) (GitStatus, error) {
	if len(paths) == 0 {
		return GitStatus{}, kiln.Errorf(kiln.Invalid, "paths is empty: name the files to unstage")
	}
	specs, err := checkGitPaths(paths)
	if err != nil {
		return GitStatus{}, err
	}
	r, err := s.git(ctx, u, sessionID, kiln.RoleCollaborator, 64<<10, append([]string{"reset", "--quiet", "--"}, specs...)...)
	if err != nil {
		return GitStatus{}, err
	}
	if r.code != 0 {
		return GitStatus{}, r.failed("reset")
	}
	return s.GitStatus(ctx, u, sessionID)
}

// GitCommit commits what is staged with message, as u, and returns the
// new commit.
func (s *Service) GitCommit(ctx context.Context, u kiln.User, sessionID, message string) (GitCommit, error) {
	message = strings.TrimSpace(message)
	switch {
	case message == "":
		return GitCommit{}, kiln.Errorf(kiln.Invalid, "the commit message is empty")
	case len(message) > MaxGitMessage || !utf8.ValidString(message) || strings.ContainsRune(message, 0):
		return GitCommit{}, kiln.Errorf(kiln.Invalid, "the commit message must be UTF-8 text of at most %s", kiln.FormatBytes(MaxGitMessage))
	}
	r, err := s.git(ctx, u, sessionID, kiln.RoleCollaborator, 64<<10, "commit", "--quiet", "--no-verify", "-m", message)
	if err != nil {
		return GitCommit{}, err
	}
	if r.code != 0 {
		if t := r.out + r.errs; strings.Contains(t, "nothing to commit") || strings.Contains(t, "no changes added") || strings.Contains(t, "nothing added to commit") {
			return GitCommit{}, kiln.Errorf(kiln.Conflict, "nothing is staged to commit: stage changed files first")
		}
		return GitCommit{}, r.failed("commit")
	}
	log, err := s.GitLog(ctx, u, sessionID, 1)
	if err != nil || len(log) == 0 {
		return GitCommit{}, cmpErr(err, kiln.Errorf(kiln.Internal, "the commit is not in the log"))
	}
	s.audit(ctx, store.AuditEntry{UserID: u.ID, Actor: u.ID, Action: "session.git.commit", SessionID: sessionID, Outcome: "ok",
		Detail: jsonDetail(map[string]string{"commit": log[0].Hash})})
	return log[0], nil
}

func cmpErr(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

// GitLog lists the last n commits of HEAD, newest first; none in a
// repository without commits.
func (s *Service) GitLog(ctx context.Context, u kiln.User, sessionID string, n int) ([]GitCommit, error) {
	if n < 1 || n > MaxGitLogItems {
		return nil, kiln.Errorf(kiln.Invalid, "limit %d is outside 1 to %d", n, MaxGitLogItems)
	}
	r, err := s.git(ctx, u, sessionID, kiln.RoleViewer, maxGitOut, "log", "-z", "--max-count="+strconv.Itoa(n), "--format=%H%x1f%an%x1f%at%x1f%s")
	if err != nil {
		return nil, err
	}
	if r.code != 0 {
		if strings.Contains(r.errs, "does not have any commits") {
			return []GitCommit{}, nil
		}
		if r.notRepo() {
			return nil, kiln.Errorf(kiln.Conflict, "the workspace is not a git repository: initialise one first")
		}
		return nil, r.failed("log")
	}
	out := []GitCommit{}
	for _, rec := range strings.Split(r.out, "\x00") {
		f := strings.Split(strings.TrimPrefix(rec, "\n"), "\x1f")
		if len(f) != 4 {
			continue
		}
		sec, _ := strconv.ParseInt(f[2], 10, 64)
		out = append(out, GitCommit{Hash: f[0], Author: f[1], Time: time.Unix(sec, 0).UTC(), Subject: strings.ToValidUTF8(f[3], "?")})
	}
	return out, nil
}

// gitRev is what GitRestore accepts as a commit: a hash (at least 4 hex
// digits) or HEAD with an optional ~N; nothing git could read as an option
// or a ref expression of another kind.
var gitRev = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^([0-9a-fA-F]{4,64}|HEAD(~[0-9]{1,6})?)$`) })

// GitRestore checks out path as it was in commit, in the worktree and the
// index (git checkout COMMIT -- PATH).
func (s *Service) GitRestore(ctx context.Context, u kiln.User, sessionID, commit, p string) (GitStatus, error) {
	if !gitRev().MatchString(commit) {
		return GitStatus{}, kiln.Errorf(kiln.Invalid, "commit %q must be a commit hash (4 to 64 hex digits) or HEAD~N", trunc(commit, 80))
	}
	specs, err := checkGitPaths([]string{p})
	if err != nil {
		return GitStatus{}, err
	}
	r, err := s.git(ctx, u, sessionID, kiln.RoleCollaborator, 64<<10, "checkout", "--quiet", commit, "--", specs[0])
	if err != nil {
		return GitStatus{}, err
	}
	if r.code != 0 {
		return GitStatus{}, r.failed("checkout")
	}
	return s.GitStatus(ctx, u, sessionID)
}

// GitFromBundle makes the workspace a repository with the history of a
// git bundle in the workspace (git init, then a pull of the bundle's
// HEAD), for a workspace that is not a repository yet.
func (s *Service) GitFromBundle(ctx context.Context, u kiln.User, sessionID, bundle string) (GitStatus, error) {
	if _, err := checkGitPaths([]string{bundle}); err != nil {
		return GitStatus{}, err
	}
	st, err := s.GitStatus(ctx, u, sessionID)
	if err != nil {
		return GitStatus{}, err
	}
	if st.Repo {
		return GitStatus{}, kiln.Errorf(kiln.Conflict, "the workspace is a git repository already; a bundle starts a new one")
	}
	if _, err := s.GitInit(ctx, u, sessionID); err != nil {
		return GitStatus{}, err
	}
	r, err := s.git(ctx, u, sessionID, kiln.RoleCollaborator, 64<<10, "pull", "--quiet", "--no-rebase", "--", "./"+path.Clean(bundle), "HEAD")
	if err != nil {
		return GitStatus{}, err
	}
	if r.code != 0 {
		return GitStatus{}, r.failed("pull from the bundle")
	}
	return s.GitStatus(ctx, u, sessionID)
}
