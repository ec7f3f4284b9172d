package service

import (
	"context"
	"crypto/rand"
	"errors"
	"regexp"
	"sync"
	"time"

	"github.com/kiln-dev/kiln/internal/kiln"
	"github.com/kiln-dev/kiln/internal/store"
)

// KeyPrefix starts every API key, so that a leaked key is recognisable
// (secret scanners) and a mistyped header is easy to tell apart.
const KeyPrefix = "kiln_"

const maxKeyLen = 128

// newKey makes a random API key: 256 bits in base32.
func newKey() string {
	return KeyPrefix + rand.Text() + rand.Text()
}

var errUnauthenticated = &kiln.Error{Kind: kiln.Unauthenticated, Message: "a valid API key is required (Authorization: Bearer KEY)"}

// Authenticate returns the user of an API key. Every failure is the same
// error, so that a caller learns nothing about which keys exist.
func (s *Service) Authenticate(ctx context.Context, key string) (kiln.User, store.APIKey, error) {
	if key == "" || len(key) > maxKeyLen {
		return kiln.User{}, store.APIKey{}, errUnauthenticated
	}
	k, err := s.store.APIKeyByHash(ctx, store.HashKey(key))
	if errors.Is(err, store.ErrNotFound) {
		return kiln.User{}, store.APIKey{}, errUnauthenticated
	}
	if err != nil {
		return kiln.User{}, store.APIKey{}, err
	}
	if k.Expired(time.Now()) {
		return kiln.User{}, store.APIKey{}, kiln.Errorf(kiln.Unauthenticated,
			"this API key (%s...) expired at %s; ask for a new one", k.Prefix, k.Expires.UTC().Format(time.RFC3339))
	}
	u, err := s.users.get(ctx, s.store, k.UserID)
	if err != nil {
		return kiln.User{}, store.APIKey{}, err
	}
	// LastUsed is kept to the minute: a write per request would make the
	// store the bottleneck of every call.
	if now := time.Now(); now.Sub(k.LastUsed) > time.Minute {
		if err := s.store.TouchAPIKey(ctx, k.ID, now); err != nil {
			s.log.Warn("touch api key", "key", k.ID, "err", err)
		}
	}
	return u, k, nil
}

// userCache keeps users by id for Authenticate, which then reads only the
// key from the store: one read per request instead of two. A user never
// changes once made (the store has no update or delete of users), so a
// cached one is never stale. The key itself is read every time, so that a
// revocation takes effect at once, also when another process revoked it.
type userCache struct {
	mu sync.Mutex
	m  map[string]kiln.User
}

// maxCachedUsers bounds the cache; past it, it starts again empty.
const maxCachedUsers = 10000

func (c *userCache) get(ctx context.Context, st store.Users, id string) (kiln.User, error) {
	c.mu.Lock()
	u, ok := c.m[id]
	c.mu.Unlock()
	if ok {
		return u, nil
	}
	u, err := st.User(ctx, id)
	if err != nil {
		return u, err
	}
	c.mu.Lock()
	if c.m == nil || len(c.m) >= maxCachedUsers {
		c.m = map[string]kiln.User{}
	}
	c.m[id] = u
	c.mu.Unlock()
	return u, nil
}

// Bootstrap makes the first admin and its key when the store has no user
// yet, and returns the key (shown once; only its hash is kept). With
// users present it returns "".
func (s *Service) Bootstrap(ctx context.Context) (string, error) {
	users, _, err := s.store.ListUsers(ctx, store.Page{Limit: 1})
	if err != nil || len(users) > 0 {
		return "", err
	}
	u := kiln.User{Name: "admin", Admin: true}
	if err := s.store.CreateUser(ctx, &u); errors.Is(err, store.ErrConflict) {
		// Another replica starting at the same moment made the admin (and
		// shows its key): not an error for this one.
		return "", nil
	} else if err != nil {
		return "", err
	}
	k, err := s.createKey(ctx, u, u.ID, "bootstrap", KeyOptions{})
	if err != nil {
		return "", err
	}
	return k.secret, nil
}

var userName = regexp.MustCompile(`^[a-z0-9][a-z0-9_.-]{0,62}$`)

// CreateUser makes a user; only admins may.
func (s *Service) CreateUser(ctx context.Context, caller kiln.User, name string, admin bool) (kiln.User, error) {
	if !caller.Admin {
		return kiln.User{}, errAdminOnly
	}
	if !userName.MatchString(name) {
		return kiln.User{}, kiln.Errorf(kiln.Invalid, "user name %q must be 1 to 63 lowercase letters, digits, '_', '.' or '-', starting with a letter or digit", trunc(name, 80))
	}
	u := kiln.User{Name: name, Admin: admin}
	if err := s.store.CreateUser(ctx, &u); err != nil {
		if errors.Is(err, store.ErrConflict) {
			return kiln.User{}, kiln.Errorf(kiln.Conflict, "a user named %q exists", name)
		}
		return kiln.User{}, err
	}
	s.audit(ctx, store.AuditEntry{UserID: caller.ID, Action: "user.create", Outcome: "ok",
		Detail: jsonDetail(map[string]any{"user": u.ID, "name": name, "admin": admin})})
	return u, nil
}

