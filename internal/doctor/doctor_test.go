package doctor

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"

	"github.com/kiln-dev/kiln/internal/kiln"
	"github.com/kiln-dev/kiln/internal/lang"
)

// TestReport: the report ends with a verdict line that agrees with the
// returned error; on a root host with everything (CI) the verdict is nil.
func TestReport(t *testing.T) {
	var out bytes.Buffer
	err := Report(context.Background(), &out)
	lines := strings.Split(strings.TrimRight(out.String(), "\n"), "\n")
	last := lines[len(lines)-1]
	if !strings.HasPrefix(last, "Verdict: ") {
		t.Errorf("last line %q, want a verdict", last)
	}
	if os.Geteuid() == 0 {
		if err != nil {
			t.Errorf("Report on this root host = %v, want nil\n%s", err, out.String())
		}
		if want := "Verdict: this host can run kiln sandboxes."; last != want {
			t.Errorf("last line %q, want %q", last, want)
		}
	} else {
		if kiln.KindOf(err) != kiln.Unsupported {
			t.Errorf("Report without root = %v, want an %s error", err, kiln.Unsupported)
		}
		if !strings.HasPrefix(last, "Verdict: kiln cannot run sandboxes here.") || !strings.Contains(last, "root") {
			t.Errorf("verdict without root %q, want it to say kiln cannot run here and that root is needed", last)
		}
		if !strings.Contains(out.String(), "MISSING  running as root") {
			t.Errorf("report does not mark root as missing:\n%s", out.String())
		}
	}
	for _, l := range lang.All() {
		if !strings.Contains(out.String(), " "+l.Name+" ") {
			t.Errorf("report does not mention the %s runtime:\n%s", l.Name, out.String())
		}
	}
}

// The report says whether the Docker backend can be used, and with which
// runtimes when it can.
func TestReportDocker(t *testing.T) {
	var out bytes.Buffer
	Report(context.Background(), &out)
	s := out.String()
	if !strings.Contains(s, "The Docker backend (--backend docker):") {
		t.Fatalf("no Docker section:\n%s", s)
	}
	if !strings.Contains(s, "ok       Docker engine ") && !strings.Contains(s, "absent   Docker engine: ") {
		t.Errorf("the Docker section says neither ok nor absent:\n%s", s)
	}
	if strings.Contains(s, "ok       Docker engine ") && !strings.Contains(s, "runc") {
		t.Errorf("a usable engine without its runtimes:\n%s", s)
	}
}
