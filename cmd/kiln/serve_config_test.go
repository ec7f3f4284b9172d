package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kiln-dev/kiln/internal/kiln"
)

// TestServeCapsFromFlagsAndConfig: the per-session defaults and maximums
// and the budgets come from flags and from a JSON config file; a flag on
// the command line wins over the file.
func TestServeCapsFromFlagsAndConfig(t *testing.T) {
	cfgFile := filepath.Join(t.TempDir(), "kiln.json")
	os.WriteFile(cfgFile, []byte(`{"max-memory": "2G", "max-cpus": 2, "max-pids": 256, "max-timeout": "5m",
		"max-disk": "4G", "max-idle-ttl": "12h", "default-memory": "256M", "cpu-seconds-per-day": 3600,
		"max-sessions": 5, "pool": 3}`), 0o600)
	var stderr bytes.Buffer
	f, err := parseServe([]string{"--config", cfgFile, "--pool", "1", "--default-cpus", "0.5", "--default-timeout", "20s"}, &stderr)
	if err != nil {
		t.Fatalf("parseServe: %v: %s", err, stderr.String())
	}
	wantMax := kiln.Limits{MemoryBytes: 2 * kiln.GiB, CPUMillis: 2000, Pids: 256, Timeout: 5 * time.Minute, WorkspaceBytes: 4 * kiln.GiB}
	if f.svc.MaxLimits != wantMax {
		t.Errorf("max limits = %+v, want %+v", f.svc.MaxLimits, wantMax)
	}
	wantDef := kiln.Limits{MemoryBytes: 256 * kiln.MiB, CPUMillis: 500, Timeout: 20 * time.Second}
	if f.svc.DefaultLimits != wantDef {
		t.Errorf("default limits = %+v, want %+v", f.svc.DefaultLimits, wantDef)
	}
	if f.svc.MaxIdleTTL != 12*time.Hour || f.svc.CPUSecondsPerDay != 3600 || f.svc.MaxSessionsPerUser != 5 {
		t.Errorf("max idle TTL %v, CPU-seconds %d, sessions %d; want 12h, 3600, 5", f.svc.MaxIdleTTL, f.svc.CPUSecondsPerDay, f.svc.MaxSessionsPerUser)
	}
	if f.svc.PoolSize != 1 {
		t.Errorf("pool = %d, want the command line's 1 over the file's 3", f.svc.PoolSize)
	}
}

func TestServeConfigErrors(t *testing.T) {
	dir := t.TempDir()
	cases := []struct{ file, want string }{
		{`{"max-memroy": "2G"}`, `unknown setting "max-memroy"`},
		{`{"max-memory": "lots"}`, `"max-memory"`},
		{`{"max-cpus": 100}`, `"max-cpus"`},
		{`{"pool": [1]}`, `"pool" must be a string, a number or true/false`},
		{`["max-memory"]`, `not a JSON object of settings`},
	}
	for i, c := range cases {
		p := filepath.Join(dir, "c.json")
		os.WriteFile(p, []byte(c.file), 0o600)
		_, err := parseServe([]string{"--config", p}, &bytes.Buffer{})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("case %d %s: err = %v, want one containing %s", i, c.file, err, c.want)
		}
	}
	if _, err := parseServe([]string{"--config", filepath.Join(dir, "missing.json")}, &bytes.Buffer{}); err == nil || !strings.Contains(err.Error(), "missing.json") {
		t.Errorf("a missing config file: err = %v", err)
	}
}
