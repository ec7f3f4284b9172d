package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/kiln-dev/kiln/client"
	"github.com/kiln-dev/kiln/internal/service"
)

const envUsage = `Usage:
  kiln env ls [--json]        the server's environments: packages, versions, built or not
  kiln env build NAME         build one (admin key); an unchanged one is built once

An administrator defines environments in kiln serve's --config file:
  {"environments": [{"name": "data-science", "pip": ["pandas==2.2.2"], "npm": ["lodash@4.17.21"]}]}
A session selects a built one with kiln session create --env NAME (API:
"environment" in POST /v1/sessions).

Run "kiln env COMMAND -h" for a command's flags, and how the server and
key are found.
`

// envCmd is `kiln env ...`, against a kiln server.
func envCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return subcommand(ctx, envUsage, args, stdout, stderr, map[string]func(context.Context, []string) error{
		"ls":    func(ctx context.Context, args []string) error { return envList(ctx, args, stdout, stderr) },
		"build": func(ctx context.Context, args []string) error { return envBuild(ctx, args, stdout, stderr) },
	})
}

func envList(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var (
		rf     remoteFlags
		asJSON bool
	)
	fs := newFlagSet("kiln env ls", "kiln env ls [--json]", stderr, &rf)
	fs.BoolVar(&asJSON, "json", false, "print the environments as JSON")
	if _, done, err := positional(fs, args, 0, 0); done {
		return err
	}
	rc, err := rf.connect(stderr)
	if err != nil {
		return err
	}
	list, err := rc.Environments(ctx)
	if err != nil {
		return rc.fail(err)
	}
	if asJSON {
		return printJSON(stdout, list)
	}
	if len(list) == 0 {
		fmt.Fprintln(stderr, "kiln: the server defines no environments (kiln serve --config, \"environments\")")
		return nil
	}
	for i, e := range list {
		if i > 0 {
			fmt.Fprintln(stdout)
		}
		printEnvironment(stdout, e)
	}
	return nil
}

// printEnvironment is an environment's name and state, and its packages:
// as pinned when not built, with their versions (dependencies too) when
// built.
func printEnvironment(w io.Writer, e client.Environment) {
	state := "not built (kiln env build " + e.Name + ")"
	if e.Built {
		state = "built"
		if e.BuiltAt != nil {
			state += " " + e.BuiltAt.Format("2006-01-02 15:04 MST")
		}
	}
	fmt.Fprintf(w, "%s: %s\n", e.Name, state)
	if !e.Built {
		if len(e.Pip) > 0 {
			fmt.Fprintf(w, "  pip: %s\n", strings.Join(e.Pip, " "))
		}
		if len(e.NPM) > 0 {
			fmt.Fprintf(w, "  npm: %s\n", strings.Join(e.NPM, " "))
		}
		return
	}
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "  MANAGER\tPACKAGE\tVERSION\t")
	for _, m := range []struct {
		name string
		pkgs []client.InstalledPackage
	}{{"pip", e.Python}, {"npm", e.Node}} {
		for _, p := range m.pkgs {
			note := "dependency"
			if p.Requested {
				note = "pinned"
			}
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\n", m.name, p.Name, p.Version, note)
		}
	}
	tw.Flush()
}

func envBuild(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var (
		rf     remoteFlags
		asJSON bool
	)
	fs := newFlagSet("kiln env build", "kiln env build [--json] NAME", stderr, &rf)
	fs.BoolVar(&asJSON, "json", false, "print the result as JSON")
	pos, done, err := positional(fs, args, 1, 1)
	if done {
		return err
	}
	rc, err := rf.connect(stderr)
	if err != nil {
		return err
	}
	fmt.Fprintf(stderr, "kiln: building %s (pip and npm run on the server; this may take minutes)\n", pos[0])
	res, err := rc.BuildEnvironment(ctx, pos[0])
	if err != nil {
		return rc.fail(err)
	}
	if asJSON {
		return printJSON(stdout, res)
	}
	if !res.Built {
		fmt.Fprintf(stderr, "kiln: %s was built already, for this definition and these runtimes: nothing to do\n", pos[0])
	}
	printEnvironment(stdout, res.Environment)
	return nil
}

// environmentsValue is kiln serve's --environments: the administrator's
// environments as a JSON array, given as the flag's text or, in the
// --config file, as the array itself (SetJSON).
type environmentsValue struct{ p *[]service.EnvironmentDef }

func (v environmentsValue) String() string {
	if v.p == nil || len(*v.p) == 0 {
		return ""
	}
	b, _ := json.Marshal(*v.p)
	return string(b)
}

func (v environmentsValue) Set(s string) error { return v.SetJSON(json.RawMessage(s)) }

func (v environmentsValue) SetJSON(raw json.RawMessage) error {
	var defs []service.EnvironmentDef
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&defs); err != nil {
		return fmt.Errorf(`environments must be a JSON array like [{"name": "data-science", "pip": ["pandas==2.2.2"], "npm": ["lodash@4.17.21"]}]: %v`, err)
	}
	if err := service.CheckEnvironments(defs); err != nil {
		return err
	}
	*v.p = defs
	return nil
}
