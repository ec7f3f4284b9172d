package programs

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/kiln-dev/kiln/internal/kiln"
	"github.com/kiln-dev/kiln/internal/langdef"
)

// step is one command: argv (absolute program first) and extra environment.
type step struct {
	argv []string
	env  []string
}

// scope says which files a build may read, for the cache key.
type scope int

const (
	entryOnly scope = iota // the entry alone (a syntax check)
	tree                   // files with the toolchain's extensions below the entry's directory
)

// Toolchain says how one language builds and runs a program: the registry
// (package lang) names one per program language (C, Go, ...). These values
// are the policy a reviewer reads: every flag of every compiler is here.
type Toolchain struct {
	entry string // the default entry when it is not main<ext>
	// sources are the extensions of the files the build compiles,
	// case-sensitive: the language's (lookup copies them in from its
	// registry entry).
	sources []string
	headers []string // extensions or exact names of other files the build reads
	scope   scope
	// cellReads says which workspace files a cell's code may read (headers,
	// classes): they count for the cache. Nil: none.
	cellReads func(name string) bool
	// order reorders the compiled files, which come sorted by name with the
	// entry last; contents has those of them that were read, by name.
	order func(srcs []string, contents map[string][]byte) []string
	// prepare runs before a workspace program's inputs are gathered (Go
	// looks for its go.mod).
	prepare func(ctx context.Context, ex Execer, j *job, known map[string][]byte) error
	// tests looks at a workspace program's inputs for tests beside an
	// empty main, and sets j.test or notes that they were not run.
	tests func(j *job, in *inputs)
	// options is the allowlist of a run's build options (options.go); nil:
	// the language takes none.
	options *optionPolicy
	// testCases parses a test run's stdout (a program built as its tests).
	testCases func(out string) []kiln.TestCase
	build     func(*job) step
	run       func(*job) step
	parse     func(log string) []kiln.Diagnostic
}

// job is one build and run, as the steps need it.
type job struct {
	l          *langdef.Language
	tc         *Toolchain
	root       string   // the workspace as programs see it
	area       string   // the build area as programs see it (BuildArea)
	dir        string   // the entry's directory, relative to the workspace ("." for the top)
	entry      string   // the entry, relative to dir; "" for a cell's code
	code       *code    // the source the compiler reads from the build area, if any
	srcs       []string // the compiled files, relative to dir (or absolute), in order
	class      string   // Java: the main class
	sourcepath string   // Java: the package root, relative to dir
	out        string   // the build directory, absolute
	mem        int64    // the sandbox's memory limit
	cpus       int      // CPUs the sandbox may use, rounded up
	test       bool     // build the program's tests and run them (rustc --test, go test -c)
	goMod      bool     // Go: the entry's package is in a module of the workspace
	goVendor   bool     // Go: that module vendors its dependencies (vendor/modules.txt)
	reports    string   // Java tests: where JUnit writes this run's reports
	cache      string   // the user's build caches as programs see them (usercache.go); "" for none
	junit      bool     // Java: the entry names org.junit, so JUnit's jars are on the class path
	cargo      string   // Rust: the entry's Cargo package, relative to the workspace ("" for none; cargo.go)
	opts       []string // the run's build options, checked (CheckBuildOptions)
	notes      []kiln.Diagnostic
}

// code is a source that the compiler reads from the build area: a cell's
// code, or a Java entry whose public class is named otherwise than its
// file (javac needs the file named after the class).
type code struct {
	shown string // its name for the user: the cell's Name, or the entry's path in the workspace
	disk  string // absolute, in the build area
	data  []byte
}

// setCode makes a cell's code the program, under the name its compiler
// needs: Java's public class, Go's _test.go for tests.
func (j *job) setCode(name string, data []byte) {
	if name == "" {
		name = j.tc.entry
		if name == "" {
			name = "main" + j.l.Ext
		}
		if j.is(Java) {
			name = javaClassName(data, "Main") + ".java"
		}
	}
	disk := name
	switch {
	case j.is(Java):
		disk = javaClassName(data, strings.TrimSuffix(name, ".java")) + ".java"
	case j.is(Go):
		j.test, j.notes = goTests(name, [][]byte{data}, nil, name)
		if j.test && !strings.HasSuffix(disk, "_test.go") {
			disk = strings.TrimSuffix(disk, ".go") + "_test.go"
		}
	case j.is(Rust):
		j.test, j.notes = rustTests(data, name)
	}
	if j.is(Java) {
		j.test, j.notes = javaTests(data, name, false)
		j.junit = usesJUnit(data)
	}
	j.code = &code{shown: name, disk: j.codePath(disk, data), data: data}
}

