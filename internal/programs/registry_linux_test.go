package programs_test

import (
	"bytes"
	"context"
	"io"
	"testing"
	"time"

	"github.com/kiln-dev/kiln/internal/kiln"
	"github.com/kiln-dev/kiln/internal/lang"
	"github.com/kiln-dev/kiln/internal/programs"
)

// TestRegistryDrivesPrograms: programs builds and runs a language from its
// registry entry alone. An entry that exists nowhere else (C's toolchain
// under a new name) builds and runs with no other edit; an entry without a
// toolchain is refused as not a program language; every program language
// of the registry holds one of programs' toolchains.
func TestRegistryDrivesPrograms(t *testing.T) {
	for _, l := range lang.All() {
		if _, ok := l.Toolchain.(*programs.Toolchain); (l.Kind == lang.Program) != ok {
			t.Errorf("%s (%s): toolchain %T; want one of programs' for a program language and none otherwise", l.Name, l.Kind, l.Toolchain)
		}
	}
	c, err := lang.Lookup("c")
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Available(); err != nil {
		t.Skip(kiln.Message(err))
	}
	added := *c
	added.Name, added.Aliases = "c-added", nil
	src := []byte("#include <stdio.h>\nint main(void) { puts(\"built from the entry\"); return 3; }\n")
	var out bytes.Buffer
	res, err := programs.Run(context.Background(), programs.NewHostExecer(t),
		programs.Program{Language: &added, Code: src, Name: "sol.c", Timeout: time.Minute}, &out, io.Discard)
	if err != nil {
		t.Fatalf("Run of an added entry: %v", err)
	}
	if res.Phase != programs.PhaseRun || res.Exit.Code != 3 || out.String() != "built from the entry\n" {
		t.Errorf("an added entry: phase %s, exit %d, stdout %q; want run, 3, its line\ncompile log: %s", res.Phase, res.Exit.Code, out.String(), res.CompileLog)
	}

	none := *c
	none.Name, none.Toolchain = "c-without", nil
	_, err = programs.Run(context.Background(), programs.NewHostExecer(t), programs.Program{Language: &none, Code: src}, io.Discard, io.Discard)
	if kiln.KindOf(err) != kiln.Invalid || !bytes.Contains([]byte(kiln.Message(err)), []byte("not a program language")) {
		t.Errorf("an entry without a toolchain: %v; want an invalid error saying it is not a program language", err)
	}
}
