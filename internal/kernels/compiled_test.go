package kernels

import (
	"crypto/sha256"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kiln-dev/kiln/internal/kernels/kerneltest"
)

// splitPayload undoes Boot's payload: the header of lengths, the parts.
func splitPayload(t *testing.T, payload string) []string {
	t.Helper()
	head, body, ok := strings.Cut(payload, "\n")
	if !ok {
		t.Fatalf("payload without a header: %.80q", payload)
	}
	var parts []string
	for _, f := range strings.Fields(head) {
		n, err := strconv.Atoi(f)
		if err != nil || n > len(body) {
			t.Fatalf("header %q: %v", head, err)
		}
		parts, body = append(parts, body[:n]), body[n:]
	}
	return parts
}

func joinPayload(parts []string) string {
	var head []string
	for _, p := range parts {
		head = append(head, strconv.Itoa(len(p)))
	}
	return strings.Join(head, " ") + "\n" + strings.Join(parts, "")
}

// bootPython is the Python kernel's boot command line and payload parts:
// the loader's second stage, the compiled code, the source.
func bootPython(t *testing.T) ([]string, []string) {
	t.Helper()
	spec := Python()
	if _, err := os.Stat(spec.Argv[0]); err != nil {
		t.Skipf("%s not installed: %v", spec.Argv[0], err)
	}
	argv, payload := spec.Boot()
	parts := splitPayload(t, payload)
	if len(parts) != 3 || parts[0] != pythonStage2 || parts[2] != pythonSource {
		t.Fatalf("Python payload: %d parts, want the second stage, the code and the source", len(parts))
	}
	return argv, parts
}

// TestPythonKernelRunsPrecompiled: the Python kernel boots from the code
// compiled on the host, not from its source: with the source in the
// payload replaced by a program that exits, the kernel still works.
func TestPythonKernelRunsPrecompiled(t *testing.T) {
	argv, parts := bootPython(t)
	if parts[1] == "" {
		t.Fatal("Boot sent no compiled code for the host's python3")
	}
	parts[2] = "raise SystemExit('the source was compiled')"
	k := kerneltest.StartBoot(t, argv, Python().Env, joinPayload(parts), t.TempDir())
	// The loader's decompressor is not left imported: the user sees the
	// sys.modules of a kernel compiled from source.
	if r := k.Exec("import sys\nprint(1 + 1, sys.argv, 'zlib' in sys.modules)"); r.Status != "ok" || r.Stdout != "2 [''] False\n" {
		t.Errorf("cell: status %s stdout %q error %+v stderr %q", r.Status, r.Stdout, r.Error, r.Stderr)
	}
}

// TestPythonKernelFallsBackToSource: code of another interpreter (its
// magic number differs), code that does not load, or none is not run;
// the source is compiled, and the kernel works the same.
func TestPythonKernelFallsBackToSource(t *testing.T) {
	argv, parts := bootPython(t)
	for name, code := range map[string]string{"another magic": "00000000" + parts[1][8:], "none": "",
		"not zlib": parts[1][:8] + "00ff", "not hex": parts[1][:8] + "zz"} {
		t.Run(name, func(t *testing.T) {
			p := append([]string{}, parts...)
			p[1] = code
			k := kerneltest.StartBoot(t, argv, Python().Env, joinPayload(p), t.TempDir())
			if r := k.Exec("print(1 + 1)"); r.Status != "ok" || r.Stdout != "2\n" {
				t.Errorf("cell: status %s stdout %q error %+v stderr %q", r.Status, r.Stdout, r.Error, r.Stderr)
			}
		})
	}
}