// codePath is where a source lives in the build area: named by its content,
// so that two cells never share a file and the cache key covers it.
func (j *job) codePath(name string, data []byte) string {
	h := sha256.New()
	h.Write([]byte(name))
	h.Write([]byte{0})
	h.Write(data)
	return path.Join(j.area, "src", hex.EncodeToString(h.Sum(nil))[:24], name)
}

// shown is the program's name for messages.
func (j *job) shown() string {
	if j.code != nil {
		return j.code.shown
	}
	return path.Join(j.dir, j.entry)
}

// entryArg is the entry as the compiler is told it.
func (j *job) entryArg() string {
	if j.code != nil {
		return j.code.disk
	}
	return j.entry
}

// unbuild rewrites a compiler's output so that it names the user's files,
// not the build area: the code's path becomes its shown name.
func (j *job) unbuild(log string) string {
	if j.code == nil {
		return log
	}
	base := path.Base(j.code.disk)
	log = strings.ReplaceAll(log, j.code.disk, j.code.shown)
	log = strings.ReplaceAll(log, "./"+base+":", j.code.shown+":") // go, with -C
	return strings.ReplaceAll(log, path.Dir(j.code.disk)+"/", "")
}

// execDir is the working directory of both steps: the entry's directory.
func (j *job) execDir() string {
	if j.dir == "." {
		return ""
	}
	return j.dir
}

func (j *job) bin() string { return path.Join(j.out, "main") }

// is reports whether the job's language is built by tc: the few steps
// that differ by language ask this, never the language's name.
func (j *job) is(tc *Toolchain) bool { return j.l.Toolchain == langdef.Toolchain(tc) }

func (tc *Toolchain) isSource(name string) bool {
	return slices.ContainsFunc(tc.sources, func(ext string) bool { return strings.HasSuffix(name, ext) })
}

// isInput reports whether the build may read a file of this name.
func (tc *Toolchain) isInput(name string) bool {
	return tc.isSource(name) || slices.ContainsFunc(tc.headers, func(h string) bool {
		return strings.HasSuffix(name, h) && (strings.HasPrefix(h, ".") || name == h)
	})
}

