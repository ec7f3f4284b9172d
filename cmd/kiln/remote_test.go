package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// cliResult is one in-process run of the kiln command.
type cliResult struct {
	code           int
	stdout, stderr string
}

// runCLI drives run as main does, exit status included, with the config
// file and environment isolated from the machine's.
func runCLI(t *testing.T, stdin string, args ...string) cliResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	var stdout, stderr bytes.Buffer
	err := run(ctx, args, strings.NewReader(stdin), &stdout, &stderr)
	code := exitCode(err, &stderr)
	if ctx.Err() != nil {
		t.Fatalf("kiln %q did not finish in time", args)
	}
	return cliResult{code, stdout.String(), stderr.String()}
}

// isolate points the config file and environment at nothing.
func isolate(t *testing.T) {
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	t.Setenv("HOME", t.TempDir())
	t.Setenv("KILN_SERVER", "")
	t.Setenv("KILN_KEY", "")
}

// run runs kiln against the fake, found through the environment.
func (f *fakeKiln) run(t *testing.T, stdin string, args ...string) cliResult {
	t.Helper()
	isolate(t)
	t.Setenv("KILN_SERVER", f.srv.URL)
	t.Setenv("KILN_KEY", fakeKey)
	return runCLI(t, stdin, args...)
}

// goldenCLI compares a run with testdata/remote/<name>.golden; the fake's
// address, which changes, is written SERVER.
func (f *fakeKiln) goldenCLI(t *testing.T, name string, r cliResult, args []string) {
	t.Helper()
	got := fmt.Sprintf("$ kiln %s\nexit %d\n--- stdout\n%s--- stderr\n%s", strings.Join(args, " "), r.code, r.stdout, r.stderr)
	golden(t, "remote/"+name, strings.ReplaceAll(got, f.srv.URL, "SERVER"))
}

// cliCase is one golden run.
type cliCase struct {
	name  string
	stdin string
	args  []string
}

func (f *fakeKiln) goldenCases(t *testing.T, cases []cliCase) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f.goldenCLI(t, c.name, f.run(t, c.stdin, c.args...), c.args)
		})
	}
}

