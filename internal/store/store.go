package store

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"time"

	"github.com/kiln-dev/kiln/internal/kiln"
)

// ErrNotFound is returned when a record does not exist or belongs to another
// user; the two are deliberately indistinguishable (the API answers 404).
var ErrNotFound = &kiln.Error{Kind: kiln.NotFound, Message: "not found"}

// ErrConflict is returned when a write collides with existing state: a
// duplicate user name or id, or ending a session that has already ended.
var ErrConflict = &kiln.Error{Kind: kiln.Conflict, Message: "already exists or conflicts with the current state"}

// Store is everything the service keeps. Methods that read or change a
// session, an execution or an artifact take the caller's user id and return
// ErrNotFound for another user's record. Any other error is internal.
type Store interface {
	Users
	Keys
	Sessions
	Executions
	Artifacts
	Audit
	Usage
	Batches
	Shares
	Close() error
}

// Batches are batches of judged one-shot runs, and the per-user cache of
// one-shot results. Methods that read or change a batch take the caller's
// user id and return ErrNotFound for another user's.
type Batches interface {
	CreateBatch(ctx context.Context, b *Batch, items []string) error
	Batch(ctx context.Context, userID, id string) (Batch, error)
	FinishBatchItem(ctx context.Context, userID string, it BatchItem) error
	FinishBatch(ctx context.Context, userID, id string, at time.Time) error
	BatchItems(ctx context.Context, userID, batchID string, done bool, p Page) ([]BatchItem, string, error)
	PendingBatchItems(ctx context.Context, userID, batchID string) ([]BatchItem, error)
	RunningBatches(ctx context.Context) ([]Batch, error)
	CachedRun(ctx context.Context, userID, key string) (string, error)
	PutCachedRun(ctx context.Context, userID, key, result string, at time.Time, keep int) error
}

// Users are the people and programs that own sessions.
type Users interface {
	// CreateUser stores u, filling in ID and Created when empty.
	// ErrConflict if the name (or id) is taken.
	CreateUser(ctx context.Context, u *User) error
	// User returns the user with the id, or ErrNotFound.
	User(ctx context.Context, id string) (User, error)
	// UserByName returns the user with the name, or ErrNotFound.
	UserByName(ctx context.Context, name string) (User, error)
	// ListUsers pages through all users, oldest first.
	ListUsers(ctx context.Context, p Page) ([]User, string, error)
}

// Keys are API keys, of which only a SHA-256 hash is kept.
type Keys interface {
	// CreateAPIKey stores k (Hash from HashKey, never the key), filling in ID
	// and Created when empty. ErrNotFound if the user does not exist;
	// ErrConflict if the hash is already stored.
	CreateAPIKey(ctx context.Context, k *APIKey) error
	// APIKeyByHash returns the unrevoked key with the hash, or ErrNotFound.
	// An expired key is returned: the caller says that it expired.
	APIKeyByHash(ctx context.Context, hash string) (APIKey, error)
	// TouchAPIKey records that the key was used at the time.
	TouchAPIKey(ctx context.Context, id string, at time.Time) error
	// RevokeAPIKey revokes one of the user's keys; ErrNotFound if the user
	// has no such key or it is already revoked.
	RevokeAPIKey(ctx context.Context, userID, id string, at time.Time) error
	// ListAPIKeys returns the user's keys, revoked ones included, oldest first.
	ListAPIKeys(ctx context.Context, userID string) ([]APIKey, error)
}

// Sessions are long-lived sandboxes owned by a user.
type Sessions interface {
	// CreateSession stores s as active, filling in ID, Created and
	// LastActive when empty. ErrNotFound if the user does not exist.
	CreateSession(ctx context.Context, s *Session) error
	// Session returns the user's session, or ErrNotFound.
	Session(ctx context.Context, userID, id string) (Session, error)
	// ListSessions pages through the user's sessions, newest first.
	// An invalid cursor is a kiln.Invalid error.
	ListSessions(ctx context.Context, userID string, f SessionFilter, p Page) ([]Session, string, error)
	// TouchSession sets LastActive; ErrNotFound as Session.
	TouchSession(ctx context.Context, userID, id string, at time.Time) error
	// SetSandbox records the sandbox now serving the session.
	SetSandbox(ctx context.Context, userID, id, sandboxID string) error
	// SetNetwork records the session's network policy, so that the
	// session has it again after a restart; ErrNotFound as Session.
	SetNetwork(ctx context.Context, userID, id string, p kiln.NetworkPolicy) error
	// EndSession marks an active session ended with the reason; ErrNotFound
	// as Session, ErrConflict if it has already ended.
	EndSession(ctx context.Context, userID, id, reason string, at time.Time) error
	// ActiveSessions lists every active session of every user (for idle
	// expiry and recovery at start), least recently active first.
	ActiveSessions(ctx context.Context) ([]Session, error)
}

