package service

import (
	"reflect"
	"testing"
	"time"

	"github.com/kiln-dev/kiln/internal/kiln"
)

// runProbes print what user code can see of its interpreter, before
// anything of their own is imported: a one-shot run from the pool must
// see exactly what a fresh sandbox's run sees.
var runProbes = map[string]string{
	"python": `import sys
mods = sorted(sys.modules)
import os, json, linecache, helper
print(json.dumps({"helper": helper.X, "modules": mods, "main": sorted(vars(sys.modules["__main__"])),
    "argv": sys.argv, "cwd": os.getcwd(), "env": dict(os.environ), "path": sys.path,
    "lines": sorted(linecache.cache), "stdin": sys.stdin.read()}))
1/0
`,
	"javascript": `const seen = {globals: Object.getOwnPropertyNames(globalThis).sort(),
  cache: Object.keys(require.cache).sort(), argv: process.argv, cwd: process.cwd(), env: process.env};
console.log(JSON.stringify(seen));
null.x;
`,
}

// TestRunPoolSameAsFresh runs the same probe as a one-shot run in a fresh
// sandbox and in one from the one-shot pool, and compares everything the
// user sees: stdout (sys.modules keys, __main__'s globals, sys.argv, the
// cwd, the environment, sys.path, stdin), stderr (the traceback naming
// the cell as today) and the status, with a file of the run imported.
func TestRunPoolSameAsFresh(t *testing.T) {
	fresh := newNativeService(t, Config{})
	pooled := newNativeService(t, Config{RunPoolSize: 1})
	u1, u2 := fresh.user(t, "fresh", false), pooled.user(t, "pooled", false)
	for _, language := range runPoolLanguages {
		t.Run(language, func(t *testing.T) {
			ctx := ctxT(t, 2*time.Minute)
			p := pooled.runs.pools[language]
			if p == nil {
				t.Skipf("%s is not installed here: no pool for it (scripts/deps installs it)", language)
			}
			if err := ready(ctx, p); err != nil {
				t.Fatal(err)
			}
			// A file of the run, written after the pooled kernel started,
			// must be importable as in a fresh sandbox.
			req := RunRequest{Language: language, Code: runProbes[language], Stdin: []byte("in\n"),
				Files: []File{{Path: "helper.py", Data: []byte("X = 42\n"), Mode: 0o644}}}
			want, err := fresh.Run(ctx, u1, req)
			if err != nil {
				t.Fatal(err)
			}
			before := pooled.runs.taken.Load()
			got, err := pooled.Run(ctx, u2, req)
			if err != nil {
				t.Fatal(err)
			}
			if pooled.runs.taken.Load() != before+1 {
				t.Fatal("the run did not start from the pool")
			}
			if want.Result.Status != kiln.StatusError {
				t.Fatalf("the fresh probe ended %s, want an error: stdout %q stderr %q", want.Result.Status, want.Result.Stdout, want.Result.Stderr)
			}
			if got.Result.Status != want.Result.Status || got.Result.Stdout != want.Result.Stdout || got.Result.Stderr != want.Result.Stderr {
				t.Errorf("pooled run differs from a fresh one:\nstatus %s / %s\nstdout\n%s\nfresh stdout\n%s\nstderr\n%s\nfresh stderr\n%s",
					got.Result.Status, want.Result.Status, got.Result.Stdout, want.Result.Stdout, got.Result.Stderr, want.Result.Stderr)
			}
			if !reflect.DeepEqual(got.Result.Error, want.Result.Error) || got.Result.Notice != want.Result.Notice ||
				!reflect.DeepEqual(got.Result.Artifacts, want.Result.Artifacts) {
				t.Errorf("error %+v notice %q artifacts %v; fresh: %+v %q %v", got.Result.Error, got.Result.Notice, got.Result.Artifacts,
					want.Result.Error, want.Result.Notice, want.Result.Artifacts)
			}
		})
	}
}

// ready waits until p has a sandbox ready.
func ready(ctx interface {
	Done() <-chan struct{}
	Err() error
}, p *pool) error {
	for len(p.ready) == 0 {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
	return nil
}
