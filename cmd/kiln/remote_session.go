package main

import (
	"context"
	"fmt"
	"io"
	"math"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/kiln-dev/kiln/client"
	"github.com/kiln-dev/kiln/internal/kiln"
)

const sessionUsage = `Usage:
  kiln session create [flags]            start a session; prints its id
  kiln session ls [--all] [flags]        the active sessions of the key's user
  kiln session get ID                    one session
  kiln session rm ID...                  end sessions (their files are gone)
  kiln session interrupt ID              stop the session's running cell
  kiln session restart [--lang L] ID     restart kernels (state cleared, files kept)
  kiln session network [--allow HOST]... ID   set the network policy (none without --allow)
  kiln session install ID PACKAGE...     install pip (or --manager npm) packages into it

Run "kiln session COMMAND -h" for a command's flags, and how the server
and key are found.
`

// sessionCmd is `kiln session ...`.
func sessionCmd(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	return subcommand(ctx, sessionUsage, args, stdout, stderr, map[string]func(context.Context, []string) error{
		"create": func(ctx context.Context, args []string) error { return sessionCreate(ctx, args, stdout, stderr) },
		"ls":     func(ctx context.Context, args []string) error { return sessionList(ctx, args, stdout, stderr) },
		"get":    func(ctx context.Context, args []string) error { return sessionGet(ctx, args, stdout, stderr) },
		"rm":     func(ctx context.Context, args []string) error { return sessionRemove(ctx, args, stderr) },
		"interrupt": func(ctx context.Context, args []string) error {
			return sessionSimple(ctx, "interrupt", args, stderr, (*client.Client).Interrupt)
		},
		"restart": func(ctx context.Context, args []string) error { return sessionRestart(ctx, args, stderr) },
		"network": func(ctx context.Context, args []string) error { return sessionNetwork(ctx, args, stdout, stderr) },
		"install": func(ctx context.Context, args []string) error { return sessionInstall(ctx, args, stdout, stderr) },
	})
}

func sessionCreate(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var (
		rf     remoteFlags
		langs  listFlag
		lf     limitFlags
		ttl    time.Duration
		meta   = metaFlag{}
		asJSON bool
		netw   string
		allow  listFlag
		env    string
	)
	fs := newFlagSet("kiln session create", "kiln session create [--lang L]... [--memory 512M] [--timeout 30s] [--ttl 1h] [--network none|allowlist] [--allow HOST]... [--env NAME] [--meta KEY=VALUE]... [--json]", stderr, &rf)
	fs.StringVar(&env, "env", "", "a built environment of the server's (kiln env ls) whose packages the session has from the start")
	fs.Var(choiceFlag{&netw, []string{"none", "allowlist"}}, "network", "the network `policy`: none (the default) or allowlist (only the --allow hosts, within the server's ceiling)")
	fs.Var(&allow, "allow", "a host the session may reach: example.com, *.example.com, api.example.com:8443 (repeatable; implies --network allowlist)")
	fs.Var(&langs, "lang", "a language the session will use (repeatable; the first is the default; default python)")
	lf.add(fs)
	fs.Var(durationFlag{&ttl}, "ttl", "end the session after this long without use, e.g. 30m (default: the server's, one hour)")
	fs.Var(meta, "meta", "metadata KEY=VALUE, e.g. a conversation id (repeatable)")
	fs.BoolVar(&asJSON, "json", false, "print the whole session as JSON")
	if _, done, err := positional(fs, args, 0, 0); done {
		return err
	}
	lim, err := lf.limits()
	if err != nil {
		return err
	}
	if ttl < 0 {
		return kiln.Errorf(kiln.Invalid, "--ttl %s is negative; give a duration such as 30m", ttl)
	}
	req := client.SessionRequest{Languages: langs, Limits: lim, IdleTTLSeconds: int64(math.Ceil(ttl.Seconds())), Environment: env}
	if netw != "" || len(allow) > 0 {
		if req.Network, err = networkPolicy(netw, allow); err != nil {
			return err
		}
	}
	if len(meta) > 0 {
		req.Metadata = meta
	}
	rc, err := rf.connect(stderr)
	if err != nil {
		return err
	}
	s, err := rc.CreateSession(ctx, req)
	if err != nil {
		return rc.fail(err)
	}
	if asJSON {
		return printJSON(stdout, s)
	}
	fmt.Fprintln(stdout, s.ID)
	return nil
}

