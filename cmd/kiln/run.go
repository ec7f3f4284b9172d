package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"math"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/term"

	"github.com/kiln-dev/kiln/internal/backend"
	"github.com/kiln-dev/kiln/internal/backend/native"
	"github.com/kiln-dev/kiln/internal/engine"
	"github.com/kiln-dev/kiln/internal/kiln"
	"github.com/kiln-dev/kiln/internal/lang"
)

// fileFlags collects repeated --file LOCAL[:DEST] flags.
type fileFlags []string

func (f *fileFlags) String() string     { return strings.Join(*f, ",") }
func (f *fileFlags) Set(v string) error { *f = append(*f, v); return nil }

// sizeFlag is a byte count written as 512M, 1G, 64KiB or a plain number.
type sizeFlag struct{ n *int64 }

func (s sizeFlag) String() string {
	if s.n == nil || *s.n == 0 {
		return ""
	}
	return kiln.FormatBytes(*s.n)
}
func (s sizeFlag) Set(v string) error {
	n, err := parseSize(v)
	if err != nil {
		return err
	}
	*s.n = n
	return nil
}

func runCmd(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("kiln run", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		language, code string
		cpus           float64
		files          fileFlags
		buildOpts      fileFlags
		mounts         fileFlags
		lim            kiln.Limits
		stats, asJSON  bool
		test           bool
		backendName    string
		saveDir        string
		local, verbose bool
		server, key    string
	)
	fs.StringVar(&language, "lang", "", "language: "+strings.Join(lang.Names(), ", ")+" (default: from the file's extension)")
	fs.StringVar(&language, "l", "", "short for --lang")
	fs.StringVar(&code, "c", "", "the program, given on the command line")
	addLimitFlags(fs, &lim, &cpus)
	fs.Var(&files, "file", "copy a local file into the workspace: LOCAL[:DEST] (repeatable); a relative LOCAL keeps its path")
	fs.Var(&files, "f", "short for --file")
	fs.Var(&mounts, "mount", "show a local folder read-only in the sandbox: DIR[:DEST], DEST /project or below /mnt or /project (default /mnt/<DIR's name>; repeatable): import a project's code and run its tests, writing nothing back")
	fs.Var(&buildOpts, "build-opt", "compiled languages: compiler and linker flags, such as -O2, -std=c++17 or -lcrypto, split at spaces (repeatable), checked against an allowlist per compiler (a refused flag is named with what is allowed)")
	fs.BoolVar(&test, "test", false, "run the file as tests: Python with pytest, JavaScript with node --test, Rust with rustc --test, Java with JUnit (test_*.py, *_test.py, *.test.js, *_test.go, and *Test.java with @Test methods are tests by their name); --json lists each test")
	fs.BoolVar(&asJSON, "json", false, "run as the API's one-shot run (POST /v1/run) does, as one cell, and print its result as JSON: stdout, stderr, rich outputs (display(), plots), error, usage, artifacts")
	fs.StringVar(&saveDir, "save-outputs", "", "save image outputs (display(), plots) as files output-N.png, .svg, ... in this `directory`, made if missing, existing files kept (default: a new temporary directory); stdout names each file")
	addBackendFlag(fs, &backendName)
	fs.BoolVar(&local, "local", false, "run on this host's engine even when a kiln serve is found (see below)")
	fs.StringVar(&server, "server", "", "run on this kiln server through POST /v1/run (see below)")
	fs.StringVar(&key, "key", "", "API key for --server (see below)")
	fs.BoolVar(&verbose, "v", false, "say on stderr where the program ran: a kiln serve (which) or the local engine (why)")
	fs.BoolVar(&stats, "stats", false, "print the exit status, wall and CPU time and peak memory on stderr; the build's apart, with its warnings")
	fs.Usage = func() {
		fmt.Fprint(stderr, "Usage: kiln run [flags] FILE|- [ARGS...]  or  kiln run [flags] --lang L -c CODE [-- ARGS...]\n\nFlags:\n")
		fs.PrintDefaults()
		fmt.Fprint(stderr, runServerHelp)
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return errUsage
	}
	codeGiven, backendSet := false, false
	fs.Visit(func(f *flag.Flag) {
		codeGiven = codeGiven || f.Name == "c"
		backendSet = backendSet || f.Name == "backend"
	})
	if !codeGiven && fs.NArg() == 0 {
		fmt.Fprint(stderr, "kiln run: nothing to run: give a program file, - for stdin, or -c CODE\n\n")
		fs.Usage()
		return errUsage
	}
	if err := applyCPUs(&lim, cpus); err != nil {
		return err
	}
	r := engine.Run{Language: language, Code: code, Args: fs.Args(), Limits: lim, Test: test}
	for _, o := range buildOpts {
		r.BuildOptions = append(r.BuildOptions, strings.Fields(o)...)
	}
	codeFromStdin, err := programSource(&r, codeGiven, fs, stdin)
	if err != nil {
		return err
	}
	if !codeFromStdin {
		if r.Stdin, err = programStdin(stdin); err != nil {
			return err
		}
	}
	if r.Files, err = readFiles(files); err != nil {
		return err
	}
	if r.Mounts, err = parseMounts(mounts); err != nil {
		return err
	}
	how := runHow{backend: backendName, stats: stats, verbose: verbose || stats, saveDir: saveDir}
	if local {
		how.why = "--local"
	} else if how.srv, how.why, err = findRunServer(server, key, os.Getenv, stderr); err != nil {
		return err
	}
	if how.srv != nil {
		if why := serverCannot(r, backendSet); why != "" {
			if how.srv.explicit {
				return kiln.Errorf(kiln.Unsupported, "kiln run --server: %s; run without --server and $KILN_SERVER, or with --local", why)
			}
			how.srv, how.why = nil, why
		}
	}
	if asJSON {
		return runJSON(ctx, r, how, stdout, stderr)
	}
	return runProgram(ctx, r, how, stdout, stderr)
}

