package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/kiln-dev/kiln/internal/kiln"
	"github.com/kiln-dev/kiln/internal/service"
)

const adminUsage = `Usage: kiln admin key [--data DIR | --db DSN] [--user NAME] [--name N]

Makes a new API key for an admin, straight in kiln's database on this
host, and prints it once: for a root who has lost the admin key. No key
is needed and the database is kept; kiln serve may be running. Give the
--data (or --db) that kiln serve uses. Without --user the key is for the
oldest admin (one named "admin" is made if there is none).

Flags:
`

// adminCmd is `kiln admin ...`, run on the server's host.
func adminCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] != "key" {
		if len(args) > 0 && (args[0] == "-h" || args[0] == "--help" || args[0] == "help") {
			fmt.Fprint(stdout, adminUsage)
			return nil
		}
		fmt.Fprint(stderr, adminUsage)
		return errUsage
	}
	return adminKey(ctx, args[1:], stdout, stderr)
}

func adminKey(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	f := &serveFlags{}
	var user, name string
	fs := flag.NewFlagSet("admin key", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, adminUsage); fs.PrintDefaults() }
	fs.StringVar(&f.data, "data", "/var/lib/kiln", "kiln serve's data directory (its SQLite database)")
	fs.StringVar(&f.db, "db", "", "kiln serve's PostgreSQL DSN, when it uses one")
	fs.StringVar(&user, "user", "", "the admin's name (default: the oldest admin)")
	fs.StringVar(&name, "name", "host", "a name to recognise the key by")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return errUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "kiln admin key: unexpected argument %q\n", fs.Arg(0))
		return errUsage
	}
	if f.db == "" {
		// Never make a new, empty database by mistake: the key would be
		// for a database kiln serve does not read.
		db := filepath.Join(f.data, "kiln.db")
		if _, err := os.Stat(db); err != nil {
			return kiln.Errorf(kiln.Invalid, "no kiln database at %s (%s); pass the --data directory that kiln serve uses, or --db", db, reason(err))
		}
	}
	st, err := openStore(ctx, f)
	if err != nil {
		return err
	}
	defer st.Close()
	u, k, err := service.HostAdminKey(ctx, st, user, name)
	if err != nil {
		return err
	}
	// The secret alone on stdout, so that KEY=$(kiln admin key) works.
	fmt.Fprintln(stdout, k.Secret())
	fmt.Fprintf(stderr, "kiln: key %s made for admin %s (user %s); it is shown this once, so store it now\n", clean(k.ID), clean(u.Name), clean(u.ID))
	return nil
}
