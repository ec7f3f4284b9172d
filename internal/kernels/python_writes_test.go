package kernels

import (
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/kiln-dev/kiln/internal/kernels/kerneltest"
)

// TestPythonCellWritesOnce: a warm `1+1` reaches the agent in one write,
// its execute_result and its done together (one wake-up of the agent per
// cell), and both still arrive, in order. Counted from /proc/PID/io.
func TestPythonCellWritesOnce(t *testing.T) {
	spec := Python()
	if _, err := os.Stat(spec.Argv[0]); err != nil {
		t.Skipf("%s not installed: %v", spec.Argv[0], err)
	}
	argv, payload := spec.Boot()
	k := kerneltest.StartBoot(t, argv, spec.Env, payload, t.TempDir())
	writes := func() int {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(k.Cmd.Process.Pid) + "/io")
		if err != nil {
			t.Skipf("no write counts: %v", err)
		}
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "syscw: "); ok {
				n, _ := strconv.Atoi(v)
				return n
			}
		}
		t.Skip("no syscw in /proc/PID/io")
		return 0
	}
	k.Exec("1+1") // the first cell imports what cells need
	const cells = 20
	before := writes()
	for range cells {
		r := k.Exec("1+1")
		if r.Status != "ok" || len(r.Results) != 1 || text(t, r.Results[0]) != "2" {
			t.Fatalf("cell: status %s results %+v error %+v", r.Status, r.Results, r.Error)
		}
	}
	if n := writes() - before; n != cells {
		t.Errorf("%d writes for %d warm cells, want one each", n, cells)
	}
}
