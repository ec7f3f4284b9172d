package programs

import (
	"slices"
	"testing"

	"github.com/kiln-dev/kiln/internal/lang"
)

// TestToolchainsMatchRegistry: every program language of the registry has a
// toolchain that builds, runs and reads diagnostics, compiling the files
// with the language's extensions; there is no toolchain for a language the
// registry does not list, or lists as a REPL language.
func TestToolchainsMatchRegistry(t *testing.T) {
	if msgs := toolchainProblems(lang.All(), toolchains); len(msgs) > 0 {
		t.Errorf("toolchains and registry disagree:\n%s", msgs)
	}
}

// TestToolchainProblemsFound: the check above fails for a program language
// without a toolchain and for a toolchain without a language.
func TestToolchainProblemsFound(t *testing.T) {
	langs := append(lang.All(), lang.Language{Name: "cobol", Kind: lang.Program, Ext: ".cob"})
	tcs := map[string]*toolchain{"zig": toolchains["c"]}
	for name, tc := range toolchains {
		tcs[name] = tc
	}
	got := toolchainProblems(langs, tcs)
	for _, want := range []string{"cobol: a program language without a toolchain", "zig: a toolchain for no program language"} {
		if !slices.Contains(got, want) {
			t.Errorf("problems %q lack %q", got, want)
		}
	}
}

func toolchainProblems(langs []lang.Language, tcs map[string]*toolchain) []string {
	var msgs []string
	programs := map[string]bool{}
	for _, l := range langs {
		if l.Kind != lang.Program {
			continue
		}
		programs[l.Name] = true
		tc := tcs[l.Name]
		switch {
		case tc == nil:
			msgs = append(msgs, l.Name+": a program language without a toolchain")
		case tc.build == nil || tc.run == nil || tc.parse == nil:
			msgs = append(msgs, l.Name+": its toolchain lacks a build, run or parse step")
		case !slices.Equal(tc.sources, l.Exts()):
			msgs = append(msgs, l.Name+": its toolchain compiles other extensions than the registry's")
		}
	}
	for name := range tcs {
		if !programs[name] {
			msgs = append(msgs, name+": a toolchain for no program language")
		}
	}
	slices.Sort(msgs)
	return msgs
}
