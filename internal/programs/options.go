package programs

import (
	"path"
	"slices"
	"strings"

	"github.com/kiln-dev/kiln/internal/kiln"
	"github.com/kiln-dev/kiln/internal/langdef"
)

// Build options are a run's own compiler and linker flags (-O2, -std=c++17,
// -lcrypto). Each is checked against its toolchain's allowlist below: a
// flag may change how the code is compiled and which installed libraries it
// links, never read or write a file outside the workspace, load a plugin or
// run another program. They are part of the build's command line, so the
// cache key (inputs.key) covers them.

// MaxBuildOptions bounds the number of build options of one run.
const MaxBuildOptions = 64

// maxOptionLen bounds one build option.
const maxOptionLen = 256

// optionPolicy is a toolchain's allowlist.
type optionPolicy struct {
	// allowed says what is allowed, for the error message.
	allowed string
	// paired are the flags that may take their value as the next option
	// (-D NAME, -C opt-level=2); they are checked joined.
	paired []string
	// check reports whether one (joined) option is allowed.
	check func(opt string) bool
}

var (
	// A library or a macro: a plain name.
	libName   = lazyRE(`^-l[A-Za-z0-9_][A-Za-z0-9_+.-]*$`)
	macroDef  = lazyRE(`^-D[A-Za-z_][A-Za-z0-9_]*(?:=[^\x00-\x1f]*)?$`)
	macroUndo = lazyRE(`^-U[A-Za-z_][A-Za-z0-9_]*$`)
	gccSimple = lazyRE(`^(?:-O[0-3sgz]?|-Ofast|-g[0-3]?|-ggdb[0-3]?|-w|-pedantic|-pedantic-errors|-pthread|-static|-fPIC|-fPIE|-no-pie|-ansi)$`)
	gccStd    = lazyRE(`^-std=[a-z0-9+]+$`)
	// -Wall, -Wextra, -Wno-unused, -Werror=format: warnings only; -Wl,
	// -Wa, and -Wp, pass flags on to other programs and are not matched.
	gccWarn = lazyRE(`^-W(?:no-)?[a-z][a-z0-9-]*(?:=[a-z0-9-]+)?$`)
	// -fno-exceptions, -fsanitize=address, -fopenmp: code generation. The
	// ones that name a file or load code are refused by name (gccFRefused).
	gccF   = lazyRE(`^-f(?:no-)?[a-z][a-z0-9-]*(?:=[A-Za-z0-9_,.+-]+)?$`)
	gccM   = lazyRE(`^-m(?:no-)?[a-z0-9][a-z0-9-]*(?:=[A-Za-z0-9_,.+-]+)?$`)
	gccDir = lazyRE(`^-(?:I|L|isystem|iquote)(.+)$`)
)

// gccFRefused are the -f flags that read or write files of their own, load a
// plugin, or change where paths point.
var gccFRefused = []string{"plugin", "profile", "dump", "record", "prefix-map", "opt-info",
	"save", "stack-usage", "callgraph", "coverage", "test-coverage", "debug-prefix", "auto-profile",
	"diagnostics", "lto-", "spec", "module", "mapper", "deps", "self-test", "sanitize-coverage", "patchable", "instrument", "live-patching"}

// gccOptions is the allowlist of gcc, g++ and gfortran.
var gccOptions = &optionPolicy{
	allowed: "-O0..-O3, -Os, -Og, -Ofast, -g, -std=..., warnings (-Wall, -Wextra, -Wno-..., -Werror), " +
		"-DNAME[=VALUE], -UNAME, code generation -f... and -m... flags, -pthread, -static, -fPIC, " +
		"-lNAME (an installed library), and -I/-L/-isystem/-iquote with a folder of the workspace or under /usr",
	paired: []string{"-D", "-U", "-I", "-L", "-l", "-isystem", "-iquote"},
	check: func(o string) bool {
		switch {
		case gccSimple.MatchString(o), gccStd.MatchString(o), gccWarn.MatchString(o),
			libName.MatchString(o), macroDef.MatchString(o), macroUndo.MatchString(o), gccM.MatchString(o):
			return true
		case gccF.MatchString(o):
			return !slices.ContainsFunc(gccFRefused, func(s string) bool { return strings.Contains(o, s) })
		}
		if m := gccDir.FindStringSubmatch(o); m != nil {
			return safeDir(m[1])
		}
		return false
	},
}

// safeDir accepts a folder of the workspace (relative, staying inside it)
// or one under /usr.
func safeDir(d string) bool {
	if strings.ContainsAny(d, "\x00\n") || strings.HasPrefix(d, "-") || strings.HasPrefix(d, "=") {
		return false
	}
	if path.IsAbs(d) {
		c := path.Clean(d)
		return c == "/usr" || strings.HasPrefix(c, "/usr/")
	}
	return local(d) || path.Clean(d) == "."
}