// runHow is where and how kiln run runs the program and reports it.
type runHow struct {
	srv            *runServer // nil: the local engine
	why            string     // why the local engine, for -v
	backend        string
	stats, verbose bool
	saveDir        string
}

// viaServer runs r on how.srv when there is one, printing the result as
// the local path would. done false: run it locally (the why is said with
// -v).
func (how *runHow) viaServer(ctx context.Context, r engine.Run, stderr io.Writer) (res kiln.CellResult, done bool, err error) {
	if how.srv == nil {
		return res, false, nil
	}
	res, done, why, err := runOnServer(ctx, how.srv, r)
	if errors.Is(err, context.Canceled) || ctx.Err() != nil {
		fmt.Fprintln(stderr, "kiln: the run was cancelled")
		return res, true, exitError{exitInterrupted}
	}
	if err != nil {
		return res, true, err
	}
	if !done {
		how.why = why
	}
	return res, done, nil
}

// sayWhere is the -v line.
func (how *runHow) sayWhere(w io.Writer, viaServer bool) {
	switch {
	case !how.verbose:
	case viaServer:
		fmt.Fprintf(w, "kiln: ran on the kiln serve at %s (POST /v1/run; %s)\n", how.srv.url, how.srv.why)
	default:
		fmt.Fprintf(w, "kiln: ran on the local engine (%s)\n", how.why)
	}
}

// parseMounts resolves --mount DIR[:DEST] flags: DIR to its real path (the
// local caller may mount any folder it can read).
func parseMounts(flags []string) ([]backend.Mount, error) {
	var out []backend.Mount
	for _, f := range flags {
		dir, dest := f, ""
		if i := strings.LastIndex(f, ":/"); i > 0 {
			dir, dest = f[:i], f[i+1:]
		}
		real, err := native.ResolveMount(nil, dir)
		if err != nil {
			return nil, err
		}
		out = append(out, backend.Mount{Source: real, Target: dest})
	}
	return out, nil
}

// runJSON is `kiln run --json`: the run goes the way of the API's
// one-shot run (engine.RunCell, a cell in a sandbox of its own), so the
// printed CellResult is the one POST /v1/run answers for the same
// program, rich outputs included. The exit status is kiln run's.
func runJSON(ctx context.Context, r engine.Run, how runHow, stdout, stderr io.Writer) error {
	p, err := engine.PrepareRun(r, engine.DefaultCellBounds())
	if err != nil {
		return err
	}
	res, done, err := how.viaServer(ctx, r, stderr)
	if err != nil {
		return err
	}
	if !done {
		log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
		b, err := newBackend(ctx, how.backend, log)
		if err != nil {
			return err
		}
		if res, err = engine.New(b, log).RunPrepared(ctx, p, engine.Events{}, nil); err != nil {
			return err
		}
	}
	how.sayWhere(stderr, done)
	if err := printJSON(stdout, res); err != nil {
		return err
	}
	if code := exitStatus(res); code != 0 {
		return exitError{code}
	}
	return nil
}

