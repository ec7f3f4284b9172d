package doctor

import (
	"bytes"
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/kiln-dev/kiln/internal/backend/docker"
)

// kiln doctor says whether gVisor runs a container here. With runsc
// registered (scripts/gvisor; CI), the report must say a container runs
// under it, with gVisor's kernel; otherwise its line (the attempt's error)
// is the failure.
func TestReportGVisor(t *testing.T) {
	e := docker.Probe(context.Background())
	if e.Err != nil {
		t.Skipf("no Docker engine: %v", e.Err)
	}
	var out bytes.Buffer
	gvisorReport(context.Background(), &out, e)
	s := out.String()
	if !slices.Contains(e.Runtimes, "runsc") {
		if !strings.Contains(s, "absent   gVisor (runsc): ") {
			t.Errorf("runsc is not registered, and the report does not say so:\n%s", s)
		}
		t.Skipf("gVisor: runsc is not registered with this engine (scripts/gvisor registers it); kiln doctor says:\n%s", s)
	}
	if !strings.Contains(s, "ok       gVisor (runsc): registered") || !strings.Contains(s, "gvisor)") {
		t.Errorf("runsc is registered but kiln doctor does not report a container running under gVisor:\n%s", s)
	}
}

// The lines for runsc not registered, and registered with its binary
// gone, each say what is wrong.
func TestReportGVisorAbsentOrBroken(t *testing.T) {
	var out bytes.Buffer
	gvisorReport(context.Background(), &out, docker.Engine{Runtimes: []string{"runc"}})
	if s := out.String(); !strings.Contains(s, "absent   gVisor (runsc): ") || !strings.Contains(s, "not registered with this engine") {
		t.Errorf("without runsc registered: %q", s)
	}
	out.Reset()
	gvisorReport(context.Background(), &out, docker.Engine{Runtimes: []string{"runc", "runsc"}, RuntimePaths: map[string]string{"runsc": "/nonexistent/runsc"}})
	if s := out.String(); !strings.Contains(s, "FAILS    gVisor (runsc): registered with this engine, but its binary is missing") || !strings.Contains(s, "/nonexistent/runsc") {
		t.Errorf("with runsc's binary missing: %q", s)
	}
}
