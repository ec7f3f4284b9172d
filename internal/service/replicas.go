package service

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/kiln-dev/kiln/internal/kiln"
	"github.com/kiln-dev/kiln/internal/store"
	"github.com/kiln-dev/kiln/internal/store/postgres"
)

// Several replicas on one PostgreSQL (issue 15). Each kiln serve has a
// replica id, kept in its data directory so that a restart on the same
// directory is the same replica and resumes its own sessions; it
// registers and heartbeats (replicas table). A session's sandbox lives in
// one replica's engine, so the store records which replica holds each
// active session, and a lease lasts as long as its holder heartbeats:
//
//   - a request for a session another live replica holds moves the
//     session here when the backend reaches every replica's sandboxes
//     (SharedSandboxes): the holder lets go of it once idle and this
//     replica attaches to the same sandbox, kernels intact
//     (replicas_handoff.go); a request that waits longer than
//     HandoffWait is answered busy (503). On the other backends (native
//     and Docker: a sandbox's agent has one connection, held by the
//     process that made the sandbox) it is refused with a conflict that
//     names the holder: no second sandbox, no proxying; a load balancer
//     routes a session's requests to its replica.
//   - a session whose holder is gone (no heartbeat for ReplicaGone) is
//     taken over by the replica the next request reaches, exactly once:
//     the claim locks the session's row (postgres.Replicas).
//   - idle sessions are ended by one replica each (SKIP LOCKED), their
//     holder's or, when it is gone, any replica's.
//   - a running batch is run by the replica that claims it; a gone
//     replica's batches are claimed and resumed by another.
//   - the per-user caps on sessions (checkCapsElsewhere) and on cells at
//     once (replicas_slots.go), the CPU budget and the request rate limits
//     (the server's, postgres.Replicas.TakeTokens) count every replica.
//
// With SQLite (Config.Replicas nil) none of this runs.

// ReplicaStore is the replica bookkeeping the service needs;
// postgres.Replicas is the one implementation.
type ReplicaStore interface {
	Heartbeat(ctx context.Context, me, addr string, first bool) error
	Hold(ctx context.Context, me, id string) error
	ClaimSession(ctx context.Context, me, id string, gone time.Duration) (holder string, _ error)
	ClaimBatch(ctx context.Context, me, id string, gone time.Duration) (bool, error)
	Held(ctx context.Context, me string) (map[string]bool, error)
	ReapIdle(ctx context.Context, me string, ids []string, reason string, now time.Time, gone time.Duration) ([]postgres.Reaped, error)
	OrphanBatches(ctx context.Context, me string, gone time.Duration) ([]string, error)
	Lost(ctx context.Context, me string, ids []string) ([]string, error)
	Elsewhere(ctx context.Context, me, userID string) ([]kiln.Limits, error)
	Prune(ctx context.Context, after time.Duration) (int64, error)
	// Handoff between live replicas (replicas_handoff.go).
	AskRelease(ctx context.Context, me, id string) (string, error)
	Withdraw(ctx context.Context, me, id string) error
	Releases(ctx context.Context, me string) ([]string, error)
	Release(ctx context.Context, me, id, sandbox string) (string, error)
	HandedOver(ctx context.Context, me, id string) (holder, sandbox string, _ error)
	NoteSandbox(ctx context.Context, me, id, sandbox string) error
	Leave(ctx context.Context, me string) error
	Gone(ctx context.Context, ids []string, gone time.Duration) ([]string, error)
	NotedSandboxes(ctx context.Context) ([]string, error)
	Listen(ctx context.Context, me string, wake func())
	// The per-user cap across replicas (replicas_slots.go).
	TakeUserSlot(ctx context.Context, me, userID, id string, perUser int, gone time.Duration) (bool, error)
	ReleaseUserSlot(ctx context.Context, id string) error
	KeepUserSlots(ctx context.Context, me string, ids []string) error
}

var _ ReplicaStore = (*postgres.Replicas)(nil)

// DefaultReplicaGone is how long a replica may miss heartbeats before
// its sessions and batches are taken over.
const DefaultReplicaGone = 30 * time.Second

// pruneReplicasAfter is how long a gone replica that holds nothing keeps
// its row, for an operator to see it.
const pruneReplicasAfter = 24 * time.Hour

// MinReplicaGone is the shortest bound --replica-gone takes.
const MinReplicaGone = time.Second

// noticeTakenOver is the first cell's notice in a session taken over
// from a gone replica.
const noticeTakenOver = "the kiln replica that held this session stopped: the kernel state is lost; the history is intact"