// programSource fills in the code and language from -c, a file, or stdin.
func programSource(r *engine.Run, codeGiven bool, fs *flag.FlagSet, stdin io.Reader) (fromStdin bool, err error) {
	if codeGiven {
		if r.Language == "" {
			return false, kiln.Errorf(kiln.Invalid, "-c needs --lang (one of %s)", strings.Join(lang.Names(), ", "))
		}
		return false, nil
	}
	if fs.NArg() == 0 {
		return false, kiln.Errorf(kiln.Invalid, "nothing to run: give a program file, - for stdin, or -c CODE")
	}
	src := fs.Arg(0)
	r.Args = fs.Args()[1:]
	if src == "-" {
		if r.Language == "" {
			return false, kiln.Errorf(kiln.Invalid, "code from stdin needs --lang (one of %s)", strings.Join(lang.Names(), ", "))
		}
		b, err := readLimited(stdin, engine.MaxCodeBytes, "the program on stdin")
		r.Code = string(b)
		return true, err
	}
	if r.Language == "" {
		l, err := lang.ByExt(src)
		if err != nil {
			return false, err
		}
		r.Language = l.Name
	}
	b, err := readFileLimited(src, engine.MaxCodeBytes)
	r.Code = string(b)
	// A compiled program keeps its file's name: its messages name it, and
	// Java's single-file programs need it.
	r.Name = filepath.Base(src)
	return false, err
}

// programStdin passes kiln's stdin on to the program when it is a pipe or
// a file; a terminal is not read, so kiln never waits for typing.
func programStdin(stdin io.Reader) ([]byte, error) {
	f, ok := stdin.(*os.File)
	if !ok || f == nil {
		return nil, nil
	}
	if term.IsTerminal(int(f.Fd())) {
		return nil, nil
	}
	return readLimited(f, engine.MaxStdinBytes, "stdin")
}

// readFiles reads the --file flags. A relative LOCAL keeps its path in the
// workspace (a/b.txt lands as a/b.txt); an absolute one or one that leaves
// the current directory lands under its base name; LOCAL:DEST says where.
// Two files with one destination are refused.
func readFiles(specs []string) ([]engine.File, error) {
	var out []engine.File
	from := map[string]string{} // destination -> spec
	for _, spec := range specs {
		local, dest, ok := strings.Cut(spec, ":")
		if !ok {
			dest = filepath.Base(local)
			if filepath.IsLocal(local) {
				dest = filepath.ToSlash(filepath.Clean(local))
			}
		}
		if prev, ok := from[path.Clean(dest)]; ok {
			return nil, kiln.Errorf(kiln.Invalid, "--file %s and --file %s both go to %s in the workspace; give one another destination with --file LOCAL:DEST", prev, spec, dest)
		}
		from[path.Clean(dest)] = spec
		b, err := readFileLimited(local, engine.MaxFilesBytes)
		if err != nil {
			return nil, err
		}
		fi, _ := os.Stat(local)
		mode := uint32(0o644)
		if fi != nil && fi.Mode()&0o111 != 0 {
			mode = 0o755
		}
		out = append(out, engine.File{Path: dest, Data: b, Mode: mode})
	}
	return out, nil
}