// The toolchains of the program languages, for the registry's entries.
var (
	C = &Toolchain{
		headers:   []string{".h", ".inc"},
		scope:     tree,
		cellReads: headerOf(".h", ".inc"),
		options:   gccOptions,
		build:     gcc("-std=gnu17", "-lm"),
		run:       runBinary,
		parse:     parseGCC,
	}
	CPP = &Toolchain{
		headers:   []string{".h", ".hpp", ".hh", ".hxx", ".h++", ".inl", ".ipp", ".tpp", ".inc"},
		scope:     tree,
		cellReads: headerOf(".h", ".hpp", ".hh", ".hxx", ".h++", ".inl", ".ipp", ".tpp", ".inc"),
		options:   gccOptions,
		build:     gcc("-std=gnu++20"),
		run:       runBinary,
		parse:     parseGCC,
	}
	Fortran = &Toolchain{
		headers:   []string{".inc", ".h"},
		scope:     tree,
		cellReads: headerOf(".inc", ".h"),
		order:     fortranOrder,
		options:   gccOptions,
		build: func(j *job) step {
			// -J puts the .mod files of modules in the build directory, not
			// among the user's files.
			argv := []string{j.l.Binary, "-O2", "-Wall", "-fdiagnostics-color=never", "-fdiagnostics-urls=never", "-pipe", "-J", j.out, "-o", j.bin()}
			if j.code != nil {
				argv = append(argv, "-I", path.Join(j.root, j.dir), "-ffile-prefix-map="+path.Dir(j.code.disk)+"/=")
			}
			flags, libs := splitLibs(j.opts)
			return step{argv: append(append(append(argv, flags...), j.srcs...), libs...)}
		},
		run:   runBinary,
		parse: parseGCC,
	}
	Go = &Toolchain{
		// modules.txt: a vendored module's list, which go checks against
		// go.mod; the vendored sources are .go files of the tree.
		headers:   []string{"go.mod", "go.sum", "go.work", "modules.txt"},
		scope:     tree,
		prepare:   goMod,
		tests:     goPackageTests,
		options:   goOptions,
		testCases: parseGoTests,
		build: func(j *job) step {
			n := strconv.Itoa(j.cpus)
			argv := []string{j.l.Binary, "build"}
			if j.test {
				argv = []string{j.l.Binary, "test", "-c"}
			}
			if j.code != nil {
				// -C must come first: the code is built in its own
				// directory, outside any module of the workspace.
				argv = append(argv[:2], append([]string{"-C", path.Dir(j.code.disk)}, argv[2:]...)...)
			}
			// -p and GOMAXPROCS keep the compiler's processes and threads
			// near the CPUs it has (the pids limit counts threads); a
			// second thread for the collector made a cold build faster
			// in measurements (12 s against 19 s on one CPU).
			argv = append(append(argv, "-p", n, "-buildvcs=false", "-o", j.bin()), j.opts...)
			switch {
			case j.code != nil:
				argv = append(argv, path.Base(j.code.disk))
			case j.goMod:
				argv = append(argv, ".")
			default:
				// No module: the package's files by name, as "go run *.go"
				// takes them (the standard library only).
				for _, f := range j.srcs {
					if j.test || !strings.HasSuffix(f, "_test.go") {
						argv = append(argv, f)
					}
				}
			}
			return step{
				argv: argv,
				env: []string{
					// The build cache lasts with the sandbox: only the first
					// build of a session compiles the standard library.
					"GOCACHE=" + goCache(j),
					"GOPATH=" + path.Join(j.area, "go/path"),
					// go's telemetry and `go env -w` file, out of the user's way.
					"XDG_CONFIG_HOME=" + path.Join(j.area, "config"),
					"GOPROXY=off", "GOSUMDB=off", "GOTOOLCHAIN=local", "GO111MODULE=on", "GOFLAGS=" + goModFlag(j),
					"CGO_ENABLED=0", "GOTELEMETRY=off", "GOMAXPROCS=" + strconv.Itoa(max(2, j.cpus)),
				},
			}
		},
		run: func(j *job) step {
			// Go cannot read the cgroup's limits from inside the sandbox.
			argv := []string{j.bin()}
			if j.test {
				// Each test's end on a line of its own, passed ones too,
				// for the structured results (parseGoTests).
				argv = append(argv, "-test.v")
			}
			return step{argv: argv, env: []string{
				"GOMAXPROCS=" + strconv.Itoa(j.cpus),
				"GOMEMLIMIT=" + strconv.FormatInt(j.mem/4*3/kiln.MiB, 10) + "MiB",
			}}
		},
		parse: parseGo,
	}
	Java = &Toolchain{
		entry:     "Main.java",
		scope:     tree,
		cellReads: func(name string) bool { return strings.HasSuffix(name, ".java") },
		options:   javaOptions,
		tests: func(j *job, in *inputs) {
			src := in.files[path.Join(j.dir, j.entry)]
			j.test, j.notes = javaTests(src, path.Join(j.dir, j.entry), false)
			j.junit = usesJUnit(src)
		},
		build: func(j *job) step {
			var argv []string
			for _, f := range append(jvm(j), "-XX:TieredStopAtLevel=1") {
				argv = append(argv, "-J"+f)
			}
			argv = append([]string{j.l.Binary}, argv...)
			argv = append(argv, "-encoding", "UTF-8", "-d", j.out, "-sourcepath", j.sourcepath)
			if j.test || j.junit {
				argv = append(argv, "-cp", junitClasspath())
			}
			return step{argv: append(append(argv, j.opts...), j.entryArg())}
		},
		run: func(j *job) step {
			if j.test {
				return junitRun(j)
			}
			argv := append([]string{path.Join(path.Dir(j.l.Binary), "java")}, jvm(j)...)
			cp := j.out
			if j.junit {
				cp += ":" + junitClasspath()
			}
			return step{argv: append(argv, "-XX:MaxRAMPercentage=50",
				"-Dfile.encoding=UTF-8", "-Dsun.stdout.encoding=UTF-8", "-Dsun.stderr.encoding=UTF-8",
				"-cp", cp, j.class)}
		},
		parse: parseJavac,
	}
	PHP = &Toolchain{
		scope: entryOnly,
		build: func(j *job) step {
			return step{argv: append(append([]string{j.l.Binary}, phpINI(j)...), "-l", j.entryArg())}
		},
		run: func(j *job) step {
			return step{argv: append(append([]string{j.l.Binary}, phpINI(j)...), j.entryArg())}
		},
		parse: parsePHP,
	}
	Ruby = &Toolchain{
		scope: entryOnly,
		build: func(j *job) step { return step{argv: []string{j.l.Binary, "-wc", j.entryArg()}} },
		run:   func(j *job) step { return step{argv: []string{j.l.Binary, j.entryArg()}} },
		parse: parseRuby,
	}
	Rust = &Toolchain{
		scope:     tree,
		prepare:   cargoProject,
		options:   rustOptions,
		testCases: parseRustTests,
		tests: func(j *job, in *inputs) {
			j.test, j.notes = rustTests(in.files[path.Join(j.dir, j.entry)], path.Join(j.dir, j.entry))
		},
		build: func(j *job) step {
			if j.cargo != "" {
				return cargoBuild(j)
			}
			// Optimized, but integer overflow still panics with its line.
			argv := []string{j.l.Binary, "--edition", "2021", "-O", "-C", "overflow-checks=on",
				"-C", "strip=debuginfo", "--color", "never"}
			if j.test {
				argv = append(argv, "--test")
			}
			if j.code != nil {
				// Panics and diagnostics name the file, not the build area.
				argv = append(argv, "--remap-path-prefix="+path.Dir(j.code.disk)+"/=")
			}
			return step{argv: append(append(argv, j.opts...), "-o", j.bin(), j.entryArg())}
		},
		run: func(j *job) step {
			if j.cargo != "" {
				return cargoRun(j)
			}
			return runBinary(j)
		},
		parse: parseRustc,
	}
)