func sessionList(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var (
		rf     remoteFlags
		status string
		all    bool
		meta   = metaFlag{}
		asJSON bool
	)
	fs := newFlagSet("kiln session ls", "kiln session ls [--all | --status active|ended] [--meta KEY=VALUE]... [--json]", stderr, &rf)
	fs.Var(choiceFlag{&status, []string{"active", "ended"}}, "status", "only sessions with this `status`: active or ended (default: active)")
	fs.BoolVar(&all, "all", false, "list ended sessions too")
	fs.Var(meta, "meta", "only sessions with this metadata KEY=VALUE (repeatable; all must match)")
	fs.BoolVar(&asJSON, "json", false, "print the sessions as a JSON array")
	if _, done, err := positional(fs, args, 0, 0); done {
		return err
	}
	switch {
	case all && status != "":
		fmt.Fprint(stderr, "kiln session ls: --all and --status cannot go together; --all lists every status\n\n")
		fs.Usage()
		return errUsage
	case !all && status == "":
		status = "active"
	}
	rc, err := rf.connect(stderr)
	if err != nil {
		return err
	}
	list := []client.Session{}
	for s, err := range rc.AllSessions(ctx, client.ListOptions{Status: status, Metadata: meta}) {
		if err != nil {
			return rc.fail(err)
		}
		list = append(list, s)
	}
	if asJSON {
		return printJSON(stdout, list)
	}
	t := newTable(stdout, "ID", "STATUS", "LANGUAGES", "CREATED", "LAST ACTIVE", "METADATA")
	for _, s := range list {
		t.row(s.ID, s.Status, strings.Join(s.Languages, ","), stamp(s.Created), stamp(s.LastActive), pairs(s.Metadata))
	}
	t.flush()
	return nil
}

func sessionGet(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var (
		rf     remoteFlags
		asJSON bool
	)
	fs := newFlagSet("kiln session get", "kiln session get [--json] ID", stderr, &rf)
	fs.BoolVar(&asJSON, "json", false, "print the session as JSON")
	pos, done, err := positional(fs, args, 1, 1)
	if done {
		return err
	}
	rc, err := rf.connect(stderr)
	if err != nil {
		return err
	}
	s, err := rc.Session(ctx, pos[0])
	if err != nil {
		return rc.fail(err)
	}
	if asJSON {
		return printJSON(stdout, s)
	}
	printSession(stdout, s)
	return nil
}

// printSession writes a session as "name: value" lines.
func printSession(w io.Writer, s *client.Session) {
	tw := tabwriter.NewWriter(w, 0, 8, 1, ' ', 0)
	line := func(name, value string) { fmt.Fprintf(tw, "%s:\t%s\n", name, clean(value)) }
	line("id", s.ID)
	status := s.Status
	if s.EndReason != "" {
		status += " (" + s.EndReason + ")"
	}
	line("status", status)
	line("languages", strings.Join(s.Languages, ", "))
	line("created", stamp(s.Created))
	line("last active", stamp(s.LastActive))
	if s.Ended != nil {
		line("ended", stampPtr(s.Ended))
	}
	line("idle ttl", (time.Duration(s.IdleTTLSeconds) * time.Second).String())
	line("network", describeNetwork(s.Network))
	line("limits", describeLimits(s.Limits))
	line("metadata", pairs(s.Metadata))
	tw.Flush()
}

// describeLimits lists the limits that are set.
func describeLimits(l client.Limits) string {
	var parts []string
	add := func(name string, v int64, format func(int64) string) {
		if v != 0 {
			parts = append(parts, name+" "+format(v))
		}
	}
	add("timeout", l.TimeoutMS, func(v int64) string { return (time.Duration(v) * time.Millisecond).String() })
	add("memory", l.MemoryBytes, kiln.FormatBytes)
	add("cpus", l.CPUMillis, func(v int64) string { return fmt.Sprint(float64(v) / 1000) })
	add("pids", l.Pids, func(v int64) string { return fmt.Sprint(v) })
	add("output", l.OutputBytes, kiln.FormatBytes)
	add("file size", l.FileSizeBytes, kiln.FormatBytes)
	add("open files", l.OpenFiles, func(v int64) string { return fmt.Sprint(v) })
	add("tmp", l.TmpBytes, kiln.FormatBytes)
	add("workspace", l.WorkspaceBytes, kiln.FormatBytes)
	add("inodes", l.Inodes, func(v int64) string { return fmt.Sprint(v) })
	if len(parts) == 0 {
		return "the server's defaults"
	}
	return strings.Join(parts, ", ")
}

