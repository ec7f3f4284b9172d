package main

// The remote commands (session, exec, files, history, key, user) talk to a
// kiln server through the client package. This file holds what they
// share: where the server and key come from, turning the client's errors
// into kiln errors, and argument parsing.

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"github.com/kiln-dev/kiln/client"
	"github.com/kiln-dev/kiln/internal/kiln"
)

// defaultServer is the service's default listen address.
const defaultServer = "http://127.0.0.1:8420"

const remoteHelp = `The server and key come from --server URL and --key KEY, else from
$KILN_SERVER and $KILN_KEY, else from the "server" and "key" of
$XDG_CONFIG_HOME/kiln/client.json (~/.config/kiln/client.json when
XDG_CONFIG_HOME is unset); the server defaults to ` + defaultServer + `.
The file's key is sent only to the file's server (or to any server when
the file names none).
`

// remoteFlags are the flags every remote command takes.
type remoteFlags struct{ server, key string }

func (rf *remoteFlags) add(fs *flag.FlagSet) {
	fs.StringVar(&rf.server, "server", "", "kiln server URL (see below)")
	fs.StringVar(&rf.key, "key", "", "API key (see below)")
}

// clientConfig is the config file.
type clientConfig struct {
	Server string `json:"server"`
	Key    string `json:"key"`
}

// remoteConfig resolves the server and key, each on its own: a flag,
// else the environment, else the config file; the server last falls back
// to defaultServer. A key from the file goes only with the file's server,
// so that --server pointing elsewhere never carries it away.
func remoteConfig(flagServer, flagKey string, getenv func(string) string, stderr io.Writer) (server, key string, err error) {
	server, key = first(flagServer, getenv("KILN_SERVER")), first(flagKey, getenv("KILN_KEY"))
	if server != "" && key != "" {
		return server, key, nil
	}
	cfg, err := readClientConfig(getenv, stderr)
	if err != nil {
		return "", "", err
	}
	if server == "" {
		server = first(cfg.Server, defaultServer)
	}
	if key == "" && (cfg.Server == "" || sameServer(cfg.Server, server)) {
		key = cfg.Key
	}
	return server, key, nil
}

func first(vs ...string) string {
	for _, v := range vs {
		if v != "" {
			return v
		}
	}
	return ""
}

func sameServer(a, b string) bool {
	return strings.TrimRight(a, "/") == strings.TrimRight(b, "/")
}

// configPath is $XDG_CONFIG_HOME/kiln/client.json, or under ~/.config.
func configPath(getenv func(string) string) string {
	dir := getenv("XDG_CONFIG_HOME")
	if !filepath.IsAbs(dir) { // the XDG spec ignores relative values
		home := getenv("HOME")
		if home == "" {
			return ""
		}
		dir = filepath.Join(home, ".config")
	}
	return filepath.Join(dir, "kiln", "client.json")
}

// readClientConfig reads the config file; a missing file is an empty one.
func readClientConfig(getenv func(string) string, stderr io.Writer) (clientConfig, error) {
	var cfg clientConfig
	name := configPath(getenv)
	if name == "" {
		return cfg, nil
	}
	b, err := os.ReadFile(name)
	if errors.Is(err, os.ErrNotExist) {
		return cfg, nil
	}
	if err != nil {
		return cfg, kiln.Errorf(kiln.Invalid, "cannot read %s: %s", name, reason(err))
	}
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.DisallowUnknownFields() // a misspelt field would be silently ignored
	if err := dec.Decode(&cfg); err != nil {
		return cfg, kiln.Errorf(kiln.Invalid, `%s is not {"server": "...", "key": "..."}: %s`, name, err)
	}
	if fi, err := os.Stat(name); err == nil && cfg.Key != "" && fi.Mode().Perm()&0o077 != 0 {
		fmt.Fprintf(stderr, "kiln: warning: %s holds an API key and other users can read it; chmod 600 it\n", name)
	}
	return cfg, nil
}

// remote is a connected client and what its errors need to say.
type remote struct {
	*client.Client
	server string
	hasKey bool
}

// connect makes the client the flags, environment and config file say.
func (rf *remoteFlags) connect(stderr io.Writer) (*remote, error) {
	server, key, err := remoteConfig(rf.server, rf.key, os.Getenv, stderr)
	if err != nil {
		return nil, err
	}
	c, err := client.New(server, key, client.WithUserAgent("kiln/"+version))
	if err != nil {
		return nil, kiln.Errorf(kiln.Invalid, "%s", strings.TrimPrefix(err.Error(), "kiln client: "))
	}
	return &remote{Client: c, server: server, hasKey: key != ""}, nil
}

