package programs

import (
	"strings"
	"testing"

	"github.com/kiln-dev/kiln/internal/kiln"
)

func TestBuildOptionsAllowlist(t *testing.T) {
	ok := map[string][][]string{
		"cpp":     {{"-O2"}, {"-std=c++17"}, {"-lcrypto"}, {"-Wall", "-Wextra", "-Werror=format"}, {"-DNAME=1"}, {"-D", "N"}, {"-fno-exceptions"}, {"-march=native"}, {"-I", "inc"}, {"-I/usr/include/x"}, {"-pthread"}},
		"c":       {{"-O0"}, {"-g"}, {"-std=c11"}, {"-lm"}, {"-UDEBUG"}},
		"fortran": {{"-std=f2008"}, {"-ffree-form"}},
		"rust":    {{"-C", "opt-level=2"}, {"-Copt-level=3"}, {"--edition", "2018"}, {"--cfg", "fast"}, {"-A", "dead_code"}, {"-lcrypto"}},
		"go":      {{"-tags=fast,x"}, {"-trimpath"}},
		"java":    {{"-Xlint:all"}, {"--release", "17"}, {"-g"}},
	}
	for language, cases := range ok {
		for _, opts := range cases {
			if _, err := CheckBuildOptions(lng(language), opts); err != nil {
				if kiln.KindOf(err) == kiln.Unsupported {
					continue // the toolchain is not installed here
				}
				t.Errorf("%s %q: %v; want it allowed", language, opts, err)
			}
		}
	}
	refused := map[string][][]string{
		"cpp": {{"-o", "/tmp/x"}, {"-o/etc/passwd"}, {"-fplugin=/tmp/p.so"}, {"-specs=/tmp/s"}, {"-B/tmp"}, {"-B", "/tmp"},
			{"-wrapper", "/bin/sh"}, {"@/etc/args"}, {"-I/etc"}, {"-L/home"}, {"-I", "../.."}, {"-Wl,-T,/etc/x"}, {"-Wa,-a=/tmp/x"},
			{"-include", "/etc/passwd"}, {"-fprofile-generate"}, {"-fdump-tree-all"}, {"-save-temps"}, {"-l/etc/x"}, {"-l:libx.a"},
			{"--sysroot=/"}, {"-fmodule-mapper=|sh"}, {"-MF/tmp/x"}, {"-x", "c"}, {"-Xlinker", "-T"}},
		"rust": {{"-o", "x"}, {"-C", "linker=/bin/sh"}, {"-C", "link-arg=-Wl,-T"}, {"-Z", "unstable-options"}, {"--extern", "x=/tmp/x.rlib"},
			{"--emit=obj=/tmp/x"}, {"-L/tmp"}, {"@args"}},
		"go":   {{"-o", "x"}, {"-toolexec=/bin/sh"}, {"-gcflags=-importcfg=/tmp/x"}, {"-modfile=/tmp/go.mod"}, {"-overlay=/tmp/o.json"}},
		"java": {{"-processorpath", "/tmp"}, {"-Xplugin:X"}, {"-d", "/tmp"}, {"-J-Xmx1g"}, {"@args"}, {"-cp", "/"}},
		"ruby": {{"-O2"}},
	}
	for language, cases := range refused {
		for _, opts := range cases {
			_, err := CheckBuildOptions(lng(language), opts)
			if kiln.KindOf(err) == kiln.Unsupported {
				continue
			}
			if kiln.KindOf(err) != kiln.Invalid || !strings.Contains(kiln.Message(err), "allowed") {
				t.Errorf("%s %q: %v; want an Invalid error that names what is allowed", language, opts, err)
				continue
			}
			if language != "ruby" && !strings.Contains(kiln.Message(err), strings.Fields(opts[0])[0][:2]) {
				t.Errorf("%s %q: %q does not name the refused option", language, opts, kiln.Message(err))
			}
		}
	}
	many := make([]string, MaxBuildOptions+1)
	for i := range many {
		many[i] = "-O2"
	}
	if _, err := CheckBuildOptions(lng("c"), many); kiln.KindOf(err) != kiln.TooLarge && kiln.KindOf(err) != kiln.Unsupported {
		t.Errorf("%d options: %v; want TooLarge", len(many), err)
	}
}