func sessionRemove(ctx context.Context, args []string, stderr io.Writer) error {
	var rf remoteFlags
	fs := newFlagSet("kiln session rm", "kiln session rm ID...", stderr, &rf)
	ids, done, err := positional(fs, args, 1, -1)
	if done {
		return err
	}
	rc, err := rf.connect(stderr)
	if err != nil {
		return err
	}
	for _, id := range ids {
		if err := rc.DeleteSession(ctx, id); err != nil {
			return rc.fail(err)
		}
	}
	return nil
}

// sessionSimple is a command that takes one session id and prints
// nothing on success.
func sessionSimple(ctx context.Context, name string, args []string, stderr io.Writer, call func(*client.Client, context.Context, string) error) error {
	var rf remoteFlags
	fs := newFlagSet("kiln session "+name, "kiln session "+name+" ID", stderr, &rf)
	pos, done, err := positional(fs, args, 1, 1)
	if done {
		return err
	}
	rc, err := rf.connect(stderr)
	if err != nil {
		return err
	}
	return rc.fail(call(rc.Client, ctx, pos[0]))
}

func sessionRestart(ctx context.Context, args []string, stderr io.Writer) error {
	var (
		rf       remoteFlags
		language string
	)
	fs := newFlagSet("kiln session restart", "kiln session restart [--lang L] ID", stderr, &rf)
	fs.StringVar(&language, "lang", "", "restart only this language's kernel (default: every kernel)")
	pos, done, err := positional(fs, args, 1, 1)
	if done {
		return err
	}
	rc, err := rf.connect(stderr)
	if err != nil {
		return err
	}
	return rc.fail(rc.Restart(ctx, pos[0], language))
}

// sessionNetwork is kiln session network: PUT /v1/sessions/{id}/network.
func sessionNetwork(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var (
		rf    remoteFlags
		netw  string
		allow listFlag
	)
	fs := newFlagSet("kiln session network", "kiln session network [--network none|allowlist] [--allow HOST]... ID", stderr, &rf)
	fs.Var(choiceFlag{&netw, []string{"none", "allowlist"}}, "network", "the network `policy`: none (the default without --allow) or allowlist")
	fs.Var(&allow, "allow", "a host the session may reach: example.com, *.example.com, api.example.com:8443 (repeatable; implies --network allowlist)")
	pos, done, err := positional(fs, args, 1, 1)
	if done {
		return err
	}
	p, err := networkPolicy(netw, allow)
	if err != nil {
		return err
	}
	rc, err := rf.connect(stderr)
	if err != nil {
		return err
	}
	s, err := rc.SetNetwork(ctx, pos[0], *p)
	if err != nil {
		return rc.fail(err)
	}
	fmt.Fprintln(stdout, describeNetwork(s.Network))
	return nil
}

// networkPolicy is the policy of --network and --allow: an allowlist
// when hosts are given, else the mode named (none by default).
func networkPolicy(mode string, allow []string) (*client.NetworkPolicy, error) {
	if mode == "none" && len(allow) > 0 {
		return nil, kiln.Errorf(kiln.Invalid, "--allow goes with --network allowlist, not --network none")
	}
	if len(allow) > 0 || mode == "allowlist" {
		return &client.NetworkPolicy{Mode: "allowlist", Allow: allow}, nil
	}
	return &client.NetworkPolicy{Mode: "none"}, nil
}

// describeNetwork is a session's network policy in one line.
func describeNetwork(p client.NetworkPolicy) string {
	if p.Mode != "allowlist" {
		return first(p.Mode, "none")
	}
	if len(p.Allow) == 0 {
		return "allowlist (package mirrors only)"
	}
	return "allowlist: " + strings.Join(p.Allow, ", ")
}
