package service

import (
	"context"
	"errors"

	"github.com/kiln-dev/kiln/internal/kiln"
	"github.com/kiln-dev/kiln/internal/store"
)

// HostAdminKey makes a new API key for an admin, straight in the store,
// for a root on the host who has lost the admin key (kiln admin key): no
// key is needed, and kiln serve may be running or not. name picks the
// admin; empty picks the oldest admin, and makes one named "admin" when
// there is none. Only the key's hash is stored; the audit log records
// that the host made it.
func HostAdminKey(ctx context.Context, st Store, name, keyName string) (kiln.User, NewKey, error) {
	u, err := hostAdmin(ctx, st, name)
	if err != nil {
		return kiln.User{}, NewKey{}, err
	}
	secret := newKey()
	k := store.APIKey{UserID: u.ID, Name: keyName, Prefix: secret[:len(KeyPrefix)+6], Hash: store.HashKey(secret)}
	if err := st.CreateAPIKey(ctx, &k); err != nil {
		return kiln.User{}, NewKey{}, err
	}
	e := store.AuditEntry{Action: "key.create", Outcome: "ok",
		Detail: jsonDetail(map[string]any{"user": u.ID, "key": k.ID, "name": keyName, "by": "host"})}
	if err := st.AppendAudit(ctx, &e); err != nil {
		return kiln.User{}, NewKey{}, err
	}
	return u, NewKey{APIKey: k, secret: secret}, nil
}

func hostAdmin(ctx context.Context, st Store, name string) (kiln.User, error) {
	if name != "" {
		u, err := st.UserByName(ctx, name)
		if errors.Is(err, store.ErrNotFound) {
			return kiln.User{}, kiln.Errorf(kiln.NotFound, "no user named %q", name)
		}
		if err == nil && !u.Admin {
			return kiln.User{}, kiln.Errorf(kiln.Invalid, "user %q is not an admin; kiln admin key makes keys for admins only (an admin makes other users' keys with kiln key create --user)", name)
		}
		return u, err
	}
	for p := (store.Page{Limit: store.MaxLimit}); ; {
		users, next, err := st.ListUsers(ctx, p)
		if err != nil {
			return kiln.User{}, err
		}
		for _, u := range users {
			if u.Admin {
				return u, nil
			}
		}
		if next == "" {
			break
		}
		p.Cursor = next
	}
	u := kiln.User{Name: "admin", Admin: true}
	if err := st.CreateUser(ctx, &u); err != nil {
		if errors.Is(err, store.ErrConflict) {
			return kiln.User{}, kiln.Errorf(kiln.Conflict, "there is no admin, and a user named \"admin\" exists who is not one; name another admin with --user")
		}
		return kiln.User{}, err
	}
	if err := st.AppendAudit(ctx, &store.AuditEntry{Action: "user.create", Outcome: "ok",
		Detail: jsonDetail(map[string]any{"user": u.ID, "name": u.Name, "admin": true, "by": "host"})}); err != nil {
		return kiln.User{}, err
	}
	return u, nil
}
