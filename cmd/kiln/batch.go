package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/kiln-dev/kiln/client"
	"github.com/kiln-dev/kiln/internal/backend/native"
	"github.com/kiln-dev/kiln/internal/engine"
	"github.com/kiln-dev/kiln/internal/kiln"
	"github.com/kiln-dev/kiln/internal/server"
	"github.com/kiln-dev/kiln/internal/service"
	"github.com/kiln-dev/kiln/internal/store/sqlite"
	"github.com/kiln-dev/kiln/internal/tools"
	"github.com/kiln-dev/kiln/internal/workspace"
)

const batchUsage = `Usage: kiln batch [flags] FILE.jsonl

Runs and judges a batch of programs, each in a fresh sandbox: FILE (or -
for stdin) has one item a line, as POST /v1/batches takes them, e.g.

    {"id":"a","language":"python","code":"print(6*7)","check":{"stdout":"42\n"}}
    {"language":"python","code":"def f(): return 2","check":{"test":"assert f() == 2"}}

A check is an exit_code (default 0) and either stdout (exact, or with
"trim": true after trimming trailing whitespace) or a test program run
after the solution in the same sandbox: in the same kernel for Python,
JavaScript and TypeScript; appended to the solution for C, C++ (the test
has main), Rust (#[test]s) and Java (main or JUnit @Test); a _test.go
beside it for Go.
At most 5000 items. Results are written as JSON lines as items finish
(-o FILE, default stdout); the summary goes to stderr. The exit status is
0 when every item passed, 1 when any failed.

Without --server it runs the sandboxes on this machine through the same
service as kiln serve (needs root); with --server URL it uses that kiln
server with an API key, and the batch goes on there if kiln batch stops.

Flags:
`

func batchCmd(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("batch", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, batchUsage); fs.PrintDefaults(); fmt.Fprint(stderr, "\n"+remoteHelp) }
	var rf remoteFlags
	rf.add(fs)
	out := fs.String("o", "", "write the results to this file (JSON lines) instead of stdout")
	cache := fs.Bool("cache", false, "take results from your result cache of one-shot runs when the same run is there (the programs must not depend on the clock, randomness or the environment)")
	logLevel := fs.String("log-level", "warn", "local mode: debug, info, warn or error (to stderr)")
	files, err := parseInterspersed(fs, args)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return errUsage
	}
	if len(files) != 1 {
		fmt.Fprintln(stderr, "kiln batch: give one FILE.jsonl (or - for stdin)")
		return errUsage
	}
	items, err := readBatchFile(files[0], stdin)
	if err != nil {
		return err
	}
	w := stdout
	if *out != "" {
		f, err := os.Create(*out)
		if err != nil {
			return kiln.Wrap(kiln.Invalid, err, "cannot write the results to %s", *out)
		}
		defer f.Close()
		w = f
	}
	req := client.BatchRequest{Items: items, Cache: *cache}
	if rf.server != "" || os.Getenv("KILN_SERVER") != "" {
		srv, key, err := remoteConfig(rf.server, rf.key, os.Getenv, stderr)
		if err != nil {
			return err
		}
		c, err := client.New(srv, key, client.WithUserAgent("kiln-batch/"+version))
		if err != nil {
			return kiln.Wrap(kiln.Invalid, err, "%v", err)
		}
		return runBatch(ctx, c, req, w, stderr)
	}
	log, err := newLogger(stderr, *logLevel, "text")
	if err != nil {
		return err
	}
	return localBatch(ctx, log, func(c *client.Client) error { return runBatch(ctx, c, req, w, stderr) })
}

// readBatchFile reads JSON lines of items, strictly: an unknown field or
// a line that is not an item is an error naming its line.
func readBatchFile(name string, stdin io.Reader) ([]client.BatchItem, error) {
	r := stdin
	if name != "-" {
		f, err := os.Open(name)
		if err != nil {
			return nil, kiln.Wrap(kiln.Invalid, err, "cannot read %s", name)
		}
		defer f.Close()
		r = f
	} else {
		name = "stdin"
	}
	return parseBatch(name, r)
}

