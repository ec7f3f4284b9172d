package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"

	"golang.org/x/term"

	"github.com/kiln-dev/kiln/internal/backend/native"
	"github.com/kiln-dev/kiln/internal/engine"
	"github.com/kiln-dev/kiln/internal/kiln"
	"github.com/kiln-dev/kiln/internal/lang"
)

const replHelp = `Commands (a line that starts with ':'):
  :help                 this text
  :restart              restart the kernel: variables are cleared, files kept
  :files [DIR]          list workspace files
  :get PATH [LOCAL]     copy a workspace file to this machine
  :put LOCAL [PATH]     copy a local file into the workspace
  :load FILE            run a local file as a cell
  :quit                 leave (Ctrl-D does the same)
Ctrl-C interrupts a running cell (its state is kept) or clears the input.
A cell runs when it is complete; an open block asks for more lines, and an
empty line ends a block. In program languages an empty line ends the program.
`

const replUsage = `Usage: kiln repl [flags] LANGUAGE
       kiln repl --server URL [--key KEY] [--lang L] SESSION

The first form starts a session in a fresh sandbox on this machine (root
needed) and ends it on leaving. The second works in SESSION of a kiln
server (see kiln session create), from any machine and without root;
the session stays when you leave.

Languages: %s

Flags:
`

// replCmd is `kiln repl LANG`: an interactive session on the terminal.
func replCmd(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	// In a REPL, Ctrl-C interrupts a cell (see cell) instead of ending kiln,
	// so the session must not share main's interrupt-cancelled context.
	ctx = context.WithoutCancel(ctx)
	fs := flag.NewFlagSet("kiln repl", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		lim      kiln.Limits
		cpus     float64
		rf       remoteFlags
		language string
	)
	addLimitFlags(fs, &lim, &cpus)
	fs.StringVar(&rf.server, "server", "", "work in SESSION of the kiln server at this URL instead of a local sandbox")
	fs.StringVar(&rf.key, "key", "", "API key for --server (default: $KILN_KEY or the config file, as in kiln exec -h)")
	fs.StringVar(&language, "lang", "", "with --server: the cell language (default: the session's first)")
	fs.Usage = func() {
		fmt.Fprintf(stderr, replUsage, strings.Join(lang.Names(), ", "))
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return errUsage
	}
	if rf.server != "" {
		return remoteRepl(ctx, fs, rf, language, stdin, stdout, stderr)
	}
	for _, name := range []string{"key", "lang"} {
		if flagSet(fs, name) {
			fmt.Fprintf(stderr, "kiln repl: --%s goes with --server; a local REPL takes the language as its argument\n\n", name)
			fs.Usage()
			return errUsage
		}
	}
	if fs.NArg() != 1 {
		fmt.Fprint(stderr, "kiln repl: give one language, e.g. kiln repl python\n\n")
		fs.Usage()
		return errUsage
	}
	if err := applyCPUs(&lim, cpus); err != nil {
		return err
	}
	l, err := lang.Lookup(fs.Arg(0))
	if err != nil {
		return err
	}
	if err := l.Available(); err != nil {
		return err
	}
	if err := lim.Validate(); err != nil {
		return err
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	b, err := native.New(native.Config{}, log)
	if err != nil {
		return err
	}
	sess, err := engine.New(b, log).NewSession(ctx, engine.SessionSpec{Limits: lim})
	if err != nil {
		return err
	}
	defer sess.Close(context.Background())
	// The renderer makes its directory for images when the first comes.
	r := &repl{lang: l, sess: localSession{sess}, stdout: stdout, stderr: stderr,
		render: &renderer{stdout: stdout, stderr: stderr, artifactHint: ":get %s to copy it here"}}
	return r.start(ctx, stdin)
}

// start reads cells from a terminal with line editing, else line by line.
func (r *repl) start(ctx context.Context, stdin io.Reader) error {
	if f, ok := stdin.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		return r.interactive(ctx, f)
	}
	return r.batch(ctx, stdin)
}

// flagSet reports whether the flag name was given.
func flagSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

type repl struct {
	lang   *lang.Language
	sess   replSession
	where  string // "in a fresh sandbox", or the server's address
	stdout io.Writer
	stderr io.Writer
	render *renderer
}

