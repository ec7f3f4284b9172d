package programs

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/kiln-dev/kiln/internal/kiln"
	"github.com/kiln-dev/kiln/internal/langdef"
	"github.com/kiln-dev/kiln/internal/protocol"
)

// Execer is what this package needs from a sandbox; *agentclient.Client
// satisfies it. Paths are relative to the workspace. Exec returns an error
// only when the process could not be run or the connection failed; how the
// process ended is in the ExitInfo. The file operations return an error for a
// missing path or a failed connection alike.
//
// The programs see the workspace as /workspace. An Execer whose programs see
// it elsewhere (a runner on the host, in tests) says where with a method
// WorkspaceDir() string.
type Execer interface {
	Exec(ctx context.Context, req protocol.Exec, stdout, stderr io.Writer) (protocol.ExitInfo, error)
	WriteFile(ctx context.Context, path string, data []byte, mode uint32) error
	ReadFile(ctx context.Context, path string, limit int64) ([]byte, error)
	Stat(ctx context.Context, path string) (protocol.FileInfo, error)
	List(ctx context.Context, path string) ([]protocol.FileInfo, error)
	Mkdir(ctx context.Context, path string) error
	Delete(ctx context.Context, path string, recursive bool) error
}

// StdinExecer is an Execer that can also run a process whose stdin is read
// from a stream while it runs, as agentclient.Client.ExecStdin does (see
// there for when in is read). Run needs one for a Program with a
// StdinStream.
type StdinExecer interface {
	ExecStdin(ctx context.Context, req protocol.Exec, in io.Reader, stdout, stderr io.Writer) (protocol.ExitInfo, error)
}

// Workspace is where programs see the workspace inside a sandbox.
const Workspace = "/workspace"

// File is written into the workspace before the build.
type File struct {
	Path string // relative to the workspace
	Data []byte
}

// Program is one cell of a program language. It is either Code, a cell's
// source, or a program already in the workspace, named by Entry.
type Program struct {
	// Language is a program language's registry entry (package lang):
	// its toolchain says how the program is built and run.
	Language *langdef.Language
	// Code, when not nil, is the program: a source file that lives in the
	// build area, never in the workspace, so a cell cannot overwrite a
	// user's file. It is built alone, with the workspace on its include
	// path where the language has one (C, C++ and Fortran headers, Java
	// classes). Entry must be empty then.
	Code []byte
	// Name is Code's file name as its user knows it (test.java, sol.rs):
	// diagnostics name it. Default main<ext>; for Java, the file the public
	// class needs.
	Name  string
	Files []File // written into the workspace first: sources and data
	// Entry is the main source file of a program in the workspace,
	// relative to it: main<ext> (Main.java for Java) by default, or the
	// only source file in Files. The program is built from the workspace
	// (the sources in the entry's directory, Go's package, Java's classes,
	// Rust's modules); only the build's products go to the build area.
	Entry string
	Args  []string
	Stdin []byte
	// StdinStream, when set, is the run's stdin, read as the program runs
	// (never by the build); its end closes the program's stdin. Stdin is
	// not used then. The Execer must be a StdinExecer.
	StdinStream io.Reader
	// BuildOptions are the run's own compiler and linker flags (-O2,
	// -std=c++17, -lcrypto), checked against the toolchain's allowlist
	// (CheckBuildOptions). They count in the build cache's key.
	BuildOptions []string
	// Test builds and runs the program as its tests where its file does
	// not already say so (Rust: rustc --test though main has a body;
	// Java: the class with JUnit's console launcher).
	Test bool

	// Per phase: the compilation and the run each get this much.
	Timeout     time.Duration // default kiln's default timeout
	OutputBytes int64         // stdout and stderr together; default kiln's default

	// The sandbox's limits, which runtimes inside it cannot read (there is no
	// /sys): they size the JVM's heap, Go's GOMAXPROCS and GOMEMLIMIT, PHP's
	// memory_limit. Zero means kiln's default.
	MemoryBytes int64
	CPUMillis   int64
}

// Phases of a result.
const (
	PhaseCompile = "compile"
	PhaseRun     = "run"
)