// noticeFilesLost adds that the workspace stayed on that replica.
const noticeFilesLost = "; the workspace files were on that replica's disk and are not here"

// replicaID returns this replica's id, made once and kept in the data
// directory.
// ReplicaIDOf is the replica id kept in dataDir (made and kept there
// when there is none): kiln serve names the replica to its backend before
// the service starts (claimBackend), so that a warm pool filled at once
// carries it too.
func ReplicaIDOf(dataDir string) (string, error) { return replicaID(dataDir) }

func replicaID(dataDir string) (string, error) {
	p := filepath.Join(dataDir, "replica-id")
	if b, err := os.ReadFile(p); err == nil {
		if id := strings.TrimSpace(string(b)); id != "" && len(id) <= 128 {
			return id, nil
		}
	}
	host, _ := os.Hostname()
	if len(host) > 64 {
		host = host[:64]
	}
	b := make([]byte, 6)
	rand.Read(b)
	id := host + "-" + hex.EncodeToString(b)
	if err := os.WriteFile(p, []byte(id+"\n"), 0o600); err != nil {
		return "", fmt.Errorf("keep the replica id: %w", err)
	}
	return id, nil
}

// ReplicaID is this replica's id; empty without replicas (SQLite).
func (s *Service) ReplicaID() string { return s.replica }

// joinReplicas registers this replica; before recover, so that its held
// sessions are its own.
func (s *Service) joinReplicas(ctx context.Context) error {
	if s.cfg.Replicas == nil {
		return nil
	}
	if s.cfg.ReplicaGone < MinReplicaGone {
		return kiln.Errorf(kiln.Invalid, "--replica-gone %v is under the minimum of %v: replicas heartbeat four times within it, and a database round trip must fit", s.cfg.ReplicaGone, MinReplicaGone)
	}
	id, err := replicaID(s.cfg.DataDir)
	if err != nil {
		return err
	}
	s.replica = id
	if err := s.cfg.Replicas.Heartbeat(ctx, id, s.cfg.ReplicaAddr, true); err != nil {
		return kiln.Wrap(kiln.Unavailable, err, "cannot register this replica in the store")
	}
	if b, ok := s.engine.Backend().(replicaSandboxes); ok && s.handoffs() {
		b.SetReplica(id)
	}
	s.log.Info("replica registered", "replica", id, "gone_after", s.cfg.ReplicaGone)
	return nil
}

// heartbeat renews the lease of this replica's sessions and batches and
// resumes the batches of gone replicas, until Close.
func (s *Service) heartbeat() {
	defer s.done.Done()
	t := time.NewTicker(s.cfg.ReplicaGone / 4)
	defer t.Stop()
	beat := 0
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), s.cfg.ReplicaGone/2)
		if err := s.cfg.Replicas.Heartbeat(ctx, s.replica, s.cfg.ReplicaAddr, false); err != nil {
			s.log.Error("replica heartbeat", "err", err)
		}
		s.dropLost(ctx)
		s.noteSandboxes(ctx)
		if beat++; beat%4 == 0 {
			s.sweepOrphans(ctx)
		}
		s.wakeHandoffs() // in case a request's notification was lost
		s.sweepSlots(ctx)
		s.resumeOrphanBatches(ctx)
		if _, err := s.cfg.Replicas.Prune(ctx, pruneReplicasAfter); err != nil {
			s.log.Error("prune replicas", "err", err)
		}
		cancel()
	}
}

// recoverable is the active sessions this replica resumes when it starts:
// all of them alone; with replicas, those it holds (or none holds).
func (s *Service) recoverable(ctx context.Context) ([]kiln.Session, error) {
	active, err := s.store.ActiveSessions(ctx)
	if err != nil || s.cfg.Replicas == nil {
		return active, err
	}
	held, err := s.cfg.Replicas.Held(ctx, s.replica)
	if err != nil {
		return nil, err
	}
	mine := active[:0]
	for _, rec := range active {
		if held[rec.ID] {
			mine = append(mine, rec)
		}
	}
	return mine, nil
}

// holdNew records that this replica holds a session it has just made.
func (s *Service) holdNew(ctx context.Context, id string) {
	if s.cfg.Replicas == nil {
		return
	}
	if err := s.cfg.Replicas.Hold(context.WithoutCancel(ctx), s.replica, id); err != nil {
		s.log.Error("hold session", "session", id, "err", err)
	}
}

