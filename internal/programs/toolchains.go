package programs

import (
	"context"
	"io"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/kiln-dev/kiln/internal/kiln"
	"github.com/kiln-dev/kiln/internal/lang"
	"github.com/kiln-dev/kiln/internal/protocol"
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

// toolchain says how one language builds and runs a program. The table is
// the policy a reviewer reads: every flag of every compiler is here.
type toolchain struct {
	entry   string   // the default entry when it is not main<ext>
	sources []string // extensions of the files the build compiles, case-sensitive
	headers []string // extensions or exact names of other files the build reads
	scope   scope
	// order reorders the compiled files, which come sorted by name with the
	// entry last; contents has those of them that were read, by name.
	order func(srcs []string, contents map[string][]byte) []string
	// prepare runs before the inputs are gathered (Go writes its go.mod).
	prepare func(ctx context.Context, ex Execer, j *job, known map[string][]byte) error
	build   func(*job) step
	run     func(*job) step
	parse   func(log string) []kiln.Diagnostic
}

// job is one build and run, as the steps need it.
type job struct {
	l          *lang.Language
	tc         *toolchain
	root       string   // the workspace as programs see it
	dir        string   // the entry's directory, relative to the workspace ("." for the top)
	entry      string   // the entry, relative to dir
	srcs       []string // the compiled files, relative to dir, in order
	class      string   // Java: the main class
	sourcepath string   // Java: the package root, relative to dir
	out        string   // the build directory, absolute
	mem        int64    // the sandbox's memory limit
	cpus       int      // CPUs the sandbox may use, rounded up
}

// execDir is the working directory of both steps: the entry's directory.
func (j *job) execDir() string {
	if j.dir == "." {
		return ""
	}
	return j.dir
}

func (j *job) bin() string { return path.Join(j.out, "main") }

func (tc *toolchain) isSource(name string) bool {
	return slices.ContainsFunc(tc.sources, func(ext string) bool { return strings.HasSuffix(name, ext) })
}

// isInput reports whether the build may read a file of this name.
func (tc *toolchain) isInput(name string) bool {
	return tc.isSource(name) || slices.ContainsFunc(tc.headers, func(h string) bool {
		return strings.HasSuffix(name, h) && (strings.HasPrefix(h, ".") || name == h)
	})
}

var toolchains = map[string]*toolchain{
	"c": {
		sources: []string{".c"},
		headers: []string{".h", ".inc"},
		scope:   tree,
		build:   gcc("-std=gnu17", "-lm"),
		run:     runBinary,
		parse:   parseGCC,
	},
	"cpp": {
		sources: []string{".cpp", ".cc", ".cxx", ".c++", ".C"},
		headers: []string{".h", ".hpp", ".hh", ".hxx", ".h++", ".inl", ".ipp", ".tpp", ".inc"},
		scope:   tree,
		build:   gcc("-std=gnu++20"),
		run:     runBinary,
		parse:   parseGCC,
	},
	"fortran": {
		sources: []string{".f90", ".f95", ".f03", ".f08", ".f", ".for", ".F90", ".F95", ".F03", ".F08", ".F"},
		headers: []string{".inc", ".h"},
		scope:   tree,
		order:   fortranOrder,
		build: func(j *job) step {
			// -J puts the .mod files of modules in the build directory, not
			// among the user's files.
			argv := []string{j.l.Binary, "-O2", "-Wall", "-fdiagnostics-color=never", "-fdiagnostics-urls=never", "-pipe", "-J", j.out, "-o", j.bin()}
			return step{argv: append(argv, j.srcs...)}
		},
		run:   runBinary,
		parse: parseGCC,
	},
	"go": {
		sources: []string{".go"},
		headers: []string{"go.mod", "go.sum", "go.work"},
		scope:   tree,
		prepare: goMod,
		build: func(j *job) step {
			n := strconv.Itoa(j.cpus)
			return step{
				// -p and GOMAXPROCS keep the compiler's processes and threads
				// near the CPUs it has (the pids limit counts threads); a
				// second thread for the collector made a cold build faster
				// in measurements (12 s against 19 s on one CPU).
				argv: []string{j.l.Binary, "build", "-p", n, "-buildvcs=false", "-o", j.bin(), "."},
				env: []string{
					// The build cache lasts with the workspace: only the first
					// build of a session compiles the standard library.
					"GOCACHE=" + path.Join(j.root, ".kiln/go/cache"),
					"GOPATH=" + path.Join(j.root, ".kiln/go/path"),
					// go's telemetry and `go env -w` file, out of the user's way.
					"XDG_CONFIG_HOME=" + path.Join(j.root, ".kiln/config"),
					"GOPROXY=off", "GOSUMDB=off", "GOTOOLCHAIN=local", "GO111MODULE=on",
					"CGO_ENABLED=0", "GOTELEMETRY=off", "GOMAXPROCS=" + strconv.Itoa(max(2, j.cpus)),
				},
			}
		},
		run: func(j *job) step {
			// Go cannot read the cgroup's limits from inside the sandbox.
			return step{argv: []string{j.bin()}, env: []string{
				"GOMAXPROCS=" + strconv.Itoa(j.cpus),
				"GOMEMLIMIT=" + strconv.FormatInt(j.mem/4*3/kiln.MiB, 10) + "MiB",
			}}
		},
		parse: parseGo,
	},
	"java": {
		entry:   "Main.java",
		sources: []string{".java"},
		scope:   tree,
		build: func(j *job) step {
			var argv []string
			for _, f := range append(jvm(j), "-XX:TieredStopAtLevel=1") {
				argv = append(argv, "-J"+f)
			}
			argv = append([]string{j.l.Binary}, argv...)
			return step{argv: append(argv, "-encoding", "UTF-8", "-d", j.out, "-sourcepath", j.sourcepath, j.entry)}
		},
		run: func(j *job) step {
			argv := append([]string{path.Join(path.Dir(j.l.Binary), "java")}, jvm(j)...)
			return step{argv: append(argv, "-XX:MaxRAMPercentage=50",
				"-Dfile.encoding=UTF-8", "-Dsun.stdout.encoding=UTF-8", "-Dsun.stderr.encoding=UTF-8",
				"-cp", j.out, j.class)}
		},
		parse: parseJavac,
	},
	"php": {
		sources: []string{".php"},
		scope:   entryOnly,
		build: func(j *job) step {
			return step{argv: append(append([]string{j.l.Binary}, phpINI(j)...), "-l", j.entry)}
		},
		run: func(j *job) step {
			return step{argv: append(append([]string{j.l.Binary}, phpINI(j)...), j.entry)}
		},
		parse: parsePHP,
	},
	"ruby": {
		sources: []string{".rb"},
		scope:   entryOnly,
		build:   func(j *job) step { return step{argv: []string{j.l.Binary, "-wc", j.entry}} },
		run:     func(j *job) step { return step{argv: []string{j.l.Binary, j.entry}} },
		parse:   parseRuby,
	},
	"rust": {
		sources: []string{".rs"},
		scope:   tree,
		build: func(j *job) step {
			// Optimized, but integer overflow still panics with its line.
			return step{argv: []string{j.l.Binary, "--edition", "2021", "-O", "-C", "overflow-checks=on",
				"-C", "strip=debuginfo", "--color", "never", "-o", j.bin(), j.entry}}
		},
		run:   runBinary,
		parse: parseRustc,
	},
}

// gcc is the build of gcc and g++: every source of the directory.
func gcc(std string, libs ...string) func(*job) step {
	return func(j *job) step {
		argv := []string{j.l.Binary, std, "-O2", "-Wall", "-fdiagnostics-color=never", "-fdiagnostics-urls=never", "-pipe", "-o", j.bin()}
		return step{argv: append(append(argv, j.srcs...), libs...)}
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

// goMod gives a cell without a module one: "module main" at the installed
// Go's language version.
func goMod(ctx context.Context, ex Execer, j *job, known map[string][]byte) error {
	if err := seedGoCache(ctx, ex, j); err != nil {
		return err
	}
	for d := j.dir; ; d = path.Dir(d) {
		if _, ok := known[path.Join(d, "go.mod")]; ok {
			return nil
		}
		if _, err := ex.Stat(ctx, path.Join(d, "go.mod")); err == nil {
			return nil
		}
		if d == "." {
			break
		}
	}
	mod := []byte("module main\n")
	if v := goVersion(j.l.Binary); v != "" {
		mod = append(mod, "\ngo "+v+"\n"...)
	}
	p := path.Join(j.dir, "go.mod")
	if err := ex.WriteFile(ctx, p, mod, 0o644); err != nil {
		return kiln.Wrap(kiln.Invalid, err, "cannot write %s: %v", p, err)
	}
	known[p] = mod
	return nil
}

// GoCacheSeed is a Go build cache of commonly used standard packages that
// kiln's install step (scripts/deps) builds with the same settings as the
// go toolchain above. It lies under /usr, so sandboxes see it read-only.
const GoCacheSeed = "/usr/local/lib/kiln/go-cache"

// seedGoCache copies GoCacheSeed into a session's empty build cache: the
// first Go build of a session then compiles only the program (about 0.3 s)
// instead of the standard library too (8 CPU-seconds, often over the
// time limit on a busy machine). Go cannot use a read-only cache, and the
// copy takes the room a cold build would fill anyway (about 40 MB).
func seedGoCache(ctx context.Context, ex Execer, j *job) error {
	cache := path.Join(j.root, ".kiln/go/cache")
	if _, err := ex.Stat(ctx, path.Join(hostRelative(j, cache), "README")); err == nil {
		return nil
	}
	if _, err := os.Stat(path.Join(GoCacheSeed, "README")); err != nil {
		return nil // not installed: the first build is a cold one
	}
	if err := ex.Mkdir(ctx, hostRelative(j, path.Dir(cache))); err != nil {
		return err
	}
	// A failed or partial copy is still a valid cache: Go rebuilds what is
	// missing, so only a broken sandbox is an error here.
	_, err := ex.Exec(ctx, protocol.Exec{
		Argv:        []string{"/bin/cp", "-R", GoCacheSeed, cache},
		TimeoutMs:   60_000,
		OutputBytes: 64 << 10,
	}, io.Discard, io.Discard)
	return err
}

// hostRelative turns an absolute path under the job's root into the
// workspace-relative form the Execer's file operations take.
func hostRelative(j *job, p string) string {
	rel := strings.TrimPrefix(strings.TrimPrefix(p, j.root), "/")
	if rel == "" {
		return "."
	}
	return rel
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