// Result says how a program ended.
type Result struct {
	Phase string // PhaseCompile when the build failed, else PhaseRun
	// Diagnostics are the compiler's messages (errors and warnings), with
	// paths relative to the workspace (a cell's code by its Name), and
	// kiln's own remarks on the build (tests that were not run). There is
	// at least one error when the build failed.
	Diagnostics []kiln.Diagnostic
	CompileLog  string // the compiler's output, stdout and stderr together (bounded)
	Cached      bool   // the build was reused: nothing was compiled or checked
	// Tests is true when the program was built as its tests (Rust's
	// #[test] functions, Go's Test functions) and the run ran them.
	Tests bool
	// TestCases are what each test did, parsed from the run's output when
	// Tests is true and the run got that far.
	TestCases []kiln.TestCase
	// Build is the compiler's exec; zero when the build was cached.
	Build protocol.ExitInfo
	// Exit is of the run, or of the compiler when the build failed.
	Exit protocol.ExitInfo
}

// maxCompileLog bounds CompileLog (the exec's own output limit also applies).
const maxCompileLog = 1 << 20

// Run writes p's files into the workspace, builds the program unless an
// identical build is cached, and runs it, streaming its output to stdout and
// stderr. The compiler's output never reaches those writers. A nil error
// means the program was built or failed to build; the result says how it
// ended. Errors are kiln errors: Invalid for a bad program, Unsupported for a
// runtime missing on the host, SandboxError when the sandbox failed.
func Run(ctx context.Context, ex Execer, p Program, stdout, stderr io.Writer) (Result, error) {
	tc, err := lookup(p.Language)
	if err != nil {
		return Result{}, err
	}
	l := p.Language
	p = withDefaults(p, l, tc)
	if err := validate(ex, p, tc); err != nil {
		return Result{}, err
	}
	opts, err := tc.checkOptions(l.Name, p.BuildOptions)
	if err != nil {
		return Result{}, err
	}
	root, area := Workspace, BuildArea
	if w, ok := ex.(interface{ WorkspaceDir() string }); ok {
		root = w.WorkspaceDir()
	}
	if a, ok := ex.(interface{ BuildArea() string }); ok {
		area = a.BuildArea()
	}
	cache := ""
	if c, ok := ex.(interface{ BuildCache() string }); ok {
		cache = c.BuildCache()
	}
	for _, f := range p.Files {
		if err := ex.WriteFile(ctx, f.Path, f.Data, 0o644); err != nil {
			if ctx.Err() != nil {
				return Result{}, fmt.Errorf("write %s: %w", f.Path, ctx.Err())
			}
			return Result{}, kiln.Wrap(kiln.Invalid, err, "cannot write %s: %v", f.Path, err)
		}
	}
	j := &job{
		l: l, tc: tc, root: root, area: area, cache: cache,
		dir: path.Dir(p.Entry), entry: path.Base(p.Entry),
		mem: p.MemoryBytes, cpus: int((p.CPUMillis + 999) / 1000), opts: opts,
	}
	if p.Code != nil {
		j.dir, j.entry = ".", ""
		j.setCode(p.Name, p.Code)
	}
	in, err := gather(ctx, ex, j, p.Files)
	if err != nil {
		return Result{}, err
	}
	j.srcs, j.class, j.sourcepath = in.srcs, in.class, in.sourcepath
	if p.Test && (j.is(Rust) || j.is(Java)) {
		j.test, j.notes = true, nil
	}
	if j.test && j.is(Java) {
		if err := JUnitInstalled(); err != nil {
			return Result{}, err
		}
		j.reports = newReportsDir(area)
	}

	res, ok, err := build(ctx, ex, j, in, p)
	if err != nil || !ok {
		return res, err
	}

	run := tc.run(j)
	req := protocol.Exec{
		Argv:        append(run.argv, p.Args...),
		Env:         run.env,
		Dir:         j.execDir(),
		Stdin:       p.Stdin,
		TimeoutMs:   p.Timeout.Milliseconds(),
		OutputBytes: p.OutputBytes,
	}
	var testLog *boundedBuffer
	if j.test && j.tc.testCases != nil {
		testLog = &boundedBuffer{max: maxTestLog}
		stdout = io.MultiWriter(stdout, testLog)
	}
	if j.code != nil && !strings.HasSuffix(j.code.disk, ".java") {
		// Only the source's path is rewritten; Java's traces name the
		// class's file, not a path.
		o := &renamer{w: stdout, old: []byte(j.code.disk), new: []byte(j.code.shown)}
		e := &renamer{w: stderr, old: []byte(j.code.disk), new: []byte(j.code.shown)}
		defer o.Flush()
		defer e.Flush()
		stdout, stderr = o, e
	}
	var info protocol.ExitInfo
	if p.StdinStream != nil {
		req.Stdin = nil
		info, err = ex.(StdinExecer).ExecStdin(ctx, req, p.StdinStream, stdout, stderr)
	} else {
		info, err = ex.Exec(ctx, req, stdout, stderr)
	}
	if err != nil {
		return Result{}, sandboxErr(ctx, err, "run %s", j.shown())
	}
	res.Phase = PhaseRun
	res.Exit = info
	if j.reports != "" {
		res.TestCases = junitResults(ctx, ex, j.reports)
	}
	if testLog != nil {
		// Flushed first: the renamer holds back a partial line.
		if f, ok := stdout.(interface{ Flush() }); ok {
			f.Flush()
		}
		res.TestCases = j.tc.testCases(testLog.String())
	}
	return res, nil
}