var (
	rustSimple = lazyRE(`^(?:-O|-g|--test)$`)
	rustC      = lazyRE(`^-C(?:opt-level=[0-3sz]|debug-assertions(?:=(?:on|off|yes|no|true|false))?|overflow-checks(?:=(?:on|off|yes|no|true|false))?|target-cpu=[a-z0-9_-]+|target-feature=[a-z0-9_,.+-]+|codegen-units=[0-9]+|lto(?:=(?:fat|thin|off|on|yes|no|true|false))?|panic=(?:abort|unwind)|debuginfo=[0-2]|strip=(?:none|debuginfo|symbols))$`)
	rustEd     = lazyRE(`^--edition(?:=|)(?:2015|2018|2021|2024)$`)
	rustCfg    = lazyRE(`^--cfg(?:=|)[A-Za-z_][A-Za-z0-9_]*(?:="[A-Za-z0-9_.+-]*")?$`)
	rustLint   = lazyRE(`^-[AWDF](?:[a-z][a-z0-9_:-]*)$`)
)

// rustOptions is rustc's allowlist.
var rustOptions = &optionPolicy{
	allowed: "-O, -g, -C opt-level=N, -C debug-assertions, -C overflow-checks, -C target-cpu=..., -C codegen-units=N, " +
		"-C lto, -C panic=..., --edition YEAR, --cfg NAME, lint levels (-A/-W/-D/-F LINT), -lNAME (an installed library)",
	paired: []string{"-C", "--edition", "--cfg", "-A", "-W", "-D", "-F", "-l"},
	check: func(o string) bool {
		return rustSimple.MatchString(o) || rustC.MatchString(o) || rustEd.MatchString(o) ||
			rustCfg.MatchString(o) || rustLint.MatchString(o) || libName.MatchString(o)
	},
}

var goTags = lazyRE(`^-tags=[A-Za-z0-9_.,]+$`)

// goOptions is go build's allowlist: -gcflags and -ldflags can name files
// (-importcfg, -linkmode external), so they are not on it.
var goOptions = &optionPolicy{
	allowed: "-tags=TAG,..., -trimpath",
	check:   func(o string) bool { return o == "-trimpath" || goTags.MatchString(o) },
}

var (
	javaSimple = lazyRE(`^(?:-g|-g:none|-g:[a-z,]+|-nowarn|-Werror|-deprecation|-parameters|-Xlint|-Xlint:[a-z,-]+|-Xdoclint|-Xdoclint:[a-z,/-]+)$`)
	javaRel    = lazyRE(`^(?:--release|-source|-target)(?:=|)[0-9]{1,2}$`)
)

// javaOptions is javac's allowlist.
var javaOptions = &optionPolicy{
	allowed: "-g, -g:none, -nowarn, -Werror, -deprecation, -parameters, -Xlint[:...], --release N, -source N, -target N",
	paired:  []string{"--release", "-source", "-target"},
	check: func(o string) bool {
		return javaSimple.MatchString(o) || javaRel.MatchString(o)
	},
}

// CheckBuildOptions checks a run's build options against the allowlist of
// language's toolchain and returns them joined (-D NAME becomes -DNAME),
// as the compiler is given them. The error names the refused option and
// what is allowed.
func CheckBuildOptions(l *langdef.Language, opts []string) ([]string, error) {
	if len(opts) == 0 {
		return nil, nil
	}
	tc, ok := l.Toolchain.(*Toolchain)
	if !ok || tc == nil {
		tc = &Toolchain{}
	}
	return tc.checkOptions(l.Name, opts)
}

func (tc *Toolchain) checkOptions(name string, opts []string) ([]string, error) {
	if len(opts) == 0 {
		return nil, nil
	}
	if tc.options == nil {
		return nil, kiln.Errorf(kiln.Invalid, "%s takes no build options; they are allowed for the compiled languages (C, C++, Fortran, Go, Java, Rust)", name)
	}
	if len(opts) > MaxBuildOptions {
		return nil, kiln.Errorf(kiln.TooLarge, "%d build options given; the limit is %d", len(opts), MaxBuildOptions)
	}
	var out []string
	for i := 0; i < len(opts); i++ {
		o := opts[i]
		if slices.Contains(tc.options.paired, o) && i+1 < len(opts) {
			// rustc takes -C opt-level=2 or -Copt-level=2; gcc -D X or -DX.
			sep := ""
			if strings.HasPrefix(o, "--") {
				sep = "="
			}
			o = o + sep + opts[i+1]
			i++
		}
		if len(o) > maxOptionLen || !tc.options.check(o) {
			return nil, kiln.Errorf(kiln.Invalid, "the build option %q is not allowed for %s; allowed: %s", truncate(o, 80), name, tc.options.allowed)
		}
		out = append(out, o)
	}
	return out, nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

// splitLibs separates the libraries (-lNAME), which a linker wants after
// the objects that use them, from the other options.
func splitLibs(opts []string) (flags, libs []string) {
	for _, o := range opts {
		if strings.HasPrefix(o, "-l") {
			libs = append(libs, o)
		} else {
			flags = append(flags, o)
		}
	}
	return flags, libs
}