// Problems lists what the toolchain lacks to build and run l's programs
// (langdef.Toolchain; the registry's Check calls it).
func (tc *Toolchain) Problems(l *langdef.Language) []string {
	if tc.build == nil || tc.run == nil || tc.parse == nil {
		return []string{"its toolchain lacks a build, run or parse step"}
	}
	return nil
}

var _ langdef.Toolchain = (*Toolchain)(nil)

// gcc is the build of gcc and g++: every source of the directory.
func gcc(std string, libs ...string) func(*job) step {
	return func(j *job) step {
		argv := []string{j.l.Binary, std, "-O2", "-Wall", "-fdiagnostics-color=never", "-fdiagnostics-urls=never", "-pipe", "-o", j.bin()}
		if j.code != nil {
			// The code's own directory is the build area: its headers are
			// found in the workspace, as a compiler there would, and
			// __FILE__ (assert's message) names the file, not the area.
			argv = append(argv, "-iquote", path.Join(j.root, j.dir), "-ffile-prefix-map="+path.Dir(j.code.disk)+"/=")
		}
		flags, own := splitLibs(j.opts)
		return step{argv: append(append(append(append(argv, flags...), j.srcs...), own...), libs...)}
	}
}

func runBinary(j *job) step { return step{argv: []string{j.bin()}} }

// jvm are the JVM's flags: it cannot see the sandbox's limits, so it is told
// them, and the serial collector keeps its threads few (the pids limit counts
// threads).
func jvm(j *job) []string {
	return []string{
		"-XX:+UseSerialGC", "-XX:-UsePerfData",
		"-XX:MaxRAM=" + strconv.FormatInt(j.mem, 10),
		"-XX:ActiveProcessorCount=" + strconv.Itoa(j.cpus),
	}
}