// build reuses the cached build of j or makes it. ok is false when the build
// failed; the result then says why.
func build(ctx context.Context, ex Execer, j *job, in *inputs, p Program) (res Result, ok bool, err error) {
	key := in.key(j)
	j.out = path.Join(j.area, "build", key)
	marker := path.Join(j.out, "ok")
	res.Tests = j.test
	if in.cacheable {
		log, hit, err := areaRead(ctx, ex, marker)
		if err != nil {
			return Result{}, false, err
		}
		if !hit && j.cache != "" {
			// Another sandbox of the user built it.
			shared := path.Join(j.cache, "build", key)
			if log, hit, err = areaRead(ctx, ex, path.Join(shared, "ok")); err != nil {
				return Result{}, false, err
			}
			if hit {
				j.out = shared
			}
		}
		if hit {
			res.Cached = true
			res.CompileLog = string(log)
			res.Diagnostics = append(j.tc.diagnostics(j, res.CompileLog), j.notes...)
			return res, true, nil
		}
	} else {
		// A build that is not cached must not find an older one's files.
		areaRemove(ctx, ex, j.out)
	}
	// Compilers write into the build directory but do not make it.
	files := map[string][]byte{j.out + "/": nil}
	if j.code != nil {
		files[j.code.disk] = j.code.data
	}
	if j.is(Go) {
		files[path.Join(j.area, "go")+"/"] = nil
	}
	if err := areaWrite(ctx, ex, files); err != nil {
		return Result{}, false, err
	}
	if j.is(Go) {
		if err := seedGoCache(ctx, ex, j); err != nil {
			return Result{}, false, err
		}
	}
	res, ok, err = compile(ctx, ex, j, p)
	if err != nil || !ok {
		return res, false, err
	}
	// Best effort: a build that is not marked is made again next time.
	if in.cacheable && areaWrite(ctx, ex, map[string][]byte{marker: []byte(res.CompileLog)}) == nil {
		if j.cache != "" {
			publish(ctx, ex, j.out, path.Join(j.cache, "build", key))
		}
		evict(ctx, ex, j.area, key)
	}
	return res, true, nil
}

// compile runs the build step. ok is false when the build failed; the result
// then says why.
func compile(ctx context.Context, ex Execer, j *job, p Program) (res Result, ok bool, err error) {
	b := j.tc.build(j)
	if j.cache != "" && (j.is(Go) || j.cargo != "") {
		b.argv = shared(b.argv)
	}
	log := &boundedBuffer{max: maxCompileLog}
	// A compiler may write one message in several writes to one stream
	// while the other stream writes too (php -l): lines go into the log
	// whole, so a message is never cut by the other stream's output.
	stdout, stderr := &lineWriter{w: log}, &lineWriter{w: log}
	info, err := ex.Exec(ctx, protocol.Exec{
		Argv:        b.argv,
		Env:         b.env,
		Dir:         j.execDir(),
		TimeoutMs:   p.Timeout.Milliseconds(),
		OutputBytes: p.OutputBytes,
	}, stdout, stderr)
	stdout.Flush()
	stderr.Flush()
	if err != nil {
		return Result{}, false, sandboxErr(ctx, err, "compile %s", j.shown())
	}
	res = Result{Phase: PhaseCompile, CompileLog: j.unbuild(log.String()), Build: info, Exit: info, Tests: j.test}
	res.Diagnostics = j.tc.diagnostics(j, res.CompileLog)
	if info.Code == 0 && info.Signal == "" && !info.TimedOut && !info.OOMKilled && !info.Canceled && !info.OutputTruncated {
		res.Diagnostics = append(res.Diagnostics, j.notes...)
		return res, true, nil
	}
	if d, ok := stopped(info, p); ok {
		res.Diagnostics = append([]kiln.Diagnostic{d}, res.Diagnostics...)
	} else if !hasError(res.Diagnostics) {
		res.Diagnostics = append(res.Diagnostics, kiln.Diagnostic{Severity: "error", Message: failure(res.CompileLog, info)})
	}
	return res, false, nil
}