// Executions are the cells run in a session: the history.
type Executions interface {
	// CreateExecution stores e with the next sequence number of its session
	// (1, 2, 3, ... without gaps, also under concurrency), filling in ID,
	// CodeHash, Status (running) and Started when empty, and marks the
	// session active at Started. ErrNotFound if e.UserID does not own the
	// session.
	CreateExecution(ctx context.Context, e *Execution) error
	// FinishExecution records the result; the status becomes
	// result.Status. ErrNotFound as Execution.
	FinishExecution(ctx context.Context, userID, id string, result kiln.CellResult, at time.Time) error
	// FinishCell is FinishExecution (unless f.ID is empty: a one-shot
	// run), AddCPU and AppendAudit of a finished cell in one transaction:
	// all of them or none, one write.
	FinishCell(ctx context.Context, f CellFinish) error
	// Execution returns the user's execution, or ErrNotFound.
	Execution(ctx context.Context, userID, id string) (Execution, error)
	// ListExecutions pages through a session's executions in sequence
	// order; ErrNotFound if the user does not own the session.
	ListExecutions(ctx context.Context, userID, sessionID string, p Page) ([]Execution, string, error)
}

// Artifacts are the metadata of files an execution created, changed or
// deleted in its session's workspace (the bytes stay in the workspace).
type Artifacts interface {
	// AddArtifacts records the changes made by one of the user's executions;
	// ErrNotFound if the user does not own it.
	AddArtifacts(ctx context.Context, userID, executionID string, arts []kiln.Artifact, at time.Time) error
	// ListArtifacts pages through a session's artifacts in the order they
	// were recorded, only one execution's when executionID is not empty;
	// ErrNotFound if the user does not own the session (or execution).
	ListArtifacts(ctx context.Context, userID, sessionID, executionID string, p Page) ([]Artifact, string, error)
}

// Usage is what users consumed, for the per-user daily budgets.
type Usage interface {
	// AddCPU adds d to the user's CPU time for the UTC day (YYYY-MM-DD);
	// concurrent calls add up.
	AddCPU(ctx context.Context, userID, day string, d time.Duration) error
	// CPU returns the user's CPU time for the day, 0 when none was used.
	CPU(ctx context.Context, userID, day string) (time.Duration, error)
}

// Audit is the append-only log: entries can be added and read, never
// changed or removed (the schema refuses it too).
type Audit interface {
	// AppendAudit stores e, filling in ID and Time when empty.
	AppendAudit(ctx context.Context, e *AuditEntry) error
	// ListAudit pages through the log, oldest first.
	ListAudit(ctx context.Context, f AuditFilter, p Page) ([]AuditEntry, string, error)
}

// Page asks for one page of a listing. Cursor is empty for the first page
// and otherwise the opaque string a previous call returned.
type Page struct {
	Limit  int // 0 means DefaultLimit; at most MaxLimit
	Cursor string
}

const (
	DefaultLimit = 50
	MaxLimit     = 1000
)

// User, Session and Execution are the domain's types (internal/kiln);
// the store keeps them.
type User = kiln.User

type APIKey struct {
	ID       string
	UserID   string
	Name     string
	Prefix   string // the first characters of the key, to tell keys apart
	Hash     string // HashKey(key)
	Created  time.Time
	LastUsed time.Time // zero: never
	Revoked  time.Time // zero: not revoked
	Expires  time.Time // zero: never
	Scope    string    // ScopeAll or ScopeMetrics
}

// Key scopes: what a key may do beyond its user's rights.
const (
	ScopeAll     = ""        // everything its user may do
	ScopeMetrics = "metrics" // only read the metrics (GET /metrics)
)

// Expired reports whether the key has expired at t.
func (k APIKey) Expired(t time.Time) bool { return !k.Expires.IsZero() && !t.Before(k.Expires) }

// HashKey is the form in which an API key is stored and looked up: the hex
// SHA-256 of the key.
func HashKey(key string) string {
	h := sha256.Sum256([]byte(key))
	return hex.EncodeToString(h[:])
}

// HashCode is the hash of a cell's code kept in executions and the audit log.
func HashCode(code string) string { return HashKey(code) }

type SessionStatus = kiln.SessionStatus

const (
	SessionActive = kiln.SessionActive
	SessionEnded  = kiln.SessionEnded
)

type Session = kiln.Session

// SessionFilter narrows ListSessions; zero fields match everything.
type SessionFilter struct {
	Status   SessionStatus
	Metadata map[string]string // every pair must match
}

// ExecRunning is the status of an execution until it finishes.
const ExecRunning = kiln.ExecRunning

type Execution = kiln.Execution

type Artifact struct {
	ID          string
	SessionID   string
	ExecutionID string
	UserID      string
	kiln.Artifact
	Created time.Time
}

type AuditEntry struct {
	ID          string
	Time        time.Time
	UserID      string
	Action      string // e.g. "execution", "file.write", "session.create", "egress"
	SessionID   string
	ExecutionID string
	CodeHash    string
	Outcome     string
	Detail      json.RawMessage // a JSON value; {} when empty
	// Actor is the user who acted, when a user did: in a shared session
	// UserID is the owner (charged) and Actor the collaborator or viewer.
	Actor string
}

// AuditFilter narrows ListAudit; zero fields match everything.
type AuditFilter struct {
	UserID    string
	SessionID string
	Actor     string // who acted (the owner's user_id is charged in a shared session)
}

// NewID returns a random 128-bit id in hex.
func NewID() string {
	return hex.EncodeToString(randomBytes(16))
}

func randomBytes(n int) []byte {
	b := make([]byte, n)
	rand.Read(b) // never fails (crypto/rand, Go 1.24+)
	return b
}
