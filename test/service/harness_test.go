// Package service_test drives a real `kiln serve` process: the load test
// and the crash-recovery test. It needs root (sandboxes) and builds the
// binary once.
package service_test

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/kiln-dev/kiln/client"
	"github.com/kiln-dev/kiln/test/testkiln"
)

var kilnBin string

func TestMain(m *testing.M) { os.Exit(testkiln.Main(m, "service", &kilnBin)) }

func needRoot(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to make sandboxes")
	}
}

// server is one `kiln serve` process on a data directory.
type server struct {
	*testkiln.Server
	t   *testing.T
	url string // through the checking proxy (checkedProxy)
	key string
}

// start runs kiln serve on data (made 0711 so sandboxes reach their
// workspaces) and waits until it listens.
func start(t *testing.T, data string, extra ...string) *server {
	t.Helper()
	args := append(append([]string{"--run-pool", "0"}, backendArgs()...), extra...)
	srv := testkiln.Start(t, testkiln.Options{Bin: kilnBin, Data: data, Args: args})
	ourServers.Store(srv.Cmd.Process.Pid, true)
	ourOwners.Store(data, true)
	return &server{Server: srv, t: t, url: checkedProxy(t, srv.URL), key: srv.Key}
}

func (s *server) client(key string) *client.Client {
	c, err := client.New(s.url, key)
	if err != nil {
		s.t.Fatal(err)
	}
	return c
}

// stop ends the server with SIGTERM and waits.
func (s *server) stop() { s.Stop() }

func dataDir(t *testing.T) string {
	d := t.TempDir()
	os.Chmod(filepath.Dir(d), 0o711)
	os.Chmod(d, 0o711)
	return d
}

// Sandbox uids and slots, as native.Config's defaults make them.
const (
	uidBase     = 1_200_000_000
	uidsPerSlot = 65536
	slotsDir    = "/run/kiln/slots"
)

// ourServers are the pids of the kiln serve processes the tests started.
var ourServers sync.Map

// sandboxProc is a process running as a sandbox's host uid, with the pid
// holding its slot's lock (0 when nobody holds it).
type sandboxProc struct {
	pid, slot, holder int
}

// allSandboxProcs lists the processes of every sandbox on the machine.
func allSandboxProcs(t *testing.T) []sandboxProc {
	t.Helper()
	holders := slotHolders(t)
	var out []sandboxProc
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/status")
		if err != nil {
			continue
		}
		for _, l := range strings.Split(string(b), "\n") {
			if f := strings.Fields(l); len(f) > 1 && f[0] == "Uid:" {
				if uid, _ := strconv.ParseUint(f[1], 10, 32); uid >= uidBase {
					slot := int((uid - uidBase) / uidsPerSlot)
					out = append(out, sandboxProc{pid: pid, slot: slot, holder: holders[slot]})
				}
				break
			}
		}
	}
	return out
}

// sandboxProcesses lists the processes of sandboxes that are not another
// kiln process's. Every sandbox runs as the host uid range of its slot,
// and the kiln process that made it holds an flock on the slot's file; a
// sandbox whose slot a live process the tests did not start holds (a
// `kiln serve` with its warm pool on the same machine) is not theirs to
// count. A sandbox whose slot nobody holds outlived its maker, so it is
// counted.
func sandboxProcesses(t *testing.T) []string {
	t.Helper()
	if onDocker {
		return dockerSandboxes(t, false)
	}
	var out []string
	for _, p := range allSandboxProcs(t) {
		if _, ours := ourServers.Load(p.holder); p.holder == 0 || ours {
			out = append(out, strconv.Itoa(p.pid))
		}
	}
	return out
}

// slotHolders maps each locked slot to the pid holding its flock, from
// /proc/locks.
func slotHolders(t *testing.T) map[int]int {
	t.Helper()
	byInode := map[uint64]int{}
	ents, _ := os.ReadDir(slotsDir)
	for _, e := range ents {
		n, err := strconv.Atoi(e.Name())
		fi, ierr := e.Info()
		if err != nil || ierr != nil {
			continue
		}
		if st, ok := fi.Sys().(*syscall.Stat_t); ok {
			byInode[st.Ino] = n
		}
	}
	b, err := os.ReadFile("/proc/locks")
	if err != nil {
		t.Fatalf("read /proc/locks: %v", err)
	}
	holders := map[int]int{}
	// "1: FLOCK  ADVISORY  WRITE 1234 00:19:5678 0 EOF"
	for _, l := range strings.Split(string(b), "\n") {
		f := strings.Fields(l)
		if len(f) < 6 || f[1] != "FLOCK" {
			continue
		}
		dev := strings.Split(f[5], ":")
		pid, perr := strconv.Atoi(f[4])
		ino, ierr := strconv.ParseUint(dev[len(dev)-1], 10, 64)
		if perr != nil || ierr != nil {
			continue
		}
		if n, ok := byInode[ino]; ok {
			holders[n] = pid
		}
	}
	return holders
}

// waitNoSandboxes waits until none of the tests' sandbox processes is left.
func waitNoSandboxes(t *testing.T, why string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if len(sandboxProcesses(t)) == 0 {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Errorf("%s: sandbox processes left: %v", why, sandboxProcesses(t))
}

// workspaceMounts lists mounts under the data directory.
func workspaceMounts(t *testing.T, data string) []string {
	b, _ := os.ReadFile("/proc/self/mountinfo")
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) > 4 && strings.HasPrefix(f[4], data) {
			out = append(out, f[4])
		}
	}
	return out
}

func ctxT(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}
