package programs

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"path"
	"slices"
	"sort"
	"strings"

	"github.com/kiln-dev/kiln/internal/kiln"
)

// Bounds of what a build's cache key reads from the workspace. A build over
// them still runs; it is not cached.
const (
	maxWalkEntries = 4096     // directory entries listed below the entry's directory
	maxWalkDepth   = 8        // directory levels below it
	maxInputFiles  = 1024     // files read
	maxSourceBytes = 4 << 20  // one file
	maxInputBytes  = 32 << 20 // all of them
)

// inputs are the files a build may read.
type inputs struct {
	files      map[string][]byte // relative to the workspace
	srcs       []string          // the compiled files, relative to the entry's directory, in order
	bytes      int64             // in files
	class      string            // Java: the main class
	sourcepath string            // Java: the package root, relative to the entry's directory
	cacheable  bool              // every input was read, so the key says everything
}

// gather finds and reads the inputs of j's build. Files just written are
// taken from given rather than read back.
func gather(ctx context.Context, ex Execer, j *job, given []File) (*inputs, error) {
	known := make(map[string][]byte, len(given))
	for _, f := range given {
		known[path.Clean(f.Path)] = f.Data
	}
	in := &inputs{files: map[string][]byte{}, cacheable: true}
	read := func(p string, size int64) {
		if data, ok := known[p]; ok {
			in.files[p] = data
			return
		}
		if !in.cacheable || size > maxSourceBytes || in.bytes+size > maxInputBytes || len(in.files) >= maxInputFiles {
			in.cacheable = false
			return
		}
		data, err := ex.ReadFile(ctx, p, maxSourceBytes+1)
		if err != nil || len(data) > maxSourceBytes {
			in.cacheable = false
			return
		}
		in.files[p] = data
		in.bytes += int64(len(data))
	}
	if j.code != nil {
		return in, gatherCell(ctx, ex, j, in, read)
	}
	if j.tc.prepare != nil {
		if err := j.tc.prepare(ctx, ex, j, known); err != nil {
			return nil, err
		}
	}
	if j.cargo != "" {
		// Cargo knows its inputs (manifests, .cargo/, vendor/) and
		// rebuilds what changed; kiln's key would miss some.
		in.cacheable = false
	}
	entry := path.Join(j.dir, j.entry)

	if j.tc.scope == entryOnly {
		info, err := ex.Stat(ctx, entry)
		if err != nil || info.Type != "file" {
			return nil, missing(ctx, entry, err)
		}
		read(entry, info.Size)
		in.srcs = []string{j.entry}
		return in, nil
	}

	top := j.dir // where the build looks for sources
	if j.is(Java) {
		// The main class is the entry's public class in its package, and
		// the package's root is where javac finds the other classes.
		data, ok := known[entry]
		if !ok {
			data, _ = ex.ReadFile(ctx, entry, maxSourceBytes)
		}
		stem := strings.TrimSuffix(j.entry, ".java")
		in.class, in.sourcepath = javaClassName(data, stem), "."
		if in.class != stem {
			// javac wants the file named after its public class (as the
			// host's "java test.java" does not): a copy so named is
			// compiled from the build area, and messages name the entry.
			j.code = &code{shown: entry, disk: j.codePath(in.class+".java", data), data: data}
		}
		if m := javaPackage.FindSubmatch(data); m != nil {
			in.class = string(m[1]) + "." + in.class
			pkg := strings.ReplaceAll(string(m[1]), ".", "/")
			if r, ok := strings.CutSuffix(j.dir, pkg); ok && (r == "" || strings.HasSuffix(r, "/")) {
				top = path.Clean(r + ".")
				in.sourcepath = strings.TrimSuffix(strings.Repeat("../", strings.Count(pkg, "/")+1), "/")
			}
		}
	}
	w := &walker{ex: ex, accept: j.tc.isInput}
	if err := w.walk(ctx, top, 0); err != nil {
		return nil, missing(ctx, top, err)
	}
	if !slices.ContainsFunc(w.found, func(f found) bool { return f.path == entry }) {
		return nil, missing(ctx, entry, nil)
	}
	if w.truncated {
		in.cacheable = false
	}
	for _, f := range w.found {
		read(f.path, f.size)
		if path.Dir(f.path) == j.dir && j.tc.isSource(f.path) && f.path != entry {
			in.srcs = append(in.srcs, path.Base(f.path))
		}
	}
	sort.Strings(in.srcs)
	in.srcs = append(in.srcs, j.entry)
	if j.tc.order != nil {
		contents := make(map[string][]byte)
		for _, s := range in.srcs {
			if data, ok := in.files[path.Join(j.dir, s)]; ok {
				contents[s] = data
			}
		}
		in.srcs = j.tc.order(in.srcs, contents)
	}
	if j.tc.tests != nil {
		if _, ok := in.files[entry]; !ok {
			read(entry, 0)
		}
		j.tc.tests(j, in)
	}
	return in, nil
}