// replSession is what the REPL needs of a session: a local one in a
// sandbox of this machine, or one on a kiln server.
type replSession interface {
	ID() string
	// Complete reports whether code is a whole cell of language.
	Complete(ctx context.Context, language, code string) bool
	Run(ctx context.Context, c engine.Cell, ev engine.Events) (kiln.CellResult, error)
	Interrupt() error
	Restart(ctx context.Context, language string) error
	List(ctx context.Context, dir string) ([]replEntry, error)
	ReadFile(ctx context.Context, path string) ([]byte, error)
	WriteFile(ctx context.Context, path string, data []byte) error
}

// replEntry is one line of :files.
type replEntry struct {
	Type, Name string
	Size       int64
}

// localSession is a session in a sandbox of this machine.
type localSession struct{ *engine.Session }

func (s localSession) Complete(ctx context.Context, language, code string) bool {
	res, err := s.Check(ctx, language, code)
	return err != nil || res.Status != "incomplete" // an error: let the run report it
}

func (s localSession) List(ctx context.Context, dir string) ([]replEntry, error) {
	ents, err := s.Agent().List(ctx, dir)
	out := make([]replEntry, 0, len(ents))
	for _, e := range ents {
		out = append(out, replEntry{Type: e.Type, Name: e.Name, Size: e.Size})
	}
	return out, err
}

func (s localSession) ReadFile(ctx context.Context, path string) ([]byte, error) {
	return s.Agent().ReadFile(ctx, path, engine.MaxFilesBytes)
}

func (s localSession) WriteFile(ctx context.Context, path string, data []byte) error {
	if err := engine.ValidatePath(path); err != nil {
		return err
	}
	return s.Agent().WriteFile(ctx, path, data, 0o644)
}

func (r *repl) prompts() (string, string) {
	switch r.lang.Name {
	case "python":
		return ">>> ", "... "
	case "javascript", "typescript":
		return "> ", "... "
	}
	return r.lang.Name + "> ", strings.Repeat(".", len(r.lang.Name)) + "  "
}

// ctrlC passes keys through to the line editor and notes Ctrl-C, which
// the editor reports exactly like Ctrl-D.
type ctrlC struct {
	r    io.Reader
	seen atomic.Bool
}

func (c *ctrlC) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	for _, b := range p[:n] {
		if b == 3 {
			c.seen.Store(true)
		}
	}
	return n, err
}

func (r *repl) interactive(ctx context.Context, tty *os.File) error {
	first, more := r.prompts()
	keys := &ctrlC{r: tty}
	rw := struct {
		io.Reader
		io.Writer
	}{keys, r.stdout}
	t := term.NewTerminal(rw, first)
	where := r.where
	if where == "" {
		where = "in a fresh sandbox"
	}
	fmt.Fprintf(r.stdout, "kiln repl: %s %s (session %s). Ctrl-C interrupts, Ctrl-D exits, :help for commands.\n", r.lang.Name, where, r.sess.ID())
	var buf []string
	for {
		if len(buf) == 0 {
			t.SetPrompt(first)
		} else {
			t.SetPrompt(more)
		}
		old, err := term.MakeRaw(int(tty.Fd()))
		if err != nil {
			return err
		}
		keys.seen.Store(false)
		line, err := t.ReadLine()
		term.Restore(int(tty.Fd()), old)
		if errors.Is(err, io.EOF) && keys.seen.Load() {
			fmt.Fprintln(r.stdout, "^C")
			buf = nil
			// x/term leaves the Ctrl-C and the half-typed line in its
			// buffer; a fresh editor with the same history forgets both.
			history := t.History
			t = term.NewTerminal(rw, first)
			t.History = history
			continue
		}
		if err != nil {
			fmt.Fprintln(r.stdout)
			return nil
		}
		if len(buf) == 0 && strings.HasPrefix(strings.TrimSpace(line), ":") {
			if quit := r.command(ctx, strings.TrimSpace(line)); quit {
				return nil
			}
			continue
		}
		buf = append(buf, line)
		if code, ready := r.ready(ctx, buf); ready {
			buf = nil
			r.cell(ctx, code)
		}
	}
}

// batch reads cells from a non-terminal, so that scripts and tests can
// drive the REPL: the same completeness rules, no line editing.
func (r *repl) batch(ctx context.Context, in io.Reader) error {
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 64<<10), engine.MaxCodeBytes)
	var buf []string
	for sc.Scan() {
		line := sc.Text()
		if len(buf) == 0 && strings.HasPrefix(strings.TrimSpace(line), ":") {
			if r.command(ctx, strings.TrimSpace(line)) {
				return nil
			}
			continue
		}
		buf = append(buf, line)
		if code, ready := r.ready(ctx, buf); ready {
			buf = nil
			r.cell(ctx, code)
		}
	}
	if len(buf) > 0 {
		r.cell(ctx, strings.Join(buf, "\n"))
	}
	return sc.Err()
}