// fail turns an error of the client into one exitCode prints: the
// server's Problem as its detail, an unreachable server by its address.
// A remote failure is never this host's internal error, so it does not
// get the kinds whose detail exitCode prints too.
func (r *remote) fail(err error) error {
	var p *client.Problem
	var ke *kiln.Error
	var ue *url.Error
	switch {
	case err == nil:
		return nil
	case errors.As(err, &ke):
		return err
	case errors.As(err, &p):
		return kiln.Wrap(problemKind(p), p, "%s", r.problemMessage(p))
	case errors.Is(err, context.Canceled):
		return exitError{130}
	case errors.As(err, &ue):
		return kiln.Wrap(kiln.Unavailable, err, "cannot reach the kiln server at %s: %s", r.server, ue.Err)
	}
	return kiln.Wrap(kiln.Unavailable, err, "%s", strings.TrimPrefix(err.Error(), "kiln client: "))
}

func (r *remote) problemMessage(p *client.Problem) string {
	msg := first(p.Detail, p.Title, fmt.Sprintf("the server answered %d", p.Status))
	if p.Status == 401 && !r.hasKey {
		// The server's words are about HTTP headers; at a shell, say
		// where the CLI looks for a key.
		where := first(configPath(os.Getenv), "~/.config/kiln/client.json")
		msg = fmt.Sprintf("no API key was given. Set KILN_KEY=KEY, pass --key KEY, or save {\"server\": %q, \"key\": \"KEY\"} in %s (chmod 600). "+
			"An admin makes keys with \"kiln key create\"; on the server's host, root can with \"kiln admin key\"", r.server, where)
	}
	if p.RetryAfterSeconds > 0 {
		msg += fmt.Sprintf(" (retry in %d s)", p.RetryAfterSeconds)
	}
	if p.RequestID != "" && p.Status >= 500 {
		msg += " (request " + p.RequestID + ")"
	}
	return msg
}

// problemKind is the kiln kind a Problem's code names; the server's own
// internal failures become Unavailable here (see fail).
func problemKind(p *client.Problem) kiln.Kind {
	switch k := kiln.Kind(p.Code); k {
	case kiln.Invalid, kiln.NotFound, kiln.Unsupported, kiln.TooLarge, kiln.Unavailable,
		kiln.Unauthenticated, kiln.Forbidden, kiln.Conflict, kiln.RateLimited, kiln.QuotaExceeded:
		return k
	}
	return kiln.Unavailable
}

// newFlagSet makes a subcommand's flag set whose usage shows synopsis,
// the flags and how the server is found.
func newFlagSet(name, synopsis string, stderr io.Writer, rf *remoteFlags) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	if rf != nil {
		rf.add(fs)
	}
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: %s\n\nFlags:\n", synopsis)
		fs.PrintDefaults()
		fmt.Fprint(stderr, "\n"+remoteHelp)
	}
	return fs
}

// parseArgs parses flags wherever they are among args, so that
// "kiln files rm S x -r" works; "--" ends the flags. It returns the
// other arguments, or flag.ErrHelp, or errUsage after flag printed why.
func parseArgs(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, err
			}
			return nil, errUsage
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return pos, nil
		}
		if n := len(args) - len(rest); n > 0 && args[n-1] == "--" {
			return append(pos, rest...), nil
		}
		pos, args = append(pos, rest[0]), rest[1:]
	}
}

// positional parses args and checks the count of the rest, printing the
// usage when it is wrong. done is true when the command should return
// err at once (help shown, or a usage error).
func positional(fs *flag.FlagSet, args []string, min, max int) (pos []string, done bool, err error) {
	pos, err = parseArgs(fs, args)
	if errors.Is(err, flag.ErrHelp) {
		return nil, true, nil
	}
	if err != nil {
		return nil, true, err
	}
	if len(pos) < min || (max >= 0 && len(pos) > max) {
		fs.Usage()
		return nil, true, errUsage
	}
	return pos, false, nil
}

// subcommand dispatches args[0] among cmds, printing usage for a missing
// or unknown one.
func subcommand(ctx context.Context, usage string, args []string, stdout, stderr io.Writer,
	cmds map[string]func(ctx context.Context, args []string) error) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return errUsage
	}
	switch args[0] {
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return nil
	}
	if f, ok := cmds[args[0]]; ok {
		return f(ctx, args[1:])
	}
	fmt.Fprintf(stderr, "kiln: unknown command %q\n\n%s", args[0], usage)
	return errUsage
}

// printJSON writes v indented, for --json.
func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false) // "<module>" reads better than "\u003cmodule\u003e"
	return enc.Encode(v)
}
