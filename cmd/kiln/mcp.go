package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/kiln-dev/kiln/client"
	"github.com/kiln-dev/kiln/internal/backend/native"
	"github.com/kiln-dev/kiln/internal/engine"
	"github.com/kiln-dev/kiln/internal/kiln"
	"github.com/kiln-dev/kiln/internal/mcp"
	"github.com/kiln-dev/kiln/internal/server"
	"github.com/kiln-dev/kiln/internal/service"
	"github.com/kiln-dev/kiln/internal/store"
	"github.com/kiln-dev/kiln/internal/store/sqlite"
	"github.com/kiln-dev/kiln/internal/tools"
	"github.com/kiln-dev/kiln/internal/workspace"
)

func init() { mcp.Version = version }

const mcpUsage = `Usage: kiln mcp [flags]

Serves kiln's tools over the Model Context Protocol on stdin and stdout,
for an MCP host (a desktop assistant, an IDE agent):

    {"mcpServers": {"kiln": {"command": "kiln", "args": ["mcp"]}}}

Without --server it runs sandboxes on this machine, as kiln serve does,
and needs root; sessions live while kiln mcp runs (in a temporary data
directory unless --data names one). With --server URL it uses that kiln
server with an API key; no root needed.

Flags:
`

func mcpCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("mcp", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, mcpUsage); fs.PrintDefaults(); fmt.Fprint(stderr, "\n"+remoteHelp) }
	var rf remoteFlags
	rf.add(fs)
	data := fs.String("data", "", "local mode: keep the store and workspaces in this directory (default: a temporary one, removed at exit)")
	pool := fs.Int("pool", 1, "local mode: warm Python sandboxes kept ready (0 disables)")
	hd := server.DefaultConfig()
	var httpCfg server.Config
	fs.Float64Var(&httpCfg.RatePerSecond, "rate", hd.RatePerSecond, "local mode: tool calls' API requests per second, as kiln serve --rate")
	fs.IntVar(&httpCfg.RateBurst, "burst", hd.RateBurst, "local mode: request burst, as kiln serve --burst")
	logLevel := fs.String("log-level", "warn", "debug, info, warn or error (the log goes to stderr; stdout is MCP's)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return errUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "kiln mcp: unexpected argument %q\n", fs.Arg(0))
		return errUsage
	}
	log, err := newLogger(stderr, *logLevel, "text")
	if err != nil {
		return err
	}
	if rf.server != "" || os.Getenv("KILN_SERVER") != "" {
		c, err := remoteClient(rf, stderr)
		if err != nil {
			return err
		}
		return mcp.Serve(ctx, mcp.NewServer(version, mcp.StdioClient(c)))
	}
	return localMCP(ctx, *data, *pool, httpCfg, log)
}

// remoteClient is the client of --server (or $KILN_SERVER) with its key.
func remoteClient(rf remoteFlags, stderr io.Writer) (*client.Client, error) {
	srv, key, err := remoteConfig(rf.server, rf.key, os.Getenv, stderr)
	if err != nil {
		return nil, err
	}
	if key == "" {
		return nil, kiln.Errorf(kiln.Invalid, "kiln mcp --server needs an API key: --key KEY or $KILN_KEY")
	}
	c, err := client.New(srv, key, client.WithUserAgent("kiln-mcp/"+version))
	if err != nil {
		return nil, kiln.Wrap(kiln.Invalid, err, "%v", err)
	}
	return c, nil
}

// localMCP wires what kiln serve wires (store, native backend, service,
// API handler) with no listening socket, and serves MCP through an
// in-process client of that handler, so local tool calls follow the same
// rules as the service's.
func localMCP(ctx context.Context, data string, pool int, httpCfg server.Config, log *slog.Logger) error {
	if os.Geteuid() != 0 {
		return kiln.Errorf(kiln.Invalid, "kiln mcp runs sandboxes on this machine, which needs root (namespaces, cgroups); "+
			"run it as root, or use a kiln server: kiln mcp --server URL --key KEY")
	}
	temp := data == ""
	if temp {
		d, err := os.MkdirTemp("", "kiln-mcp-")
		if err != nil {
			return kiln.Wrap(kiln.Invalid, err, "cannot make a temporary data directory")
		}
		data = d
		defer os.RemoveAll(d)
		// MkdirTemp's 0700 would keep the sandboxes' users from reaching
		// their workspaces below it.
		if err := os.Chmod(d, 0o711); err != nil {
			return kiln.Wrap(kiln.Invalid, err, "cannot set the mode of %s", d)
		}
	} else if err := os.MkdirAll(data, 0o711); err != nil {
		return kiln.Wrap(kiln.Invalid, err, "cannot make the data directory %s", data)
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
	cfg.DataDir, cfg.PoolSize = data, pool
	if pool <= 0 {
		cfg.PoolSize = -1 // 0 is the default's size
	}
	if temp {
		cfg.Workspaces = workspace.Tmpfs // nothing to keep past this process
	}
	svc, err := service.New(ctx, cfg, st, engine.New(b, log), log)
	if err != nil {
		return err
	}
	defer func() {
		svc.Close(context.Background())
		if temp {
			removeWorkspaces(filepath.Join(data, "workspaces"), log)
		}
	}()
	key, err := localKey(ctx, svc, st)
	if err != nil {
		return err
	}
	c, err := tools.InProcess(server.New(svc, httpCfg, log), key, "127.0.0.1:0")
	if err != nil {
		return err
	}
	return mcp.Serve(ctx, mcp.NewServer(version, mcp.StdioClient(c)))
}

// localKey is an admin key of the local store: the first one when the
// store is new, else a new one for this run.
func localKey(ctx context.Context, svc *service.Service, st store.Store) (string, error) {
	key, err := svc.Bootstrap(ctx)
	if err != nil || key != "" {
		return key, err
	}
	_, k, err := service.HostAdminKey(ctx, st, "", "kiln mcp")
	return k.Secret(), err
}

// removeWorkspaces unmounts and removes the workspaces of a temporary
// data directory (sessions' and the warm pool's), which the service keeps
// across a stop by design, so that the directory can go.
func removeWorkspaces(root string, log *slog.Logger) {
	ws, err := workspace.OpenKind(root, workspace.Tmpfs)
	if err != nil {
		log.Warn("removing workspaces at exit", "err", err)
		return
	}
	ids, _ := ws.List()
	for _, id := range ids {
		if err := ws.Remove(id); err != nil {
			log.Warn("removing a workspace at exit", "workspace", id, "err", err)
		}
	}
}