// phpINI makes PHP behave the same with or without a php.ini (the sandbox
// has none): errors on stderr, once, and a memory limit below the sandbox's.
func phpINI(j *job) []string {
	return []string{
		"-d", "display_errors=stderr", "-d", "log_errors=0", "-d", "html_errors=0",
		"-d", "error_reporting=E_ALL",
		"-d", "memory_limit=" + strconv.FormatInt(j.mem/4*3/kiln.MiB, 10) + "M",
	}
}

// headerOf accepts the file names with one of these extensions.
func headerOf(exts ...string) func(string) bool {
	return func(name string) bool {
		return slices.ContainsFunc(exts, func(e string) bool { return strings.HasSuffix(name, e) })
	}
}

// goMod finds whether the entry's package is in a module: a go.mod in its
// directory or above. Nothing is written: without one, the package's files
// are built by name.
func goMod(ctx context.Context, ex Execer, j *job, known map[string][]byte) error {
	exists := func(p string) bool {
		if _, ok := known[p]; ok {
			return true
		}
		fi, err := ex.Stat(ctx, p)
		return err == nil && fi.Type == "file"
	}
	for d := j.dir; ; d = path.Dir(d) {
		if exists(path.Join(d, "go.mod")) {
			j.goMod = true
			j.goVendor = exists(path.Join(d, "vendor/modules.txt"))
			return nil
		}
		if d == "." {
			return nil
		}
	}
}

// goModFlag is how go treats the module's dependencies: from vendor/ when
// the module vendors them (offline, as go does by default there), else
// only what go.mod and go.sum already say (GOPROXY is off: nothing is
// fetched).
func goModFlag(j *job) string {
	if j.goVendor {
		return "-mod=vendor"
	}
	return "-mod=readonly"
}

// GoCacheSeed is a Go build cache of commonly used standard packages that
// kiln's install step (scripts/deps) builds with the same settings as the
// go toolchain above. It lies under /usr, so sandboxes see it read-only.
const GoCacheSeed = "/usr/local/lib/kiln/go-cache"

// seedGoCache copies GoCacheSeed into a sandbox's empty build cache: the
// first Go build of a session then compiles only the program (about 0.3 s)
// instead of the standard library too (8 CPU-seconds, often over the
// time limit on a busy machine). Go cannot use a read-only cache, and the
// copy takes the room a cold build would fill anyway (about 40 MB).
func seedGoCache(ctx context.Context, ex Execer, j *job) error {
	cache := goCache(j)
	if _, ok, err := areaRead(ctx, ex, path.Join(cache, "README")); err != nil || ok {
		return err
	}
	if _, err := os.Stat(path.Join(GoCacheSeed, "README")); err != nil {
		return nil // not installed: the first build is a cold one
	}
	// The copy goes to a directory of its own and is renamed into place,
	// which works only while the cache is missing or empty: two sandboxes
	// of a user seeding at once used to copy into the same files, so one
	// truncated and rewrote cache files the other's go was reading (a
	// cold batch of Go items failed now and then with "package
	// internal/filepathlite is not in std"). The loser drops its copy and
	// uses the winner's. A failed or partial copy is dropped too: Go
	// rebuilds what is missing, so only a broken sandbox is an error here.
	var b [8]byte
	rand.Read(b[:])
	tmp := cache + ".seed-" + hex.EncodeToString(b[:])
	cp := cpBin + ` -R -T "$1" "$2"`
	if j.cache != "" {
		cp = cpBin + ` -R -T --no-preserve=mode "$1" "$2"`
	}
	argv := []string{"/bin/sh", "-c", cp + ` && mv -T "$2" "$3" 2>/dev/null; rm -rf "$2"`, "sh", GoCacheSeed, tmp, cache}
	if j.cache != "" {
		argv = shared(argv)
	}
	_, err := areaExec(ctx, ex, argv, nil, nil)
	return err
}

