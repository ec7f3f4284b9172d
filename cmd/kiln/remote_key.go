package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/kiln-dev/kiln/client"
	"github.com/kiln-dev/kiln/internal/kiln"
)

const keyUsage = `Usage:
  kiln key create [--user ID] [--name N] [--expires D] [--scope metrics]
                                             make an API key; prints its secret once
  kiln key ls [--user ID]                    a user's keys (no secrets)
  kiln key revoke [--user ID] KEYID          revoke a key
  kiln user create [--admin] NAME            make a user (admins only); prints its id
  kiln user ls                               every user (admins only)
  kiln user get [ID]                         a user (default: the key's own)

--user defaults to "me", the key's own user. Run "kiln key COMMAND -h"
for a command's flags, and how the server and key are found.
`

// keyCmd is `kiln key ...` and `kiln user ...` (name says which).
func keyCmd(ctx context.Context, name string, args []string, stdout, stderr io.Writer) error {
	cmds := map[string]func(context.Context, []string) error{
		"create": func(ctx context.Context, args []string) error { return keyCreate(ctx, args, stdout, stderr) },
		"ls":     func(ctx context.Context, args []string) error { return keyList(ctx, args, stdout, stderr) },
		"revoke": func(ctx context.Context, args []string) error { return keyRevoke(ctx, args, stderr) },
	}
	if name == "user" {
		cmds = map[string]func(context.Context, []string) error{
			"create": func(ctx context.Context, args []string) error { return userCreate(ctx, args, stdout, stderr) },
			"ls":     func(ctx context.Context, args []string) error { return userList(ctx, args, stdout, stderr) },
			"get":    func(ctx context.Context, args []string) error { return userGet(ctx, args, stdout, stderr) },
		}
	}
	return subcommand(ctx, keyUsage, args, stdout, stderr, cmds)
}

func keyCreate(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var (
		rf         remoteFlags
		user, name string
		scope      string
		expires    time.Duration
		asJSON     bool
	)
	fs := newFlagSet("kiln key create", "kiln key create [--user ID] [--name N] [--expires D] [--scope metrics] [--json]", stderr, &rf)
	fs.StringVar(&user, "user", "me", "the user who will own the key")
	fs.StringVar(&name, "name", "", "a name to recognize the key by, e.g. ci")
	fs.DurationVar(&expires, "expires", 0, "the key stops working after this long, e.g. 24h or 90m (default: never)")
	fs.StringVar(&scope, "scope", "", `"metrics": the key may only read /metrics, for Prometheus (an admin's key); default: everything its user may do`)
	fs.BoolVar(&asJSON, "json", false, "print the key, with its secret, as JSON")
	if _, done, err := positional(fs, args, 0, 0); done {
		return err
	}
	if expires < 0 || (expires > 0 && expires < time.Second) {
		return kiln.Errorf(kiln.Invalid, "--expires %v must be a second or more, e.g. 24h", expires)
	}
	rc, err := rf.connect(stderr)
	if err != nil {
		return err
	}
	k, err := rc.CreateKeyWith(ctx, user, client.KeyRequest{Name: name, ExpiresInSeconds: int64(expires / time.Second), Scope: scope})
	if err != nil {
		return rc.fail(err)
	}
	if asJSON {
		if err := printJSON(stdout, k); err != nil {
			return err
		}
	} else {
		// The secret alone on stdout, so that KEY=$(kiln key create) works.
		fmt.Fprintln(stdout, k.Secret)
	}
	fmt.Fprintf(stderr, "kiln: key %s created for user %s; the secret will not be shown again, so store it now\n", clean(k.ID), clean(k.UserID))
	return nil
}