// stopped describes a build that a limit or a cancel stopped.
func stopped(info protocol.ExitInfo, p Program) (kiln.Diagnostic, bool) {
	var why string
	switch {
	case info.TimedOut:
		why = fmt.Sprintf("it ran past the time limit of %v", p.Timeout)
	case info.OOMKilled:
		why = fmt.Sprintf("it ran out of memory (the sandbox's limit is %s)", kiln.FormatBytes(p.MemoryBytes))
	case info.PidsLimited:
		why = "it ran into the limit on processes and threads"
	case info.OutputTruncated:
		why = fmt.Sprintf("it wrote more than %s of messages", kiln.FormatBytes(p.OutputBytes))
	case info.Canceled:
		why = "it was canceled"
	default:
		return kiln.Diagnostic{}, false
	}
	return kiln.Diagnostic{Severity: "error", Message: "the compiler was stopped: " + why}, true
}

// failure is the message of a failed build whose output had no diagnostic
// that the parser understood (a linker error, a crash of the compiler).
func failure(log string, info protocol.ExitInfo) string {
	for _, line := range strings.Split(log, "\n") {
		if l := strings.TrimSpace(line); strings.Contains(strings.ToLower(l), "error") {
			return l
		}
	}
	if info.Signal != "" {
		return "the compiler was killed by " + info.Signal
	}
	return fmt.Sprintf("the compiler exited with status %d", info.Code)
}

func hasError(ds []kiln.Diagnostic) bool {
	for _, d := range ds {
		if d.Severity == "error" {
			return true
		}
	}
	return false
}

// diagnostics parses a compile log (already rid of the build area's
// paths) into diagnostics with paths relative to the workspace.
func (tc *Toolchain) diagnostics(j *job, log string) []kiln.Diagnostic {
	return relative(tc.parse(log), j)
}

// relative makes the diagnostics' paths relative to the workspace: compilers
// name files relative to the entry's directory, or absolute. A cell's code
// keeps its name.
func relative(ds []kiln.Diagnostic, j *job) []kiln.Diagnostic {
	for i := range ds {
		f := ds[i].File
		switch {
		case f == "":
		case j.code != nil && f == j.code.shown:
		case path.IsAbs(f):
			if r, ok := strings.CutPrefix(f, j.root+"/"); ok {
				ds[i].File = r
			}
		case j.cargo != "":
			// Cargo's rustc names files relative to the package.
			ds[i].File = path.Join(j.cargo, f)
		default:
			ds[i].File = path.Join(j.dir, f)
		}
	}
	return ds
}

// lookup is the toolchain of a program language's entry, with the
// language's extensions as its sources.
func lookup(l *langdef.Language) (*Toolchain, error) {
	if l == nil {
		return nil, kiln.Errorf(kiln.Invalid, "no language given for the program")
	}
	tc, ok := l.Toolchain.(*Toolchain)
	if !ok || tc == nil {
		return nil, kiln.Errorf(kiln.Invalid, "%s is not a program language: its cells run in a kernel", l.Name)
	}
	if err := l.Available(); err != nil {
		return nil, err
	}
	own := *tc
	own.sources = l.Exts()
	return &own, nil
}