// TestCompiledCodeCache: a compiled kernel kept in the cache is read
// back, but not when others may write it or its content does not match
// its hash; and compiling for no interpreter, or with -O, gives none.
func TestCompiledCodeCache(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	key := sha256.Sum256([]byte("test key"))
	code := "a70d0d0a" + strings.Repeat("e3", 40)
	storeCode(key, code)
	if got := cachedCode(key); got != code {
		t.Fatalf("read back %q, want %q", got, code)
	}
	dir, _ := codeCacheDir()
	file := filepath.Join(dir, hexKey(key))
	if err := os.Chmod(file, 0o666); err != nil {
		t.Fatal(err)
	}
	if got := cachedCode(key); got != "" {
		t.Error("a world-writable cache file was trusted")
	}
	os.Chmod(file, 0o600)
	b, _ := os.ReadFile(file)
	os.WriteFile(file, append(b[:len(b)-2], "ff"...), 0o600)
	if got := cachedCode(key); got != "" {
		t.Error("a cache file whose content does not match its hash was used")
	}
	if got := compiledCode("/nonexistent/python3", nil, "1"); got != "" {
		t.Errorf("compiled for a missing interpreter: %q", got)
	}
	if got := compiledCode("/usr/bin/python3", []string{"-O"}, "1"); got != "" {
		t.Errorf("compiled with -O: %q", got)
	}
}

// BenchmarkPythonKernelBoot starts the Python kernel on the host (no
// sandbox) until its first `1+1` has answered, from its precompiled code
// and from its source, alternating. It reports the medians of the wall
// time and of the kernel process's own CPU time (user and system, from
// its rusage: little moved by other work on the machine), in ms.
func BenchmarkPythonKernelBoot(b *testing.B) {
	spec := Python()
	if _, err := os.Stat(spec.Argv[0]); err != nil {
		b.Skipf("%s not installed: %v", spec.Argv[0], err)
	}
	dir := b.TempDir()
	defer Precompile(true)
	wall, cpu := map[bool][]time.Duration{}, map[bool][]time.Duration{}
	for b.Loop() {
		for _, precompiled := range []bool{true, false} {
			Precompile(precompiled)
			argv, payload := spec.Boot()
			start := time.Now()
			k := kerneltest.StartBoot(b, argv, spec.Env, payload, dir)
			if r := k.Exec("1+1"); r.Status != "ok" {
				b.Fatalf("cell: %+v", r)
			}
			wall[precompiled] = append(wall[precompiled], time.Since(start))
			k.Stop()
			ru := k.Cmd.ProcessState.SysUsage().(*syscall.Rusage)
			cpu[precompiled] = append(cpu[precompiled], time.Duration(ru.Utime.Nano()+ru.Stime.Nano()))
		}
	}
	median := func(ds []time.Duration) float64 {
		slices.Sort(ds)
		return float64(ds[len(ds)/2].Microseconds()) / 1000
	}
	for precompiled, name := range map[bool]string{true: "precompiled", false: "source"} {
		b.ReportMetric(median(wall[precompiled]), name+"-ms")
		b.ReportMetric(median(cpu[precompiled]), name+"-cpu-ms")
	}
}

// BenchmarkPythonKernelCell is a warm `1+1` in the Python kernel on the
// host (no sandbox, no agent): the kernel's own part of a warm cell. It
// reports the kernel process's CPU per cell (rusage), in µs.
func BenchmarkPythonKernelCell(b *testing.B) {
	spec := Python()
	if _, err := os.Stat(spec.Argv[0]); err != nil {
		b.Skipf("%s not installed: %v", spec.Argv[0], err)
	}
	argv, payload := spec.Boot()
	k := kerneltest.StartBoot(b, argv, spec.Env, payload, b.TempDir())
	for range 3 {
		k.Exec("1+1")
	}
	// utime and stime, in clock ticks of 10 ms: the 14th and 15th fields.
	cpu := func() time.Duration {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(k.Cmd.Process.Pid) + "/stat")
		if err != nil {
			return 0
		}
		f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
		u, _ := strconv.ParseInt(f[11], 10, 64)
		s, _ := strconv.ParseInt(f[12], 10, 64)
		return time.Duration(u+s) * 10 * time.Millisecond
	}
	start := cpu()
	n := 0
	for b.Loop() {
		if r := k.Exec("1+1"); r.Status != "ok" {
			b.Fatalf("cell: %+v", r)
		}
		n++
	}
	b.ReportMetric(float64((cpu()-start).Microseconds())/float64(n), "kernel-cpu-µs/op")
}
