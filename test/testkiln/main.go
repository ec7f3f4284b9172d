package testkiln

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// Main is an end-to-end package's TestMain: as root it builds the kiln
// binary (from ../../cmd/kiln, as the packages under test/ sit) into a
// temporary directory, sets *bin to it, runs the tests and removes the
// directory; without root it runs the tests, which skip. It returns the
// exit code for os.Exit.
func Main(m *testing.M, name string, bin *string) int {
	if os.Geteuid() != 0 {
		fmt.Println("skipping: these tests need root to make sandboxes")
		return m.Run()
	}
	dir, err := os.MkdirTemp("", "kiln-"+name+"-test")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	*bin = filepath.Join(dir, "kiln")
	build := exec.Command("go", "build", "-o", *bin, "../../cmd/kiln")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Printf("build kiln: %v\n%s", err, out)
		return 1
	}
	return m.Run()
}