func withDefaults(p Program, l *langdef.Language, tc *Toolchain) Program {
	d := kiln.DefaultLimits()
	if p.Timeout <= 0 {
		p.Timeout = d.Timeout
	}
	if p.OutputBytes <= 0 {
		p.OutputBytes = d.OutputBytes
	}
	if p.MemoryBytes <= 0 {
		p.MemoryBytes = d.MemoryBytes
	}
	if p.CPUMillis <= 0 {
		p.CPUMillis = d.CPUMillis
	}
	if p.Code != nil {
		return p
	}
	if p.Entry == "" {
		p.Entry = tc.entry
		if p.Entry == "" {
			p.Entry = "main" + l.Ext
		}
		var only []string
		for _, f := range p.Files {
			if f.Path == p.Entry {
				only = nil
				break
			}
			if tc.isSource(f.Path) {
				only = append(only, f.Path)
			}
		}
		if len(only) == 1 {
			p.Entry = only[0]
		}
	}
	p.Entry = path.Clean(p.Entry)
	return p
}

func validate(ex Execer, p Program, tc *Toolchain) error {
	if _, ok := ex.(StdinExecer); p.StdinStream != nil && !ok {
		return kiln.Errorf(kiln.Unsupported, "this runner cannot stream stdin to a program")
	}
	if p.Code != nil {
		if p.Entry != "" {
			return kiln.Errorf(kiln.Invalid, "give the program as code or as an entry file in the workspace, not both")
		}
		if p.Name != "" && (p.Name != path.Base(p.Name) || strings.HasPrefix(p.Name, "-") || strings.HasPrefix(p.Name, ".") ||
			!tc.isSource(p.Name) || strings.ContainsAny(p.Name, "\x00\n\r\\") || len(p.Name) > 200 || !utf8.ValidString(p.Name)) {
			return kiln.Errorf(kiln.Invalid, "the file name %q must be a plain %s file name (%s), without a folder", p.Name, p.Language.Name, strings.Join(tc.sources, ", "))
		}
	} else {
		if !local(p.Entry) {
			return kiln.Errorf(kiln.Invalid, "the entry %q must be a path inside the workspace", p.Entry)
		}
		if strings.HasPrefix(path.Base(p.Entry), "-") || !tc.isSource(p.Entry) {
			return kiln.Errorf(kiln.Invalid, "the entry %q is not a %s source file (%s)", p.Entry, p.Language.Name, strings.Join(tc.sources, ", "))
		}
	}
	for _, f := range p.Files {
		if !local(f.Path) {
			return kiln.Errorf(kiln.Invalid, "file %q must be a path inside the workspace", f.Path)
		}
	}
	return nil
}

// local reports whether p is a relative path that stays inside the
// workspace. The agent checks again, against the file system.
func local(p string) bool {
	return filepath.IsLocal(p) && path.Clean(p) != "."
}

// sandboxErr wraps a failure of the sandbox, or says that ctx ended.
func sandboxErr(ctx context.Context, err error, format string, args ...any) error {
	msg := fmt.Sprintf(format, args...)
	if ctx.Err() != nil {
		return fmt.Errorf("%s: %w", msg, ctx.Err())
	}
	return kiln.Wrap(kiln.SandboxError, err, "%s", msg)
}

// boundedBuffer keeps the first max bytes written to it.
type boundedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
	max int
}

func (b *boundedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if room := b.max - b.buf.Len(); room > 0 {
		b.buf.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}

// lineWriter passes whole lines on to w, keeping a partial line until its
// end arrives or Flush. Each stream of a process gets its own.
type lineWriter struct {
	mu      sync.Mutex
	w       io.Writer
	partial []byte
}

func (l *lineWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.partial = append(l.partial, p...)
	if i := bytes.LastIndexByte(l.partial, '\n'); i >= 0 {
		l.w.Write(l.partial[:i+1])
		l.partial = append(l.partial[:0], l.partial[i+1:]...)
	}
	if len(l.partial) > maxCompileLog {
		l.w.Write(l.partial)
		l.partial = l.partial[:0]
	}
	return len(p), nil
}

// Flush passes on a last line with no newline.
func (l *lineWriter) Flush() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.partial) > 0 {
		l.w.Write(l.partial)
		l.partial = nil
	}
}

func (b *boundedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// EntryName is the default entry of a program in the workspace: main.c,
// Main.java, and so on.
func EntryName(l *langdef.Language) (string, error) {
	tc, err := lookup(l)
	if err != nil {
		return "", err
	}
	if tc.entry != "" {
		return tc.entry, nil
	}
	return "main" + l.Ext, nil
}
