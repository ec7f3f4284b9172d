package server

import (
	"net/http"

	"github.com/kiln-dev/kiln/client"
	"github.com/kiln-dev/kiln/internal/service"
)

// The workspace as a git repository (/v1/sessions/{id}/git/...): the
// service runs git inside the session's sandbox.

func fromGitStatus(st service.GitStatus) client.GitStatus {
	out := client.GitStatus{Repo: st.Repo, Branch: st.Branch, Files: []client.GitFile{}}
	for _, f := range st.Files {
		out.Files = append(out.Files, client.GitFile{Path: f.Path, Index: f.Index, Worktree: f.Worktree})
	}
	return out
}

func fromGitCommit(c service.GitCommit) client.GitCommit {
	return client.GitCommit{Hash: c.Hash, Author: c.Author, Time: c.Time, Subject: c.Subject}
}

func (s *Server) gitStatus(w http.ResponseWriter, r *http.Request, c *call) error {
	st, err := s.svc.GitStatus(r.Context(), c.user, r.PathValue("id"))
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, fromGitStatus(st))
}

func (s *Server) gitInit(w http.ResponseWriter, r *http.Request, c *call) error {
	st, err := s.svc.GitInit(r.Context(), c.user, r.PathValue("id"))
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, fromGitStatus(st))
}

func (s *Server) gitDiff(w http.ResponseWriter, r *http.Request, c *call) error {
	staged, err := boolParam(r, "staged", false)
	if err != nil {
		return err
	}
	d, cut, err := s.svc.GitDiff(r.Context(), c.user, r.PathValue("id"), r.URL.Query().Get("path"), staged)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, client.GitDiff{Diff: d, Cut: cut})
}

func (s *Server) gitStage(w http.ResponseWriter, r *http.Request, c *call) error {
	var req client.GitStageRequest
	if err := decode(w, r, s.cfg.MaxJSONBytes, &req); err != nil {
		return err
	}
	st, err := s.svc.GitStage(r.Context(), c.user, r.PathValue("id"), req.Paths)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, fromGitStatus(st))
}

func (s *Server) gitUnstage(w http.ResponseWriter, r *http.Request, c *call) error {
	var req client.GitStageRequest
	if err := decode(w, r, s.cfg.MaxJSONBytes, &req); err != nil {
		return err
	}
	st, err := s.svc.GitUnstage(r.Context(), c.user, r.PathValue("id"), req.Paths)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, fromGitStatus(st))
}

func (s *Server) gitCommit(w http.ResponseWriter, r *http.Request, c *call) error {
	var req client.GitCommitRequest
	if err := decode(w, r, s.cfg.MaxJSONBytes, &req); err != nil {
		return err
	}
	cm, err := s.svc.GitCommit(r.Context(), c.user, r.PathValue("id"), req.Message)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusCreated, fromGitCommit(cm))
}

func (s *Server) gitLog(w http.ResponseWriter, r *http.Request, c *call) error {
	n, err := intParam(r, "limit", 1, service.MaxGitLogItems)
	if err != nil {
		return err
	}
	if n == 0 {
		n = 50
	}
	log, err := s.svc.GitLog(r.Context(), c.user, r.PathValue("id"), n)
	if err != nil {
		return err
	}
	out := client.GitLog{Commits: make([]client.GitCommit, 0, len(log))}
	for _, cm := range log {
		out.Commits = append(out.Commits, fromGitCommit(cm))
	}
	return writeJSON(w, http.StatusOK, out)
}

func (s *Server) gitRestore(w http.ResponseWriter, r *http.Request, c *call) error {
	var req client.GitRestoreRequest
	if err := decode(w, r, s.cfg.MaxJSONBytes, &req); err != nil {
		return err
	}
	st, err := s.svc.GitRestore(r.Context(), c.user, r.PathValue("id"), req.Commit, req.Path)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, fromGitStatus(st))
}

func (s *Server) gitFromBundle(w http.ResponseWriter, r *http.Request, c *call) error {
	var req client.GitBundleRequest
	if err := decode(w, r, s.cfg.MaxJSONBytes, &req); err != nil {
		return err
	}
	st, err := s.svc.GitFromBundle(r.Context(), c.user, r.PathValue("id"), req.Bundle)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, fromGitStatus(st))
}
