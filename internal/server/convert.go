package server

import (
	"cmp"
	"time"

	"github.com/kiln-dev/kiln/client"
	"github.com/kiln-dev/kiln/internal/kiln"
	"github.com/kiln-dev/kiln/internal/store"
)

func toLimits(l client.Limits) kiln.Limits {
	return kiln.Limits{Timeout: millis(l.TimeoutMS), MemoryBytes: l.MemoryBytes, Pids: l.Pids,
		CPUMillis: l.CPUMillis, OutputBytes: l.OutputBytes, FileSizeBytes: l.FileSizeBytes, OpenFiles: l.OpenFiles,
		TmpBytes: l.TmpBytes, WorkspaceBytes: l.WorkspaceBytes, Inodes: l.Inodes}
}

func fromLimits(l kiln.Limits) client.Limits {
	return client.Limits{TimeoutMS: l.Timeout.Milliseconds(), MemoryBytes: l.MemoryBytes, Pids: l.Pids,
		CPUMillis: l.CPUMillis, OutputBytes: l.OutputBytes, FileSizeBytes: l.FileSizeBytes, OpenFiles: l.OpenFiles,
		TmpBytes: l.TmpBytes, WorkspaceBytes: l.WorkspaceBytes, Inodes: l.Inodes}
}

func optTime(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

func fromSession(s kiln.Session) client.Session {
	md := s.Metadata
	if md == nil {
		md = map[string]string{}
	}
	return client.Session{ID: s.ID, Status: string(s.Status), Languages: s.Languages, Limits: fromLimits(s.Limits.WithDefaults()),
		IdleTTLSeconds: int64(s.IdleTTL / time.Second), Network: s.Network.Normal(), Metadata: md, Created: s.Created,
		LastActive: s.LastActive, Ended: optTime(s.Ended), EndReason: s.EndReason, OwnerID: s.UserID, Role: string(cmp.Or(s.Role, kiln.RoleOwner)),
		Environment: s.Environment, Name: md["name"], Resources: s.Resources}
}

func fromExecution(e kiln.Execution) client.Execution {
	return client.Execution{ID: e.ID, SessionID: e.SessionID, Seq: e.Seq, Language: e.Language, Code: e.Code,
		Status: e.Status, Result: e.Result, Started: e.Started, Ended: optTime(e.Ended), Actor: e.Actor}
}

func fromUser(u kiln.User) client.User {
	return client.User{ID: u.ID, Name: u.Name, Admin: u.Admin, Created: u.Created}
}

func fromKey(k store.APIKey) client.Key {
	return client.Key{ID: k.ID, UserID: k.UserID, Name: k.Name, Prefix: k.Prefix, Created: k.Created,
		LastUsed: optTime(k.LastUsed), Revoked: optTime(k.Revoked), Expires: optTime(k.Expires), Scope: k.Scope}
}

func fromFileInfo(fi kiln.FileInfo) client.FileInfo {
	return client.FileInfo{Path: fi.Path, Name: fi.Name, Type: fi.Type, Size: fi.Size, Mode: fi.Mode, ModTime: fi.ModTime}
}