var errAdminOnly = &kiln.Error{Kind: kiln.Forbidden, Message: "only an admin may do this"}

// Users lists all users; only admins may.
func (s *Service) Users(ctx context.Context, caller kiln.User, p store.Page) ([]kiln.User, string, error) {
	if !caller.Admin {
		return nil, "", errAdminOnly
	}
	return s.store.ListUsers(ctx, p)
}

// User returns a user: the caller itself ("me" or its own id), or any
// user for an admin. Another user is not found for a non-admin.
func (s *Service) User(ctx context.Context, caller kiln.User, id string) (kiln.User, error) {
	id, err := s.subject(caller, id)
	if err != nil {
		return kiln.User{}, err
	}
	return s.store.User(ctx, id)
}

// subject resolves "me" and checks the caller may act on the user.
func (s *Service) subject(caller kiln.User, id string) (string, error) {
	if id == "me" || id == caller.ID {
		return caller.ID, nil
	}
	if !caller.Admin {
		return "", store.ErrNotFound
	}
	return id, nil
}

// NewKey is a key just made, with its secret.
type NewKey struct {
	store.APIKey
	secret string
}

// Secret is the key itself, shown once.
func (k NewKey) Secret() string { return k.secret }

// KeyOptions are what a new key may carry beyond its name.
type KeyOptions struct {
	Expires time.Time // zero: never
	Scope   string    // store.ScopeAll or store.ScopeMetrics
}

// CreateKey makes an API key for a user (the caller itself, or anyone for
// an admin). A metrics-scoped key may only read the metrics, so it must
// belong to an admin, who may read them.
func (s *Service) CreateKey(ctx context.Context, caller kiln.User, userID, name string, opt KeyOptions) (NewKey, error) {
	id, err := s.subject(caller, userID)
	if err != nil {
		return NewKey{}, err
	}
	if len(name) > 128 {
		return NewKey{}, kiln.Errorf(kiln.Invalid, "a key name may be at most 128 bytes")
	}
	u, err := s.store.User(ctx, id)
	if err != nil {
		return NewKey{}, err
	}
	switch opt.Scope {
	case store.ScopeAll:
	case store.ScopeMetrics:
		if !u.Admin {
			return NewKey{}, kiln.Errorf(kiln.Invalid, "a key with scope %q must belong to an admin (only admins may read the metrics)", opt.Scope)
		}
	default:
		return NewKey{}, kiln.Errorf(kiln.Invalid, "key scope %q is not one of \"\" (everything the user may do) or %q", trunc(opt.Scope, 40), store.ScopeMetrics)
	}
	return s.createKey(ctx, caller, u.ID, name, opt)
}

func (s *Service) createKey(ctx context.Context, caller kiln.User, userID, name string, opt KeyOptions) (NewKey, error) {
	secret := newKey()
	k := store.APIKey{UserID: userID, Name: name, Prefix: secret[:len(KeyPrefix)+6], Hash: store.HashKey(secret), Expires: opt.Expires, Scope: opt.Scope}
	if err := s.store.CreateAPIKey(ctx, &k); err != nil {
		return NewKey{}, err
	}
	s.audit(ctx, store.AuditEntry{UserID: caller.ID, Action: "key.create", Outcome: "ok",
		Detail: jsonDetail(map[string]any{"user": userID, "key": k.ID, "name": name, "scope": opt.Scope})})
	return NewKey{APIKey: k, secret: secret}, nil
}

// Keys lists a user's keys.
func (s *Service) Keys(ctx context.Context, caller kiln.User, userID string) ([]store.APIKey, error) {
	id, err := s.subject(caller, userID)
	if err != nil {
		return nil, err
	}
	if _, err := s.store.User(ctx, id); err != nil {
		return nil, err
	}
	return s.store.ListAPIKeys(ctx, id)
}

// RevokeKey revokes one of a user's keys.
func (s *Service) RevokeKey(ctx context.Context, caller kiln.User, userID, keyID string) error {
	id, err := s.subject(caller, userID)
	if err != nil {
		return err
	}
	if err := s.store.RevokeAPIKey(ctx, id, keyID, time.Now()); err != nil {
		return err
	}
	s.audit(ctx, store.AuditEntry{UserID: caller.ID, Action: "key.revoke", Outcome: "ok",
		Detail: jsonDetail(map[string]any{"user": id, "key": keyID})})
	return nil
}

// Audit pages through the audit log; only admins may.
func (s *Service) Audit(ctx context.Context, caller kiln.User, f store.AuditFilter, p store.Page) ([]store.AuditEntry, string, error) {
	if !caller.Admin {
		return nil, "", errAdminOnly
	}
	return s.store.ListAudit(ctx, f, p)
}