// runProgram is kiln run: the run goes the way of the API's one-shot run
// (engine.PrepareRun and RunPrepared, one cell in a sandbox of its own),
// so its result is the CellResult that POST /v1/run answers for the same
// program. Output streams as it comes; rich outputs are saved to files and
// named on stdout; how the run ended is said on stderr, as for a program,
// and the exit status is the program's (exitStatus).
func runProgram(ctx context.Context, r engine.Run, how runHow, stdout, stderr io.Writer) error {
	// Bad input is reported before anything about the host.
	p, err := engine.PrepareRun(r, engine.DefaultCellBounds())
	if err != nil {
		return err
	}
	out := &renderer{stdout: stdout, stderr: stderr}
	show := out.show
	if how.saveDir != "" {
		saver, err := newOutputSaver(how.saveDir)
		if err != nil {
			return err
		}
		show = func(o kiln.Output) { saver.show(stdout, stderr, o) }
	}
	res, done, err := how.viaServer(ctx, r, stderr)
	if err != nil {
		return err
	}
	if done {
		replay(res, show, stdout, stderr)
	} else if res, err = runLocal(ctx, p, how.backend, show, stdout, stderr); err != nil {
		return err
	}
	reportRun(stderr, res, r.Limits)
	how.sayWhere(stderr, done)
	if how.stats {
		l, _ := lang.Lookup(r.Language)
		cellStats(stderr, res, l != nil && l.Kind == lang.Program)
	}
	if code := exitStatus(res); code != 0 {
		return exitError{code}
	}
	return nil
}

// runLocal runs p on this host's engine, streaming its output.
func runLocal(ctx context.Context, p engine.PreparedRun, backendName string, show func(kiln.Output), stdout, stderr io.Writer) (kiln.CellResult, error) {
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	b, err := newBackend(ctx, backendName, log)
	if err != nil {
		return kiln.CellResult{}, err
	}
	res, err := engine.New(b, log).RunPrepared(ctx, p, engine.Events{
		Stdout: func(p []byte) { stdout.Write(p) },
		Stderr: func(p []byte) { stderr.Write(p) },
		Output: show,
	}, nil)
	if ctx.Err() != nil {
		fmt.Fprintln(stderr, "kiln: the run was cancelled")
		return res, exitError{exitInterrupted}
	}
	return res, err
}

// reportRun says on stderr how a one-shot run ended, in a program's
// words: its error (a traceback, the compiler's diagnostics) and the limit
// that stopped it. A kernel that ended with the program (process.exit(), a
// signal) is the program ending: its exit status says so, and there is no
// kernel state to speak of.
func reportRun(w io.Writer, res kiln.CellResult, lim kiln.Limits) {
	hit := map[kiln.CellStatus]kiln.LimitHit{kiln.StatusTimeout: kiln.HitTime, kiln.StatusMemory: kiln.HitMemory, kiln.StatusOutput: kiln.HitOutput}
	h, stopped := hit[res.Status]
	// What a stopped program was doing (the KeyboardInterrupt the kernel
	// stopped it with) is not its error.
	// A shell's last status is the exit status, not an error to print.
	if e := res.Error; e != nil && res.Status == kiln.StatusError && e.Name != "ExitStatus" && (e.Name != "KernelDied" || res.ExitCode == nil) {
		(&renderer{stderr: w}).reportError(e)
	}
	switch {
	case stopped:
		for _, line := range engine.Describe(kiln.Exit{Limits: []kiln.LimitHit{h}}, lim) {
			fmt.Fprintln(w, line)
		}
	case strings.HasPrefix(res.Notice, "process limit reached"):
		fmt.Fprintln(w, "kiln: "+res.Notice)
	case res.Status == kiln.StatusInterrupted:
		fmt.Fprintln(w, "kiln: interrupted")
	}
}

// usageLine says what an execution cost.
func usageLine(u kiln.Usage) string {
	return fmt.Sprintf("wall %.1f ms, cpu %.1f ms, peak memory %.1f MiB",
		float64(u.Wall.Microseconds())/1000, float64(u.CPU.Microseconds())/1000, float64(u.PeakMemory)/kiln.MiB)
}

// cellStats prints --stats for a cell: the build (or that it was cached)
// with its warnings, then the run.
func cellStats(w io.Writer, res kiln.CellResult, program bool) {
	if program {
		if res.BuildUsage != nil {
			fmt.Fprintf(w, "kiln: build: %s\n", usageLine(*res.BuildUsage))
		} else if res.Error == nil || res.Error.Name != "CompileError" {
			fmt.Fprintln(w, "kiln: build: cached")
		}
		for _, d := range res.Diagnostics {
			loc := d.File
			if d.Line > 0 {
				loc = fmt.Sprintf("%s:%d", loc, d.Line)
			}
			fmt.Fprintf(w, "kiln: %s: %s: %s\n", loc, d.Severity, d.Message)
		}
		if res.Error != nil && res.Error.Name == "CompileError" {
			fmt.Fprintln(w, "kiln: run: none, the build failed")
			return
		}
	}
	status := fmt.Sprintf("exit %d", exitStatus(res))
	if res.ExitCode == nil && res.Status != kiln.StatusOK && res.Status != kiln.StatusError {
		status = string(res.Status) // a limit or an interrupt, named by reportRun
	}
	prefix := ""
	if program {
		prefix = "run: "
	}
	fmt.Fprintf(w, "kiln: %s%s; %s\n", prefix, status, usageLine(res.Usage))
}