func parseBatch(name string, r io.Reader) ([]client.BatchItem, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 16<<20) // one item at most 16 MiB
	var items []client.BatchItem
	for line := 1; sc.Scan(); line++ {
		b := bytes.TrimSpace(sc.Bytes())
		if len(b) == 0 {
			continue
		}
		if len(items) == client.MaxBatchItems {
			return nil, kiln.Errorf(kiln.TooLarge, "%s has more than %d items, the most one batch may have; split it", name, client.MaxBatchItems)
		}
		var it client.BatchItem
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&it); err != nil {
			return nil, kiln.Errorf(kiln.Invalid, "%s line %d: not a batch item: %v", name, line, err)
		}
		items = append(items, it)
	}
	if err := sc.Err(); err != nil {
		return nil, kiln.Wrap(kiln.Invalid, err, "cannot read %s: %v (a line is at most 16 MiB)", name, err)
	}
	if len(items) == 0 {
		return nil, kiln.Errorf(kiln.Invalid, "%s has no items", name)
	}
	return items, nil
}

// runBatch streams the batch, writes each result as a JSON line and
// prints the summary.
func runBatch(ctx context.Context, c *client.Client, req client.BatchRequest, w, stderr io.Writer) error {
	enc := json.NewEncoder(w)
	var werr error
	b, err := c.BatchStream(ctx, req, func(r client.BatchItemResult) {
		if werr == nil {
			werr = enc.Encode(r)
		}
	})
	if err != nil {
		return err
	}
	if werr != nil {
		return kiln.Wrap(kiln.Invalid, werr, "cannot write the results: %v", werr)
	}
	fmt.Fprint(stderr, batchSummary(b))
	if b.Failed > 0 {
		return exitError{exitCellError}
	}
	return nil
}

func batchSummary(b *client.Batch) string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "batch %s: %d items, %d passed, %d failed\n", b.ID, b.Total, b.Passed, b.Failed)
	reasons := make([]string, 0, len(b.Reasons))
	for r := range b.Reasons {
		reasons = append(reasons, r)
	}
	slices.Sort(reasons)
	for _, r := range reasons {
		fmt.Fprintf(&sb, "  %-14s %d\n", r, b.Reasons[r])
	}
	return sb.String()
}

// localBatch wires what kiln serve wires (store, native backend, service,
// API handler) in a temporary data directory with no socket, as kiln mcp
// does, and hands fn an in-process client of it.
func localBatch(ctx context.Context, log *slog.Logger, fn func(*client.Client) error) error {
	if os.Geteuid() != 0 {
		return kiln.Errorf(kiln.Invalid, "kiln batch runs sandboxes on this machine, which needs root (namespaces, cgroups); "+
			"run it as root, or use a kiln server: kiln batch --server URL --key KEY FILE")
	}
	data, err := os.MkdirTemp("", "kiln-batch-")
	if err != nil {
		return kiln.Wrap(kiln.Invalid, err, "cannot make a temporary data directory")
	}
	defer os.RemoveAll(data)
	if err := os.Chmod(data, 0o711); err != nil { // the sandboxes' users reach their workspaces below it
		return kiln.Wrap(kiln.Invalid, err, "cannot set the mode of %s", data)
	}
	st, err := sqlite.Open(ctx, filepath.Join(data, "kiln.db"))
	if err != nil {
		return err
	}
	defer st.Close()
	b, err := native.New(native.Config{}, log)
	if err != nil {
		return err
	}
	cfg := service.DefaultConfig()
	cfg.DataDir, cfg.PoolSize, cfg.Workspaces = data, -1, workspace.Tmpfs
	// One local user runs the whole machine's share.
	cfg.UserConcurrency = cfg.Concurrency
	svc, err := service.New(ctx, cfg, st, engine.New(b, log), log)
	if err != nil {
		return err
	}
	defer func() {
		svc.Close(context.Background())
		removeWorkspaces(filepath.Join(data, "workspaces"), log)
	}()
	key, err := localKey(ctx, svc, st)
	if err != nil {
		return err
	}
	hc := server.DefaultConfig()
	hc.RatePerSecond, hc.RateBurst = 1e6, 1e6 // one local caller
	c, err := tools.InProcess(server.New(svc, hc, log), key, "127.0.0.1:0")
	if err != nil {
		return err
	}
	return fn(c)
}

// parseInterspersed parses flags before and after the positional
// arguments (kiln batch FILE -o out.jsonl), as users type them, and
// returns the positional ones; everything after "--" is positional.
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if used := len(args) - len(rest); used > 0 && args[used-1] == "--" {
			return append(pos, rest...), nil
		}
		if len(rest) == 0 {
			return pos, nil
		}
		pos, args = append(pos, rest[0]), rest[1:]
	}
}
