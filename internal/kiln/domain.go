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
	// Network is the session's network policy, stored with it: a session
	// resumed after a restart of kiln has it again.
	Network NetworkPolicy
	// Mounts are the host folders the session shows read-only, as its
	// creation resolved them, stored with it: a session resumed after a
	// restart of kiln has them again (checked against the allowed roots
	// again).
	Mounts []Mount
	// Environment is the prebuilt environment the session selected, or
	// "". Not stored either: a session resumed after a restart of kiln
	// has none.
	Environment string
	// Resources are the extended resources (GPUs) the session's sandbox
	// has, by name, stored with it (beside its limits): a session resumed
	// after a restart of kiln asks for them again.
	Resources map[string]int64
	// Role is the caller's role in the session when it was read for a
	// caller: RoleOwner, or the role of a share. Not stored with the
	// session; "" where no caller was asked about.
	Role Role
}

// Mount is a host folder (Source) shown read-only at Target in a
// session's sandbox.
type Mount struct {
	Source string `json:"source"`
	Target string `json:"target,omitempty"`
}

// Role is what a user may do in a session. The owner may do everything;
// a collaborator runs cells, writes files and interrupts; a viewer reads
// (history, outputs, files). The owner is charged for everything done in
// the session.
type Role string

const (
	RoleOwner        Role = "owner"
	RoleCollaborator Role = "collaborator"
	RoleViewer       Role = "viewer"
)

// Allows says whether r may do what need names: each role may do what
// the roles after it may (owner, collaborator, viewer).
func (r Role) Allows(need Role) bool {
	rank := map[Role]int{RoleViewer: 1, RoleCollaborator: 2, RoleOwner: 3}
	return rank[r] > 0 && rank[r] >= rank[need]
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
	// Actor is the user who ran the cell: the owner (UserID, who is
	// charged) or a collaborator of a shared session; "" in executions
	// from before sessions could be shared.
	Actor    string
	Language string
	Code     string
	CodeHash string
	Status   string
	Result   *CellResult // nil until finished
	Started  time.Time
	Ended    time.Time // zero until finished
}