// takeOver is liveAs's answer for an active session not in this
// replica's memory: errEnded alone (it has ended); with replicas, a
// conflict naming the live replica that holds it, or the session taken
// over from a gone one and resumed here as after a restart.
func (s *Service) takeOver(ctx context.Context, ownerID, id string) (*live, error) {
	if s.cfg.Replicas == nil {
		return nil, errEnded
	}
	defer s.arrive(id)()
	holder, err := s.cfg.Replicas.ClaimSession(ctx, s.replica, id, s.cfg.ReplicaGone)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return nil, errEnded
	case errors.Is(err, postgres.ErrHeld) && s.handoffs():
		return s.handOver(ctx, ownerID, id, holder)
	case errors.Is(err, postgres.ErrHeld):
		return nil, kiln.Errorf(kiln.Conflict,
			"session %s is held by kiln replica %s, which is alive: send the session's requests to that replica "+
				"(its sandbox lives there, and this backend, %s, does not reach one replica's sandboxes from another), "+
				"or retry after it stops, when the next replica asked takes the session over (within %s)",
			id, holder, s.engine.Backend().Capabilities().Name, s.cfg.ReplicaGone)
	case err != nil:
		return nil, kiln.Wrap(kiln.Unavailable, err, "cannot claim session %s from the store", id)
	}
	s.mu.Lock()
	l := s.sessions[id]
	s.mu.Unlock()
	if l != nil {
		return l, nil // a concurrent request here took it over first
	}
	if s.handoffs() {
		// The sandbox its gone holder last noted (noteSandboxes), or one
		// handed over to a request here that stopped waiting before it
		// saw the handoff: attached now, with its kernels' state.
		if _, box, err := s.cfg.Replicas.HandedOver(ctx, s.replica, id); err == nil && box != "" {
			return s.attachTakenOver(ctx, ownerID, id, box)
		}
	}
	rec, err := s.store.Session(ctx, ownerID, id)
	if err != nil {
		return nil, err
	}
	if rec.Status != kiln.SessionActive {
		return nil, errEnded
	}
	notice := noticeTakenOver
	if err := s.ws.Restore(id); err != nil {
		lim := rec.Limits.WithDefaults()
		if _, err := s.ws.Create(id, lim.WorkspaceBytes, lim.Inodes); err != nil {
			return nil, err
		}
		notice += noticeFilesLost
	}
	l = s.resumedLive(rec)
	l.notice = notice
	if err := s.finishRunning(ctx, rec); err != nil {
		s.log.Error("finish the cells of a taken-over session", "session", id, "err", err)
	}
	s.mu.Lock()
	if prev := s.sessions[id]; prev != nil {
		s.mu.Unlock()
		return prev, nil
	}
	s.sessions[id] = l
	s.mu.Unlock()
	s.log.Info("session taken over from a gone replica", "session", id, "replica", s.replica)
	s.audit(ctx, store.AuditEntry{UserID: rec.UserID, Action: "session.takeover", SessionID: id, Outcome: "ok",
		Detail: jsonDetail(map[string]any{"replica": s.replica})})
	return l, nil
}