// Tests beside an empty main. A file whose checks are test functions and
// whose main does nothing must not pass silently: it is built as its tests.
var (
	rustTest      = lazyRE(`#\[\s*test\s*\]`)
	rustMain      = lazyRE(`\bfn\s+main\s*\(\s*\)`)
	rustEmptyMain = lazyRE(`\bfn\s+main\s*\(\s*\)\s*\{(?:\s|//[^\n]*\n|/\*(?s:.*?)\*/)*\}`)
	goTest        = lazyRE(`(?m)^func\s+(?:Test|Example|Fuzz)\w*\s*\(`)
	goMain        = lazyRE(`(?m)^func\s+main\s*\(\s*\)`)
	goEmptyMain   = lazyRE(`(?m)^func\s+main\s*\(\s*\)\s*\{(?:\s|//[^\n]*\n|/\*(?s:.*?)\*/)*\}`)
)

// testsOrNote decides from what a program has: its tests run when its main
// is missing or empty; otherwise a warning says they were not run.
func testsOrNote(hasTests, hasMain, emptyMain bool, file, what, how string) (bool, []kiln.Diagnostic) {
	switch {
	case !hasTests:
		return false, nil
	case !hasMain || emptyMain:
		return true, nil
	}
	return false, []kiln.Diagnostic{{File: file, Severity: "warning",
		Message: "the " + what + " were not run: main has a body, so main ran; to run the tests instead, leave main empty (" + how + ")"}}
}

// rustTests looks at a Rust crate root for #[test] functions.
func rustTests(src []byte, file string) (bool, []kiln.Diagnostic) {
	return testsOrNote(rustTest.Match(src), rustMain.Match(src), rustEmptyMain.Match(src), file, "#[test] functions", "fn main() {}")
}

// goTests looks at a Go package's files: tests are in _test.go files or, for
// a cell, in its code; main is in the others. A _test.go entry always runs
// its tests.
func goTests(entry string, srcs, testSrcs [][]byte, file string) (bool, []kiln.Diagnostic) {
	if strings.HasSuffix(entry, "_test.go") {
		return true, nil
	}
	hasTests, hasMain, empty := false, false, false
	for _, b := range srcs {
		hasTests = hasTests || goTest.Match(b) && bytes.Contains(b, []byte(`"testing"`))
		hasMain = hasMain || goMain.Match(b)
		empty = empty || goEmptyMain.Match(b)
	}
	for _, b := range testSrcs {
		hasTests = hasTests || goTest.Match(b)
	}
	return testsOrNote(hasTests, hasMain, empty, file, "Test functions", "func main() {}")
}

// goPackageTests looks at the entry's package in the workspace.
func goPackageTests(j *job, in *inputs) {
	var srcs, tests [][]byte
	for _, f := range in.srcs {
		data := in.files[path.Join(j.dir, f)]
		if strings.HasSuffix(f, "_test.go") {
			tests = append(tests, data)
		} else {
			srcs = append(srcs, data)
		}
	}
	j.test, j.notes = goTests(j.entry, srcs, tests, path.Join(j.dir, j.entry))
}

// javaPublic finds the top-level public type, which javac wants in a file
// of its name.
var javaPublic = lazyRE(`(?m)^[ \t]*public\s+(?:(?:final|abstract|sealed|non-sealed|strictfp)\s+)*(?:class|interface|enum|record|@interface)\s+([\p{L}_$][\p{L}\p{N}_$]*)`)

// javaClassName is the name of src's public type, or def.
func javaClassName(src []byte, def string) string {
	if m := javaPublic.FindSubmatch(src); m != nil {
		return string(m[1])
	}
	return def
}

var goVersions sync.Map // binary -> "1.26"

// goVersion is the language version of the Go installation of binary
// (bin/go), from its VERSION file: go1.26.8 is "1.26".
func goVersion(binary string) string {
	if v, ok := goVersions.Load(binary); ok {
		return v.(string)
	}
	b, _ := os.ReadFile(filepath.Join(filepath.Dir(filepath.Dir(binary)), "VERSION"))
	first, _, _ := strings.Cut(string(b), "\n")
	v := ""
	if rest, ok := strings.CutPrefix(strings.TrimSpace(first), "go"); ok {
		parts := strings.SplitN(rest, ".", 3)
		if len(parts) >= 2 {
			v = parts[0] + "." + parts[1]
		}
	}
	goVersions.Store(binary, v)
	return v
}
