// Package mcp_test drives kiln's MCP server with a client kiln did not
// write: the official MCP TypeScript SDK (client.mjs, its version pinned
// by package-lock.json; scripts/deps --test installs it). Over stdio it
// starts `kiln mcp`; over streamable HTTP it talks to a real `kiln serve`.
// The benchmarks compare a warm `1+1` tool call over stdio and over HTTP
// with the same cell through the REST API.
package mcp_test

import (
	"context"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kiln-dev/kiln/test/testkiln"
)

var kilnBin string

func TestMain(m *testing.M) { os.Exit(testkiln.Main(m, "mcp", &kilnBin)) }

// needClient skips without root, Node.js or the SDK's installed package.
func needClient(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to make sandboxes")
	}
	if _, err := exec.LookPath("node"); err != nil {
		t.Skip("needs Node.js (node) to run the MCP TypeScript SDK; scripts/deps installs it")
	}
	if _, err := os.Stat("node_modules/@modelcontextprotocol/sdk/package.json"); err != nil {
		t.Skip("needs the MCP TypeScript SDK in test/mcp/node_modules: run scripts/deps --test (npm ci in test/mcp)")
	}
}

// node runs client.mjs with args and fails the test with its output
// when it fails.
func node(t *testing.T, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", append([]string{"client.mjs"}, args...)...)
	out, err := cmd.CombinedOutput()
	t.Logf("node client.mjs %s:\n%s", args[0], out)
	if err != nil {
		t.Fatalf("the TypeScript MCP client failed (%v); its output is above", err)
	}
	return string(out)
}

// TestTypeScriptClientStdio: an MCP host starts `kiln mcp` and uses
// every kind of tool: a plot arrives as an image, a session keeps a
// variable, a file is written and read, an unknown language is a tool
// error.
func TestTypeScriptClientStdio(t *testing.T) {
	needClient(t)
	before := mcpMounts(t)
	out := node(t, "stdio", kilnBin)
	for _, want := range []string{"ok: plot arrived as image/png", "kept x between calls", "ok: wrote, read and listed a file",
		"read as a resource", "ok: unknown language is a tool error", "ok: closed the session"} {
		if !strings.Contains(out, want) {
			t.Errorf("the client did not report %q", want)
		}
	}
	// kiln mcp unmounts its sessions' and pool's workspaces and removes
	// its temporary data directory when the host closes it.
	for _, m := range mcpMounts(t) {
		if !slices.Contains(before, m) {
			t.Errorf("kiln mcp left %s mounted", m)
		}
	}
}

// mcpMounts are the mounts under kiln mcp's temporary data directories.
func mcpMounts(t *testing.T) []string {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	var ms []string
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) > 4 && strings.Contains(f[4], "/kiln-mcp-") {
			ms = append(ms, f[4])
		}
	}
	return ms
}

// TestTypeScriptClientHTTP: the same over streamable HTTP at /mcp of a
// real kiln serve, and over stdio through `kiln mcp --server`; a wrong
// key is refused.
func TestTypeScriptClientHTTP(t *testing.T) {
	needClient(t)
	s := startServe(t)
	for _, args := range [][]string{{"http", s.url + "/mcp", s.key}, {"remote", kilnBin, s.url, s.key}} {
		if out := node(t, args...); !strings.Contains(out, "ok: closed the session") {
			t.Errorf("the %s client did not finish", args[0])
		}
	}
	node(t, "badkey", s.url+"/mcp")
}

// serve is a `kiln serve` process.
type serve struct {
	url, key string
}

// startServe runs kiln serve on a free port with its own data directory
// and tmpfs workspaces, and stops it at the end of the test.
func startServe(t testing.TB) *serve {
	t.Helper()
	s := testkiln.Start(t, testkiln.Options{Bin: kilnBin,
		Args: []string{"--pool", "1", "--workspaces", "tmpfs", "--rate", "10000", "--burst", "10000"}})
	return &serve{url: s.URL, key: s.Key}
}
