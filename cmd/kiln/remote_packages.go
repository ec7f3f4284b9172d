package main

import (
	"context"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/kiln-dev/kiln/client"
	"github.com/kiln-dev/kiln/internal/service"
)

// sessionInstall is `kiln session install`: packages into a remote
// session, pip's or npm's output on stderr as it comes, what was
// installed on stdout.
func sessionInstall(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var (
		rf           remoteFlags
		manager      = "pip"
		requirements string
		asJSON       bool
	)
	fs := newFlagSet("kiln session install", "kiln session install [--manager pip|npm] [-r FILE] [--json] ID [PACKAGE...]", stderr, &rf)
	fs.Var(choiceFlag{&manager, []string{"pip", "npm"}}, "manager", "the package `manager`: pip (Python, the default) or npm (JavaScript and TypeScript)")
	fs.StringVar(&requirements, "r", "", "a requirements `file` in the session's workspace: requirements.txt for pip, package.json for npm")
	fs.BoolVar(&asJSON, "json", false, "print the result as JSON")
	pos, done, err := positional(fs, args, 1, -1)
	if done {
		return err
	}
	if len(pos) == 1 && requirements == "" {
		fs.Usage()
		return errUsage
	}
	rc, err := rf.connect(stderr)
	if err != nil {
		return err
	}
	req := client.PackageRequest{Manager: manager, Packages: pos[1:], Requirements: requirements}
	res, err := rc.InstallPackagesStream(ctx, pos[0], req, func(ev client.Event) {
		switch ev.Type {
		case client.EventStdout, client.EventStderr:
			io.WriteString(stderr, ev.Data)
		case client.EventQueued:
			fmt.Fprintf(stderr, "kiln: waiting (%s), position %d\n", ev.Reason, ev.Position)
		}
	})
	if err != nil {
		return rc.fail(err)
	}
	if asJSON {
		return printJSON(stdout, res)
	}
	printPackages(stdout, res.Packages)
	return nil
}

// printPackages is a table of packages: requested ones first marked, and
// those that were there already said so.
func printPackages(w io.Writer, pkgs []client.InstalledPackage) {
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "PACKAGE\tVERSION\t")
	for _, p := range pkgs {
		note := "dependency"
		switch {
		case p.Requested && p.Present:
			note = "already there"
		case p.Requested:
			note = "installed"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\n", p.Name, p.Version, note)
	}
	tw.Flush()
}

// languagePackages is `kiln languages --packages`: the Python and Node.js
// packages a session has before it installs any, read from this host.
func languagePackages(ctx context.Context, stdout io.Writer) error {
	py, node, err := service.DefaultPackages(ctx)
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(stdout, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "MANAGER\tPACKAGE\tVERSION")
	for _, l := range []struct {
		manager string
		list    []service.PackageVersion
	}{{"pip", py}, {"npm", node}} {
		for _, p := range l.list {
			fmt.Fprintf(tw, "%s\t%s\t%s\n", l.manager, p.Name, p.Version)
		}
	}
	tw.Flush()
	if len(node) == 0 {
		fmt.Fprintln(stdout, "(Node.js: only its built-in modules; install more with kiln session install --manager npm)")
	}
	return nil
}