// expireReplicas is expire with replicas: the store ends each idle
// session once, whichever replica gets there first, and this replica
// tears down what it holds of the ones it ended.
func (s *Service) expireReplicas(now time.Time, idle []*live) {
	ids := make([]string, len(idle))
	for i, l := range idle {
		ids[i] = l.rec.ID
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	reaped, err := s.cfg.Replicas.ReapIdle(ctx, s.replica, ids, ReasonIdle, now, s.cfg.ReplicaGone)
	if err != nil {
		s.log.Error("end idle sessions", "err", err)
		return
	}
	for _, r := range reaped {
		if l := s.lookup(r.ID); l != nil {
			s.dropEnded(ctx, l, ReasonIdle)
		} else {
			if s.ws.Exists(r.ID) {
				s.ws.Remove(r.ID)
			}
			s.destroyLeft(ctx, r.ID, r.Sandbox)
		}
		s.metrics.SessionEnded("idle")
		s.audit(ctx, store.AuditEntry{UserID: r.UserID, Action: "session.end", SessionID: r.ID, Outcome: ReasonIdle,
			Detail: jsonDetail(map[string]any{"replica": s.replica})})
	}
}

// dropEnded is endSession for a session the store has already ended.
func (s *Service) dropEnded(ctx context.Context, l *live, reason string) {
	s.mu.Lock()
	if s.sessions[l.rec.ID] != l {
		s.mu.Unlock()
		return
	}
	delete(s.sessions, l.rec.ID)
	s.mu.Unlock()
	s.watchers.drop(l.rec.ID, func(*watcher) bool { return true })
	l.end(ctx, reason)
	if err := s.ws.Remove(l.rec.ID); err != nil {
		s.log.Error("remove workspace", "session", l.rec.ID, "err", err)
	}
}

// dropLost lets go of the sessions in memory that this replica no longer
// holds (another took them over while its heartbeats did not reach the
// store): their sandboxes here stop, so no session runs in two places
// for longer than a heartbeat. The store's record is the new holder's.
func (s *Service) dropLost(ctx context.Context) {
	s.mu.Lock()
	ids := make([]string, 0, len(s.sessions))
	for id := range s.sessions {
		ids = append(ids, id)
	}
	s.mu.Unlock()
	lost, err := s.cfg.Replicas.Lost(ctx, s.replica, ids)
	if err != nil {
		s.log.Error("lost sessions", "err", err)
		return
	}
	for _, id := range lost {
		if l := s.lookup(id); l != nil && s.handoffs() {
			// The new holder attaches to the same sandbox: let go of it.
			s.log.Warn("session held by another replica now; this one lets go of its sandbox", "session", id)
			s.letGoLost(ctx, l)
		} else if l != nil {
			s.log.Warn("session held by another replica now; its sandbox here stops", "session", id)
			s.dropEnded(ctx, l, ReasonTakenOver)
		}
	}
}

// ReasonTakenOver is what a session's sandbox here was told when another
// replica took the session over.
const ReasonTakenOver = "taken over by another kiln replica"

// checkCapsElsewhere applies the per-user caps on sessions (count and
// workspace bytes) to the user's sessions on every replica together,
// before reserve applies them to this replica's. Two replicas making the
// user's last allowed session at the same moment may both succeed: the
// caps bound the sessions a user holds, not exactly.
func (s *Service) checkCapsElsewhere(ctx context.Context, userID string, wsBytes int64) error {
	if s.cfg.Replicas == nil {
		return nil
	}
	others, err := s.cfg.Replicas.Elsewhere(ctx, s.replica, userID)
	if err != nil {
		return kiln.Wrap(kiln.Unavailable, err, "cannot count your sessions on the other replicas")
	}
	s.mu.Lock()
	n, bytes := s.activeOfLocked(userID)
	n += s.starting[userID]
	s.mu.Unlock()
	n += len(others)
	for _, l := range others {
		bytes += l.WithDefaults().WorkspaceBytes
	}
	if n >= s.cfg.MaxSessionsPerUser {
		return kiln.Errorf(kiln.QuotaExceeded, "you have %d active sessions, the most allowed; end one (DELETE /v1/sessions/{id}) first", n)
	}
	if bytes+wsBytes > s.cfg.MaxWorkspaceBytesPerUser {
		return kiln.Errorf(kiln.QuotaExceeded, "a %s workspace would bring your sessions' workspaces to %s, over your %s; end a session or ask for a smaller workspace",
			kiln.FormatBytes(wsBytes), kiln.FormatBytes(bytes+wsBytes), kiln.FormatBytes(s.cfg.MaxWorkspaceBytesPerUser))
	}
	return nil
}

// claimBatch says whether this replica runs batch id: always alone; with
// replicas, when it holds or wins the batch's row.
func (s *Service) claimBatch(id string) bool {
	if s.cfg.Replicas == nil {
		return true
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ok, err := s.cfg.Replicas.ClaimBatch(ctx, s.replica, id, s.cfg.ReplicaGone)
	if err != nil {
		s.log.Error("claim batch", "batch", id, "err", err)
	}
	return ok
}

// resumeOrphanBatches claims and resumes the running batches of gone
// replicas.
func (s *Service) resumeOrphanBatches(ctx context.Context) {
	ids, err := s.cfg.Replicas.OrphanBatches(ctx, s.replica, s.cfg.ReplicaGone)
	if err != nil {
		s.log.Error("orphan batches", "err", err)
		return
	}
	for _, id := range ids {
		b, err := s.batchByID(ctx, id)
		if err != nil {
			s.log.Error("orphan batch", "batch", id, "err", err)
			continue
		}
		u, err := s.store.User(ctx, b.UserID)
		if err != nil {
			continue
		}
		s.log.Info("resuming the batch of a gone replica", "batch", id, "user", b.UserID)
		s.startBatch(u, b)
	}
}

// batchByID finds a running batch among the running ones (the store
// reads a batch by its user).
func (s *Service) batchByID(ctx context.Context, id string) (store.Batch, error) {
	running, err := s.store.RunningBatches(ctx)
	if err != nil {
		return store.Batch{}, err
	}
	for _, b := range running {
		if b.ID == id {
			return b, nil
		}
	}
	return store.Batch{}, store.ErrNotFound
}