func readFileLimited(name string, max int64) ([]byte, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, kiln.Errorf(kiln.Invalid, "cannot read %s: %s", name, reason(err))
	}
	defer f.Close()
	return readLimited(f, max, name)
}

func readLimited(r io.Reader, max int64, what string) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r, max+1))
	if err != nil {
		return nil, kiln.Errorf(kiln.Invalid, "cannot read %s: %s", what, reason(err))
	}
	if int64(len(b)) > max {
		return nil, kiln.Errorf(kiln.TooLarge, "%s is larger than the limit of %s", what, kiln.FormatBytes(max))
	}
	return b, nil
}

// parseSize reads 512M, 1G, 1.5GiB, 64k or a plain byte count.
func parseSize(v string) (int64, error) {
	s := strings.ToUpper(strings.TrimSpace(v))
	s = strings.TrimSuffix(strings.TrimSuffix(s, "B"), "I")
	mult := int64(1)
	if n := len(s); n > 0 {
		switch s[n-1] {
		case 'K':
			mult, s = kiln.KiB, s[:n-1]
		case 'M':
			mult, s = kiln.MiB, s[:n-1]
		case 'G':
			mult, s = kiln.GiB, s[:n-1]
		}
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(f) || f <= 0 || f*float64(mult) > 1<<50 {
		return 0, fmt.Errorf("%q is not a size; write for example 512M, 1G or 65536", v)
	}
	// Round up: a size that rounds to 0 bytes would silently mean "default".
	return int64(math.Ceil(f * float64(mult))), nil
}

func doctorCmd(ctx context.Context, stdout io.Writer) error {
	if err := doctorReport(ctx, stdout); err != nil {
		return exitError{1}
	}
	return nil
}

// addLimitFlags defines the limit flags that run and repl share.
func addLimitFlags(fs *flag.FlagSet, lim *kiln.Limits, cpus *float64) {
	fs.Var(durationFlag{&lim.Timeout}, "timeout", "wall-clock limit per run or cell, e.g. 10s (default 30s)")
	fs.Var(sizeFlag{&lim.MemoryBytes}, "memory", "memory limit, e.g. 256M (default 512M)")
	fs.Var(sizeFlag{&lim.OutputBytes}, "output", "stdout+stderr limit, e.g. 64K (default 1M)")
	fs.Int64Var(&lim.Pids, "pids", 0, "process and thread limit (default 128)")
	fs.Float64Var(cpus, "cpus", 0, "CPU limit in CPUs, e.g. 0.5 (default 1)")
}

// applyCPUs turns --cpus into the CPU limit, refusing what would round away.
func applyCPUs(lim *kiln.Limits, cpus float64) error {
	if cpus == 0 {
		return nil
	}
	if math.IsNaN(cpus) || cpus < 0.05 || cpus > 64 {
		return kiln.Errorf(kiln.Invalid, "--cpus %v is outside the allowed range 0.05 to 64", cpus)
	}
	lim.CPUMillis = int64(math.Ceil(cpus * 1000))
	return nil
}

// reason is the part of a local file error worth showing: "no such file or
// directory", "permission denied", "is a directory".
func reason(err error) string {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err.Error()
	}
	return err.Error()
}

// durationFlag is a duration whose parse error shows a valid example.
type durationFlag struct{ d *time.Duration }

func (f durationFlag) String() string {
	if f.d == nil || *f.d == 0 {
		return ""
	}
	return f.d.String()
}

func (f durationFlag) Set(v string) error {
	d, err := time.ParseDuration(v)
	if err != nil {
		return fmt.Errorf("%q is not a duration; write for example 500ms, 10s or 2m", v)
	}
	*f.d = d
	return nil
}
