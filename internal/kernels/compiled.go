package kernels

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// A Python kernel's source (~36 KB for the Python kernel) took 4-14 ms to
// compile at every kernel start, a large part of a session's first cell.
// So Boot sends, beside the source, its code object compiled once on the
// host by the same interpreter: the magic number of its bytecode, then
// marshal's dump compressed with zlib (built into Debian's python3; 59 KB
// to 26 KB for the Python kernel), as hex (the payload travels as a JSON
// string, which carries only UTF-8). The loader runs the code when its interpreter's
// magic number matches and compiles the source otherwise (another
// interpreter, as in an image of the Docker backend; or nothing compiled
// because the host has no such interpreter), so a mismatch costs time,
// never correctness.
//
// The code is compiled at most once per process and source, and kept in
// the user's cache directory (kiln/python-code/, 0700) for the next
// process, e.g. each `kiln run`; its name is a hash of the source and the
// interpreter's identity (resolved path, size, modification time, inode),
// so a changed kernel or an upgraded interpreter makes a new file.

// compileProgram reads a source on stdin and writes the magic number and
// zlib of marshal's dump of its code object, compiled as `python3 -c`
// compiles its program (filename "<string>", no inherited flags), as hex.
const compileProgram = `import sys,marshal,zlib,importlib.util as u
c=compile(sys.stdin.buffer.read().decode(),"<string>","exec",dont_inherit=True)
sys.stdout.write((u.MAGIC_NUMBER+zlib.compress(marshal.dumps(c),9)).hex())`

// maxCodeHex bounds a compiled kernel, read from the cache or from the
// compiler: far above the kernels' (~55 KB of hex), far below the
// agent's frame.
const maxCodeHex = 1 << 20

// fromSource is set only by a benchmark (Precompile) that measures the
// kernel's start both ways in one run.
var fromSource atomic.Bool

// Precompile turns sending compiled Python kernels on or off, and says
// what it was; kernels started after the call are affected. It exists
// for benchmarks that compare the two (kiln bench); off, a kernel boots
// by compiling its source, as before.
func Precompile(on bool) (was bool) { return !fromSource.Swap(!on) }

var compiled = struct {
	sync.Mutex
	code map[[sha256.Size]byte]string // by interpreter and source; "" when it could not be compiled
}{code: map[[sha256.Size]byte]string{}}

// compiledCode is source's code for the Python interpreter python, as
// hex, or "" when it cannot be had (no such interpreter on the host, an
// interpreter flag that changes compiling): the loader then compiles the
// source itself.
func compiledCode(python string, flags []string, source string) string {
	if fromSource.Load() {
		return ""
	}
	for _, f := range flags {
		if strings.HasPrefix(f, "-O") { // optimize changes the bytecode
			return ""
		}
	}
	id, err := interpreterID(python)
	if err != nil {
		return ""
	}
	key := sha256.Sum256([]byte(id + "\x00" + source))
	compiled.Lock()
	defer compiled.Unlock()
	if code, ok := compiled.code[key]; ok {
		return code
	}
	code := cachedCode(key)
	if code == "" {
		if code = compileOnHost(python, source); code != "" {
			storeCode(key, code)
		}
	}
	compiled.code[key] = code
	return code
}

// interpreterID names an interpreter binary's version on disk.
func interpreterID(python string) (string, error) {
	p, err := filepath.EvalSymlinks(python)
	if err != nil {
		return "", err
	}
	fi, err := os.Stat(p)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("%s %d %d %d", p, fi.Size(), fi.ModTime().UnixNano(), inode(fi)), nil
}

// compileOnHost runs the interpreter, isolated from the environment and
// site packages, to compile source.
func compileOnHost(python, source string) string {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, python, "-I", "-S", "-c", compileProgram)
	cmd.Dir, cmd.Env = "/", []string{"PATH=/usr/bin:/bin"}
	cmd.Stdin = strings.NewReader(source)
	var out bytes.Buffer
	cmd.Stdout = &out
	if err := cmd.Run(); err != nil || !validCode(out.Bytes()) {
		return ""
	}
	return out.String()
}

// validCode checks the form of a compiled kernel: hex, of a sane size,
// longer than a magic number.
func validCode(b []byte) bool {
	if len(b) <= 8 || len(b) > maxCodeHex || len(b)%2 != 0 {
		return false
	}
	_, err := hex.Decode(make([]byte, len(b)/2), b)
	return err == nil
}

// codeCacheDir is where compiled kernels are kept between processes.
func codeCacheDir() (string, error) {
	d, err := os.UserCacheDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(d, "kiln", "python-code"), nil
}

// cachedCode reads a compiled kernel from the cache. Only a file this
// user owns and nobody else may write is trusted: its code runs as every
// sandbox's kernel. It begins with its code's hash, so a torn file is not
// used either.
func cachedCode(key [sha256.Size]byte) string {
	dir, err := codeCacheDir()
	if err != nil {
		return ""
	}
	f, err := os.Open(filepath.Join(dir, hexKey(key)))
	if err != nil {
		return ""
	}
	defer f.Close()
	if !ownedPrivately(f) {
		return ""
	}
	b, err := io.ReadAll(io.LimitReader(f, maxCodeHex+sha256.Size*2+1))
	if err != nil {
		return ""
	}
	if len(b) < sha256.Size*2 {
		return ""
	}
	sum, code := b[:sha256.Size*2], b[sha256.Size*2:]
	got := sha256.Sum256(code)
	if hex.EncodeToString(got[:]) != string(sum) || !validCode(code) {
		return ""
	}
	return string(code)
}

// ownedPrivately: f is a regular file of this user that only it may
// write.
func ownedPrivately(f *os.File) bool {
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm()&0o022 != 0 {
		return false
	}
	return ownedByMe(fi)
}

// storeCode writes a compiled kernel to the cache, atomically; a failure
// only costs the next process a compile.
func storeCode(key [sha256.Size]byte, code string) {
	dir, err := codeCacheDir()
	if err != nil || os.MkdirAll(dir, 0o700) != nil {
		return
	}
	f, err := os.CreateTemp(dir, ".tmp-*")
	if err != nil {
		return
	}
	sum := sha256.Sum256([]byte(code))
	_, werr := f.WriteString(hex.EncodeToString(sum[:]) + code)
	if cerr := f.Close(); werr != nil || cerr != nil || os.Rename(f.Name(), filepath.Join(dir, hexKey(key))) != nil {
		os.Remove(f.Name())
	}
}

func hexKey(key [sha256.Size]byte) string { return hex.EncodeToString(key[:]) }
