// Command kiln runs untrusted code in sandboxes.
//
// The same binary is also every stage inside a sandbox: the boot stage that
// builds the root, the agent that is PID 1, and the spawn stage that drops
// privileges before user code. Those hidden modes are chosen by argv[1].
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"syscall"

	"github.com/kiln-dev/kiln/internal/agent"
	_ "github.com/kiln-dev/kiln/internal/agent/stage" // a sandbox stage runs from its init, before most packages'
	"github.com/kiln-dev/kiln/internal/kiln"
)

func main() {
	agent.Dispatch() // returns only when this is not a sandbox stage
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	os.Exit(exitCode(err, os.Stderr))
}

// exitError carries a program's exit status out of run.
type exitError struct{ code int }

func (e exitError) Error() string { return fmt.Sprintf("exit status %d", e.code) }

// exitCode turns run's error into a process exit status, printing kiln's
// own errors. 125 is kiln's failure, as with docker run; anything else is
// the program's own status.
func exitCode(err error, stderr io.Writer) int {
	var ee exitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ee):
		return ee.code
	case errors.Is(err, errUsage):
		return exitUsage
	}
	fmt.Fprintf(stderr, "kiln: %s\n", kiln.Message(err))
	if kiln.KindOf(err) == kiln.Internal || kiln.KindOf(err) == kiln.SandboxError {
		fmt.Fprintf(stderr, "kiln: detail: %v\n", err)
	}
	return exitKiln
}

var errUsage = errors.New("usage")

const usage = `kiln runs untrusted code in strong, fast sandboxes.

Usage:
  kiln run [flags] FILE [ARGS...]        run a program file in a fresh sandbox
  kiln run [flags] --lang L -c CODE      run code given on the command line
  kiln run [flags] --lang L -            run code read from stdin
  kiln repl [flags] LANGUAGE             an interactive session (state kept between cells)
  kiln repl --server URL SESSION         the same on a session of a kiln server (remote)
  kiln languages [--packages]            every language, its runtime and version (or its default packages)
  kiln doctor                            what this host supports and lacks
  kiln bench [flags]                     measure sandbox overhead and throughput
  kiln serve [flags]                     the HTTP API, MCP and the web notebook at /
  kiln mcp [--server URL --key KEY]      kiln's tools for an MCP host, on stdio
  kiln batch [--server URL] FILE.jsonl   run and judge a batch of programs (results as JSON lines)
  kiln image build                       the Docker backend's environment image, made without a registry
  kiln admin key [flags]                 a new admin API key, made on the server's host
  kiln session create|ls|get|rm ...      sessions on a kiln server (remote)
  kiln env ls|build ...                  a kiln server's prebuilt environments
  kiln exec [flags] SESSION [CODE|-]     run a cell in a remote session
  kiln files put|get|ls|rm ...           files in a remote session's workspace
  kiln history SESSION                   a remote session's executions
  kiln key create|ls|revoke ...          API keys (and users, for admins)
  kiln version

Run "kiln run -h" for the flags of run.
`

func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return errUsage
	}
	switch args[0] {
	case "run":
		return runCmd(ctx, args[1:], stdin, stdout, stderr)
	case "repl":
		return replCmd(ctx, args[1:], stdin, stdout, stderr)
	case "languages":
		if len(args) == 2 && args[1] == "--packages" {
			return languagePackages(ctx, stdout)
		}
		return languagesCmd(ctx, stdout)
	case "doctor":
		return doctorCmd(ctx, stdout)
	case "image":
		return imageCmd(ctx, args[1:], stdout, stderr)
	case "bench":
		return benchCmd(ctx, args[1:], stdout, stderr)
	case "serve":
		return serveCmd(ctx, args[1:], stdout, stderr)
	case "mcp":
		return mcpCmd(ctx, args[1:], stdout, stderr)
	case "batch":
		return batchCmd(ctx, args[1:], stdin, stdout, stderr)
	case "admin":
		return adminCmd(ctx, args[1:], stdout, stderr)
	case "session":
		return sessionCmd(ctx, args[1:], stdin, stdout, stderr)
	case "env":
		return envCmd(ctx, args[1:], stdout, stderr)
	case "exec":
		return execCmd(ctx, args[1:], stdin, stdout, stderr)
	case "files":
		return filesCmd(ctx, args[1:], stdin, stdout, stderr)
	case "history":
		return historyCmd(ctx, args[1:], stdout, stderr)
	case "key", "user":
		return keyCmd(ctx, args[0], args[1:], stdout, stderr)
	case "version", "--version":
		return versionCmd(args[1:], stdout, stderr)
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return nil
	}
	fmt.Fprintf(stderr, "kiln: unknown command %q\n\n%s", args[0], usage)
	return errUsage
}

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

// versionCmd is `kiln version [--json]`.
func versionCmd(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("kiln version", flag.ContinueOnError)
	fs.SetOutput(stderr)
	asJSON := fs.Bool("json", false, `print {"version": ..., "go": ...} as JSON`)
	fs.Usage = func() { fmt.Fprint(stderr, "Usage: kiln version [--json]\n\nFlags:\n"); fs.PrintDefaults() }
	if _, done, err := positional(fs, args, 0, 0); done {
		return err
	}
	if *asJSON {
		return printJSON(stdout, map[string]string{"version": version, "go": runtime.Version()})
	}
	fmt.Fprintln(stdout, "kiln", version)
	return nil
}