// ready decides whether the lines typed so far make a cell: the kernel
// says whether the code is complete; an empty line always ends a block.
func (r *repl) ready(ctx context.Context, buf []string) (string, bool) {
	code := strings.Join(buf, "\n")
	last := buf[len(buf)-1]
	if strings.TrimSpace(code) == "" {
		return "", false
	}
	if r.lang.Kind == lang.Program || strings.TrimSpace(last) == "" {
		return code, r.lang.Kind != lang.Program || strings.TrimSpace(last) == ""
	}
	return code, r.sess.Complete(ctx, r.lang.Name, code)
}

// cell runs code, with Ctrl-C (SIGINT to kiln) interrupting it.
func (r *repl) cell(ctx context.Context, code string) {
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT)
	stop := make(chan struct{})
	go func() {
		for {
			select {
			case <-sig:
				r.sess.Interrupt()
			case <-stop:
				return
			}
		}
	}()
	res, err := r.sess.Run(ctx, engine.Cell{Language: r.lang.Name, Code: code}, engine.Events{
		Stdout: func(p []byte) { r.stdout.Write(p) },
		Stderr: func(p []byte) { r.stderr.Write(p) },
		Output: func(o kiln.Output) { r.render.show(o) },
	})
	close(stop)
	signal.Stop(sig)
	if err != nil {
		fmt.Fprintf(r.stderr, "kiln: %s\n", kiln.Message(err))
		return
	}
	r.render.report(res)
}

// command runs a ':' command and reports whether to quit.
func (r *repl) command(ctx context.Context, line string) bool {
	f := strings.Fields(line)
	arg := func(i int, def string) string {
		if i < len(f) {
			return f[i]
		}
		return def
	}
	a := r.sess
	var err error
	switch f[0] {
	case ":quit", ":q", ":exit":
		return true
	case ":help", ":h":
		fmt.Fprint(r.stdout, replHelp)
	case ":restart":
		if err = r.sess.Restart(ctx, r.lang.Name); err == nil {
			fmt.Fprintln(r.stdout, "kernel restarted; files are kept")
		}
	case ":files", ":ls":
		ents, lerr := a.List(ctx, arg(1, ""))
		err = lerr
		for _, e := range ents {
			fmt.Fprintf(r.stdout, "%-8s %10d  %s\n", e.Type, e.Size, e.Name)
		}
	case ":get":
		if len(f) < 2 {
			err = kiln.Errorf(kiln.Invalid, "usage: :get PATH [LOCAL]")
			break
		}
		data, gerr := a.ReadFile(ctx, f[1])
		if err = gerr; err == nil {
			local := arg(2, filepath.Base(f[1]))
			if err = os.WriteFile(local, data, 0o644); err == nil {
				fmt.Fprintf(r.stdout, "copied %s to %s (%s)\n", f[1], local, kiln.FormatBytes(int64(len(data))))
			}
		}
	case ":put":
		if len(f) < 2 {
			err = kiln.Errorf(kiln.Invalid, "usage: :put LOCAL [PATH]")
			break
		}
		data, rerr := readFileLimited(f[1], engine.MaxFilesBytes)
		if err = rerr; err == nil {
			err = a.WriteFile(ctx, arg(2, filepath.Base(f[1])), data)
		}
	case ":load":
		if len(f) < 2 {
			err = kiln.Errorf(kiln.Invalid, "usage: :load FILE")
			break
		}
		data, rerr := readFileLimited(f[1], engine.MaxCodeBytes)
		if err = rerr; err == nil {
			r.cell(ctx, string(data))
		}
	default:
		err = kiln.Errorf(kiln.Invalid, "unknown command %s; :help lists them", f[0])
	}
	if err != nil {
		fmt.Fprintf(r.stderr, "kiln: %s\n", errorText(err))
	}
	return false
}

// errorText is a user-safe message for kiln's errors and the agent's.
func errorText(err error) string {
	if kiln.KindOf(err) != kiln.Internal {
		return kiln.Message(err)
	}
	return err.Error()
}
