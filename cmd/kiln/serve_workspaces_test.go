package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/kiln-dev/kiln/internal/workspace"
)

// TestServeWorkspacesFlag: disk workspaces by default, tmpfs on request,
// anything else refused with the allowed values.
func TestServeWorkspacesFlag(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want workspace.Kind
	}{
		{nil, workspace.Disk},
		{[]string{"--workspaces", "disk"}, workspace.Disk},
		{[]string{"--workspaces=tmpfs"}, workspace.Tmpfs},
	} {
		var stderr bytes.Buffer
		f, err := parseServe(tc.args, &stderr)
		if err != nil {
			t.Fatalf("parseServe(%q) = %v: %s", tc.args, err, stderr.String())
		}
		if f.svc.Workspaces != tc.want {
			t.Errorf("parseServe(%q): workspaces %q, want %q", tc.args, f.svc.Workspaces, tc.want)
		}
	}
	var stderr bytes.Buffer
	if _, err := parseServe([]string{"--workspaces", "ramdisk"}, &stderr); err == nil || !strings.Contains(stderr.String(), "disk, tmpfs") {
		t.Errorf("--workspaces ramdisk = %v, %q; want a usage error naming disk and tmpfs", err, stderr.String())
	}
	stderr.Reset()
	parseServe([]string{"-h"}, &stderr)
	if !strings.Contains(stderr.String(), "-workspaces") || !strings.Contains(stderr.String(), "(default disk)") {
		t.Errorf("kiln serve -h does not show --workspaces with its default:\n%s", stderr.String())
	}
}