func TestRemoteConfig(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name, "kiln", "client.json")
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return filepath.Join(dir, name)
	}
	both := write("both", `{"server": "https://file.example", "key": "filekey"}`)
	keyOnly := write("keyonly", `{"key": "filekey"}`)
	bad := write("bad", `{"server": "x", "kee": "typo"}`)
	tests := []struct {
		name                string
		flagServer, flagKey string
		env                 map[string]string
		wantServer, wantKey string
		wantErr             string
	}{
		{"nothing anywhere", "", "", map[string]string{"HOME": dir}, defaultServer, "", ""},
		{"flags win", "https://flag.example", "flagkey",
			map[string]string{"KILN_SERVER": "https://env.example", "KILN_KEY": "envkey", "XDG_CONFIG_HOME": both},
			"https://flag.example", "flagkey", ""},
		{"environment next", "", "", map[string]string{"KILN_SERVER": "https://env.example", "KILN_KEY": "envkey", "XDG_CONFIG_HOME": both},
			"https://env.example", "envkey", ""},
		{"file last", "", "", map[string]string{"XDG_CONFIG_HOME": both}, "https://file.example", "filekey", ""},
		{"each value on its own", "", "flagkey", map[string]string{"XDG_CONFIG_HOME": both}, "https://file.example", "flagkey", ""},
		{"the file's key stays with the file's server", "https://other.example", "", map[string]string{"XDG_CONFIG_HOME": both},
			"https://other.example", "", ""},
		{"a file without a server lends its key", "https://other.example", "", map[string]string{"XDG_CONFIG_HOME": keyOnly},
			"https://other.example", "filekey", ""},
		{"~/.config without XDG_CONFIG_HOME", "", "", map[string]string{"HOME": filepath.Join(dir, "home")}, defaultServer, "", ""},
		{"a relative XDG_CONFIG_HOME is ignored", "", "", map[string]string{"XDG_CONFIG_HOME": "both", "HOME": dir}, defaultServer, "", ""},
		{"unknown field", "", "", map[string]string{"XDG_CONFIG_HOME": bad}, "", "", `is not {"server": "...", "key": "..."}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stderr bytes.Buffer
			server, key, err := remoteConfig(tt.flagServer, tt.flagKey, func(k string) string { return tt.env[k] }, &stderr)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Errorf("err = %v; want one saying %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || server != tt.wantServer || key != tt.wantKey {
				t.Errorf("got %q, %q, %v; want %q, %q", server, key, err, tt.wantServer, tt.wantKey)
			}
			if stderr.Len() != 0 {
				t.Errorf("warnings %q; want none for a 0600 file", stderr.String())
			}
		})
	}
}

func TestRemoteConfigWarnsWhenReadable(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "kiln", "client.json")
	os.MkdirAll(filepath.Dir(p), 0o755)
	os.WriteFile(p, []byte(`{"key": "k"}`), 0o644)
	os.Chmod(p, 0o644)
	var stderr bytes.Buffer
	_, key, err := remoteConfig("", "", func(k string) string { return map[string]string{"XDG_CONFIG_HOME": dir}[k] }, &stderr)
	if err != nil || key != "k" {
		t.Fatalf("key %q, %v", key, err)
	}
	if !strings.Contains(stderr.String(), "chmod 600") {
		t.Errorf("stderr %q; want a warning to chmod 600 the file", stderr.String())
	}
}

// TestRemoteConfigFileUsed runs a command with the server and key only in
// the config file.
func TestRemoteConfigFileUsed(t *testing.T) {
	f := newFakeKiln(t)
	isolate(t)
	cfg := t.TempDir()
	t.Setenv("XDG_CONFIG_HOME", cfg)
	os.MkdirAll(filepath.Join(cfg, "kiln"), 0o700)
	os.WriteFile(filepath.Join(cfg, "kiln", "client.json"), []byte(`{"server":"`+f.srv.URL+`","key":"`+fakeKey+`"}`), 0o600)
	r := runCLI(t, "", "session", "get", "s1")
	if r.code != 0 || !strings.Contains(r.stdout, "id:") {
		t.Errorf("exit %d, stdout %q, stderr %q; want the session", r.code, r.stdout, r.stderr)
	}
}

func TestRemoteParseArgs(t *testing.T) {
	tests := []struct {
		args    []string
		wantPos []string
		wantR   bool
	}{
		{[]string{"s1", "x", "-r"}, []string{"s1", "x"}, true},
		{[]string{"-r", "s1", "x"}, []string{"s1", "x"}, true},
		{[]string{"s1", "--", "-r"}, []string{"s1", "-r"}, false},
		{[]string{"s1", "-", "y"}, []string{"s1", "-", "y"}, false},
		{[]string{}, nil, false},
	}
	for _, tt := range tests {
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		r := fs.Bool("r", false, "")
		pos, err := parseArgs(fs, tt.args)
		if err != nil || fmt.Sprint(pos) != fmt.Sprint(tt.wantPos) || *r != tt.wantR {
			t.Errorf("parseArgs(%q) = %q, -r %v, %v; want %q, -r %v", tt.args, pos, *r, err, tt.wantPos, tt.wantR)
		}
	}
}

// TestRemoteUsage: usage errors exit 2 and print the command's usage;
// bad flag values say what is allowed; -h is not an error.
func TestRemoteUsage(t *testing.T) {
	f := newFakeKiln(t)
	tests := []struct {
		name string
		args []string
		code int
		want string // in stderr
	}{
		{"session without command", []string{"session"}, 2, "kiln session create [flags]"},
		{"session unknown command", []string{"session", "frob"}, 2, `unknown command "frob"`},
		{"session get without id", []string{"session", "get"}, 2, "Usage: kiln session get [--json] ID"},
		{"session get two ids", []string{"session", "get", "a", "b"}, 2, "Usage: kiln session get"},
		{"bad status", []string{"session", "ls", "--status", "zombie"}, 2, `"zombie" is not one of active, ended`},
		{"bad meta", []string{"session", "create", "--meta", "novalue"}, 2, `"novalue" is not KEY=VALUE`},
		{"bad ttl", []string{"session", "create", "--ttl", "soon"}, 2, `"soon" is not a duration`},
		{"bad memory", []string{"session", "create", "--memory", "lots"}, 2, `"lots" is not a size`},
		{"exec without session", []string{"exec"}, 2, "Usage: kiln exec"},
		{"exec code and stdin both from stdin", []string{"exec", "--stdin", "-", "s1"}, 2, "cannot both come from stdin"},
		{"exec too many", []string{"exec", "s1", "a", "b"}, 2, "Usage: kiln exec"},
		{"files without command", []string{"files"}, 2, "kiln files put SESSION"},
		{"files get directory without archive", []string{"files", "get", "s1"}, 2, "Usage: kiln files get"},
		{"bad archive", []string{"files", "get", "--archive", "rar", "s1", "data"}, 2, `"rar" is not one of tar, zip`},
		{"put stdin without remote", []string{"files", "put", "s1", "-"}, 2, "stdin has no name"},
		{"history without session", []string{"history"}, 2, "Usage: kiln history"},
		{"key without command", []string{"key"}, 2, "kiln key create"},
		{"key revoke without id", []string{"key", "revoke"}, 2, "Usage: kiln key revoke"},
		{"user create without name", []string{"user", "create"}, 2, "Usage: kiln user create"},
		{"unknown flag", []string{"history", "--colour", "s1"}, 2, "flag provided but not defined: -colour"},
		{"help", []string{"session", "ls", "-h"}, 0, "KILN_SERVER"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := f.run(t, "", tt.args...)
			if r.code != tt.code || !strings.Contains(r.stderr, tt.want) {
				t.Errorf("kiln %q: exit %d, stderr:\n%s\nwant exit %d and %q", tt.args, r.code, r.stderr, tt.code, tt.want)
			}
			if r.stdout != "" {
				t.Errorf("kiln %q: stdout %q; want none", tt.args, r.stdout)
			}
		})
	}
	if got := f.sent(); len(got) != 0 {
		t.Errorf("usage errors sent requests: %q", got)
	}
	// help on stdout when asked for.
	if r := f.run(t, "", "files", "help"); r.code != 0 || !strings.Contains(r.stdout, "kiln files ls SESSION") {
		t.Errorf("kiln files help: exit %d, stdout %q", r.code, r.stdout)
	}
}

// TestRemoteErrors: what a user sees when the server refuses or is gone.
func TestRemoteErrors(t *testing.T) {
	f := newFakeKiln(t)
	f.goldenCases(t, []cliCase{
		{"not-found", "", []string{"session", "get", "s9"}},
		{"forbidden", "", []string{"user", "get", "u2"}},
	})
	t.Run("no key", func(t *testing.T) {
		isolate(t)
		t.Setenv("KILN_SERVER", f.srv.URL)
		r := runCLI(t, "", "session", "ls")
		// What to do at a shell, not HTTP words.
		for _, want := range []string{"no API key was given", "KILN_KEY", "--key", "kiln/client.json", f.srv.URL} {
			if r.code != 125 || !strings.Contains(r.stderr, want) {
				t.Errorf("exit %d, stderr %q; want 125 and %q", r.code, r.stderr, want)
			}
		}
		if strings.Contains(r.stderr, "Authorization") || strings.Contains(r.stderr, "Bearer") {
			t.Errorf("stderr %q speaks HTTP", r.stderr)
		}
	})
	t.Run("wrong key by flag", func(t *testing.T) {
		r := f.run(t, "", "session", "ls", "--key", "kiln_wrong")
		if r.code != 125 || r.stderr != "kiln: a valid API key is needed\n" {
			t.Errorf("exit %d, stderr %q", r.code, r.stderr)
		}
	})
	t.Run("server gone", func(t *testing.T) {
		gone := newFakeKiln(t)
		gone.srv.Close()
		r := gone.run(t, "", "session", "ls")
		if r.code != 125 || !strings.Contains(r.stderr, "kiln: cannot reach the kiln server at "+gone.srv.URL+": ") ||
			!strings.Contains(r.stderr, "connection refused") {
			t.Errorf("exit %d, stderr %q; want 125 and cannot reach", r.code, r.stderr)
		}
	})
	t.Run("bad server URL", func(t *testing.T) {
		r := f.run(t, "", "session", "ls", "--server", "127.0.0.1:8420")
		if r.code != 125 || !strings.Contains(r.stderr, "want http:// or https://") {
			t.Errorf("exit %d, stderr %q", r.code, r.stderr)
		}
	})
}