// gatherCell finds the inputs of a cell's code: the code, and the workspace
// files its build may read (headers, classes).
func gatherCell(ctx context.Context, ex Execer, j *job, in *inputs, read func(string, int64)) error {
	in.srcs = []string{j.code.disk}
	if j.is(Java) {
		in.class, in.sourcepath = strings.TrimSuffix(path.Base(j.code.disk), ".java"), "."
		if m := javaPackage.FindSubmatch(j.code.data); m != nil {
			in.class = string(m[1]) + "." + in.class
		}
	}
	if j.tc.cellReads == nil {
		return nil
	}
	w := &walker{ex: ex, accept: j.tc.cellReads}
	if err := w.walk(ctx, j.dir, 0); err != nil {
		return missing(ctx, j.dir, err)
	}
	if w.truncated {
		in.cacheable = false
	}
	for _, f := range w.found {
		read(f.path, f.size)
	}
	return nil
}

var javaPackage = lazyRE(`(?m)^\s*package\s+([\w.]+)\s*;`)

func missing(ctx context.Context, p string, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if p == "." {
		p = "the workspace"
	}
	if err != nil {
		return kiln.Wrap(kiln.Invalid, err, "cannot read %s: %v", p, err)
	}
	return kiln.Errorf(kiln.Invalid, "%s is not in the workspace", p)
}

// key names the build: a hash of the language, the build command and every
// input, or "uncached" when some input could not be read.
func (in *inputs) key(j *job) string {
	if !in.cacheable {
		return "uncached"
	}
	h := sha256.New()
	field := func(b []byte) {
		h.Write(binary.AppendUvarint(nil, uint64(len(b))))
		h.Write(b)
	}
	field([]byte("kiln programs 1"))
	field([]byte(j.l.Name))
	out := j.out
	j.out = "\x00out" // the build directory is named after the key
	b := j.tc.build(j)
	j.out = out
	for _, s := range append(b.argv, b.env...) {
		field([]byte(s))
	}
	names := make([]string, 0, len(in.files))
	for p := range in.files {
		names = append(names, p)
	}
	sort.Strings(names)
	for _, p := range names {
		field([]byte(p))
		field(in.files[p])
	}
	return hex.EncodeToString(h.Sum(nil))[:32]
}

type found struct {
	path string // relative to the workspace
	size int64
}

// walker lists the inputs below a directory, skipping hidden entries (the
// build directory among them).
type walker struct {
	ex        Execer
	accept    func(name string) bool // the files it finds
	entries   int
	found     []found
	truncated bool
}

func (w *walker) walk(ctx context.Context, dir string, depth int) error {
	list, err := w.ex.List(ctx, dir)
	if err != nil {
		if depth == 0 {
			return err
		}
		w.truncated = true
		return nil
	}
	w.entries += len(list)
	sort.Slice(list, func(a, b int) bool { return list[a].Name < list[b].Name })
	// Every file of a listed directory is found (the entry's directory is
	// always listed whole); the bounds stop the descent.
	var dirs []string
	for _, e := range list {
		if strings.HasPrefix(e.Name, ".") || strings.HasPrefix(e.Name, "-") {
			continue
		}
		switch {
		case e.Type == "dir":
			dirs = append(dirs, path.Join(dir, e.Name))
		case e.Type == "file" && w.accept(e.Name):
			w.found = append(w.found, found{path: path.Join(dir, e.Name), size: e.Size})
		}
	}
	for _, d := range dirs {
		if depth >= maxWalkDepth || w.entries > maxWalkEntries {
			w.truncated = true
			return nil
		}
		if err := w.walk(ctx, d, depth+1); err != nil {
			return err
		}
	}
	return nil
}

// Fortran module statements: "module m" (not "module procedure ..."), and
// "use m", "use :: m", "use, intrinsic :: m".
var (
	fortranModule = lazyRE(`(?im)^[ \t]*module[ \t]+(\w+)[ \t]*(?:!.*)?$`)
	fortranUse    = lazyRE(`(?im)^[ \t]*use[ \t]*(?:,[ \t]*\w+[ \t]*)?(?:::)?[ \t]*(\w+)`)
)

// fortranOrder puts the files that define modules before the files that use
// them, as gfortran needs; otherwise the order stays.
func fortranOrder(srcs []string, contents map[string][]byte) []string {
	definedIn := map[string]string{}
	for _, s := range srcs {
		for _, m := range fortranModule.FindAllSubmatch(contents[s], -1) {
			definedIn[strings.ToLower(string(m[1]))] = s
		}
	}
	var out []string
	state := map[string]int{} // 1 visiting, 2 done
	var visit func(s string)
	visit = func(s string) {
		if state[s] != 0 {
			return // done, or a cycle, which gfortran will report
		}
		state[s] = 1
		for _, m := range fortranUse.FindAllSubmatch(contents[s], -1) {
			if d, ok := definedIn[strings.ToLower(string(m[1]))]; ok && d != s {
				visit(d)
			}
		}
		state[s] = 2
		out = append(out, s)
	}
	for _, s := range srcs {
		visit(s)
	}
	return out
}
