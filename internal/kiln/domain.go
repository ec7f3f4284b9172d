package kiln

import "time"

// The domain: who runs code (User), where (Session) and what ran
// (Execution). The service speaks these; the store keeps them.

// User is a person or program that owns sessions.
type User struct {
	ID      string
	Name    string
	Admin   bool
	Created time.Time
}

// SessionStatus says whether a session can still run cells.
type SessionStatus string

const (
	SessionActive SessionStatus = "active"
	SessionEnded  SessionStatus = "ended"
)

// Session is a long-lived sandbox with a workspace, owned by a user.
type Session struct {
	ID         string
	UserID     string
	Languages  []string
	Limits     Limits
	Metadata   map[string]string
	Status     SessionStatus
	EndReason  string
	IdleTTL    time.Duration
	Created    time.Time
	LastActive time.Time
	Ended      time.Time // zero while active
	SandboxID  string
}

// ExecRunning is the status of an execution until it finishes; afterwards
// its status is the CellStatus of the result.
const ExecRunning = "running"

// Execution is one cell run in a session: an entry of its history.
type Execution struct {
	ID        string
	SessionID string
	UserID    string
	Seq       int64 // 1, 2, 3, ... within the session
	Language  string
	Code      string
	CodeHash  string
	Status    string
	Result    *CellResult // nil until finished
	Started   time.Time
	Ended     time.Time // zero until finished
}