func keyList(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var (
		rf     remoteFlags
		user   string
		asJSON bool
	)
	fs := newFlagSet("kiln key ls", "kiln key ls [--user ID] [--json]", stderr, &rf)
	fs.StringVar(&user, "user", "me", "whose keys")
	fs.BoolVar(&asJSON, "json", false, "print the keys as JSON")
	if _, done, err := positional(fs, args, 0, 0); done {
		return err
	}
	rc, err := rf.connect(stderr)
	if err != nil {
		return err
	}
	keys, err := rc.Keys(ctx, user)
	if err != nil {
		return rc.fail(err)
	}
	if asJSON {
		return printJSON(stdout, nonNil(keys))
	}
	t := newTable(stdout, "ID", "NAME", "PREFIX", "SCOPE", "CREATED", "LAST USED", "EXPIRES", "REVOKED")
	for _, k := range keys {
		t.row(k.ID, first(k.Name, "-"), k.Prefix, first(k.Scope, "all"), stamp(k.Created), stampPtr(k.LastUsed), stampPtr(k.Expires), stampPtr(k.Revoked))
	}
	t.flush()
	return nil
}

func keyRevoke(ctx context.Context, args []string, stderr io.Writer) error {
	var (
		rf   remoteFlags
		user string
	)
	fs := newFlagSet("kiln key revoke", "kiln key revoke [--user ID] KEYID", stderr, &rf)
	fs.StringVar(&user, "user", "me", "whose key")
	pos, done, err := positional(fs, args, 1, 1)
	if done {
		return err
	}
	rc, err := rf.connect(stderr)
	if err != nil {
		return err
	}
	return rc.fail(rc.RevokeKey(ctx, user, pos[0]))
}

func userCreate(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var (
		rf            remoteFlags
		admin, asJSON bool
	)
	fs := newFlagSet("kiln user create", "kiln user create [--admin] [--json] NAME", stderr, &rf)
	fs.BoolVar(&admin, "admin", false, "the user may manage users and read the audit log")
	fs.BoolVar(&asJSON, "json", false, "print the user as JSON")
	pos, done, err := positional(fs, args, 1, 1)
	if done {
		return err
	}
	rc, err := rf.connect(stderr)
	if err != nil {
		return err
	}
	u, err := rc.CreateUser(ctx, client.UserRequest{Name: pos[0], Admin: admin})
	if err != nil {
		return rc.fail(err)
	}
	if asJSON {
		return printJSON(stdout, u)
	}
	fmt.Fprintln(stdout, u.ID)
	return nil
}

func userList(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var (
		rf     remoteFlags
		asJSON bool
	)
	fs := newFlagSet("kiln user ls", "kiln user ls [--json]", stderr, &rf)
	fs.BoolVar(&asJSON, "json", false, "print the users as JSON")
	if _, done, err := positional(fs, args, 0, 0); done {
		return err
	}
	rc, err := rf.connect(stderr)
	if err != nil {
		return err
	}
	users, err := rc.Users(ctx)
	if err != nil {
		return rc.fail(err)
	}
	if asJSON {
		return printJSON(stdout, nonNil(users))
	}
	printUsers(stdout, users...)
	return nil
}

func userGet(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var (
		rf     remoteFlags
		asJSON bool
	)
	fs := newFlagSet("kiln user get", "kiln user get [--json] [ID]", stderr, &rf)
	fs.BoolVar(&asJSON, "json", false, "print the user as JSON")
	pos, done, err := positional(fs, args, 0, 1)
	if done {
		return err
	}
	id := "me"
	if len(pos) == 1 {
		id = pos[0]
	}
	rc, err := rf.connect(stderr)
	if err != nil {
		return err
	}
	u, err := rc.User(ctx, id)
	if err != nil {
		return rc.fail(err)
	}
	if asJSON {
		return printJSON(stdout, u)
	}
	printUsers(stdout, *u)
	return nil
}

func printUsers(w io.Writer, users ...client.User) {
	t := newTable(w, "ID", "NAME", "ADMIN", "CREATED")
	for _, u := range users {
		admin := "no"
		if u.Admin {
			admin = "yes"
		}
		t.row(u.ID, u.Name, admin, stamp(u.Created))
	}
	t.flush()
}

// nonNil makes an empty list print as [] rather than null.
func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}
