package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/kiln-dev/kiln/internal/engine"
	"github.com/kiln-dev/kiln/internal/kiln"
	"github.com/kiln-dev/kiln/internal/server"
	"github.com/kiln-dev/kiln/internal/service"
	"github.com/kiln-dev/kiln/internal/stack"
	"github.com/kiln-dev/kiln/internal/store"
	"github.com/kiln-dev/kiln/internal/store/postgres"
	"github.com/kiln-dev/kiln/internal/store/sqlite"
	"github.com/kiln-dev/kiln/internal/workspace"
)

// DefaultListen is where kiln serve listens unless told otherwise: this
// machine only.
const DefaultListen = "127.0.0.1:8420"

const serveUsage = `Usage: kiln serve [flags]

Runs the kiln service: the HTTP API under /v1 on the embedded defaults
(SQLite in the data directory). On the first start it creates an admin
API key and prints it once.

Flags:
`

type serveFlags struct {
	listen, data, db, keyFile, logLevel string
	logFormat, metricsAddr              string
	config, backend                     string
	dockerRuntime                       string
	k8s                                 kubernetesFlags
	svc                                 service.Config
	http                                server.Config
}

func parseServe(args []string, stderr io.Writer) (*serveFlags, error) {
	f := &serveFlags{}
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, serveUsage); fs.PrintDefaults() }
	sd, hd := service.DefaultConfig(), server.DefaultConfig()
	fs.StringVar(&f.listen, "listen", DefaultListen, "address to listen on (host:port)")
	fs.StringVar(&f.data, "data", "/var/lib/kiln", "data directory: the SQLite database and the session workspaces")
	fs.TextVar(&f.svc.Workspaces, "workspaces", sd.Workspaces, "where session workspaces live, a `kind`: disk (an ext4 image per session in the data directory; survives a reboot) or tmpfs (memory; a reboot loses them)")
	addBackendFlag(fs, &f.backend)
	addDockerRuntimeFlag(fs, &f.dockerRuntime)
	addKubernetesFlags(fs, &f.k8s)
	fs.StringVar(&f.db, "db", "", "PostgreSQL DSN (postgres://...); empty: $KILN_DB, else SQLite in the data directory")
	fs.StringVar(&f.keyFile, "admin-key-file", "", "also write the first admin key to this file (mode 0600)")
	fs.StringVar(&f.logLevel, "log-level", "info", "debug, info, warn or error; info logs every request")
	fs.StringVar(&f.logFormat, "log-format", "text", "text or json (one JSON object a line)")
	fs.StringVar(&f.metricsAddr, "metrics-addr", "", "also serve GET /metrics with no API key on this address (host:port), for Prometheus; the API's /metrics needs an admin key")
	fs.IntVar(&f.svc.PoolSize, "pool", sd.PoolSize, "warm Python sandboxes kept ready (0 disables)")
	fs.IntVar(&f.svc.RunPoolSize, "run-pool", 2, "per language (python, javascript), sandboxes with a started interpreter kept ready for one-shot runs, each used once (0 disables)")
	fs.DurationVar(&f.svc.IdleTTL, "idle-ttl", sd.IdleTTL, "a session's idle TTL when it asks for none")
	fs.DurationVar(&f.svc.MaxIdleTTL, "max-idle-ttl", sd.MaxIdleTTL, "the longest idle TTL a non-admin may ask for")
	fs.DurationVar(&f.svc.ReplicaGone, "replica-gone", service.DefaultReplicaGone, "with --db (several replicas): how long a replica may miss heartbeats before another takes over its sessions and batches")
	addSessionLimitFlags(fs, &f.svc.DefaultLimits, &f.svc.MaxLimits)
	fs.Int64Var(&f.svc.CPUSecondsPerDay, "cpu-seconds-per-day", 0, "CPU-seconds of cells and runs per user per UTC day; beyond, 429 (0: no budget)")
	fs.StringVar(&f.config, "config", "", "a JSON file of settings, keyed by these flags' names: {\"max-memory\": \"4G\", \"pool\": 2}; flags on the command line win")
	fs.IntVar(&f.svc.MaxSessionsPerUser, "max-sessions", sd.MaxSessionsPerUser, "active sessions per user")
	fs.Int64Var(&f.svc.MaxWorkspaceBytesPerUser, "workspace-quota", sd.MaxWorkspaceBytesPerUser, "bytes of workspace per user, all active sessions together")
	fs.IntVar(&f.svc.Concurrency, "concurrency", sd.Concurrency, "cells and runs at once, all users together (a slot is not a CPU: cgroups share those)")
	fs.IntVar(&f.svc.UserConcurrency, "user-concurrency", 0, "cells and runs at once of one user (default: a quarter of --concurrency, at least 2)")
	fs.IntVar(&f.svc.QueueLength, "queue", sd.QueueLength, "cells and runs waiting at most; beyond, 503 at once")
	fs.IntVar(&f.svc.UserQueueLength, "user-queue", 0, "cells and runs of one user waiting at most; beyond, 429 at once (default: a quarter of --queue)")
	fs.Int64Var(&f.svc.MaxCodeBytes, "max-code", sd.MaxCodeBytes, "bytes of code per cell or one-shot run")
	fs.Int64Var(&f.svc.BuildCacheBytes, "build-cache", service.DefaultBuildCacheBytes, "bytes of build caches per user (Go's build cache, compiled programs, Cargo's target directory); a user's over it are dropped (negative: no build caches)")
	fs.Func("mount-root", "allow sessions to mount folders under this host `folder` read-only (repeatable; none: no mounts)", func(v string) error {
		return addMountRoot(&f.svc.MountRoots, v)
	})
	fs.Func("egress-allow", "the network ceiling: `hosts` a session's allowlist may name, comma-separated (example.com, *.example.com, host:8443; repeatable); none: sessions get no network, only admins may open it", func(v string) error {
		return addEgressAllow(&f.svc.NetworkCeiling, v)
	})
	addEgressFlags(fs, &f.svc.Egress)
	fs.Var(environmentsValue{&f.svc.Environments}, "environments", "prebuilt environments, a JSON `array` (best in the --config file): [{\"name\": \"data-science\", \"pip\": [\"pandas==2.2.2\"], \"npm\": [\"lodash@4.17.21\"]}]; kiln env build NAME builds one")
	fs.Float64Var(&f.http.RatePerSecond, "rate", hd.RatePerSecond, "requests per second per API key, and per user (all its keys)")
	fs.IntVar(&f.http.RateBurst, "burst", hd.RateBurst, "request burst per API key, and per user")
	fs.Float64Var(&f.http.AuthFailuresPerMinute, "auth-failures", hd.AuthFailuresPerMinute, "failed authentications a minute per client address; beyond, 429")
	fs.Int64Var(&f.http.BodyMinRate, "body-min-rate", hd.BodyMinRate, "bytes a second a request body must arrive at, after 30 s; slower is cut off with 408")
	fs.Int64Var(&f.http.MaxSpoolBytesPerUser, "spool-per-user", hd.MaxSpoolBytesPerUser, "bytes of archive uploads being received at once per user")
	fs.Int64Var(&f.http.MaxSpoolBytes, "spool-total", hd.MaxSpoolBytes, "bytes of archive uploads being received at once, all users")
	fs.Int64Var(&f.http.MaxUploadBytes, "max-upload", hd.MaxUploadBytes, "bytes per upload")
	fs.Int64Var(&f.http.MaxJSONBytes, "max-json", hd.MaxJSONBytes, "bytes per JSON request body")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil, err
		}
		return nil, errUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "kiln serve: unexpected argument %q\n", fs.Arg(0))
		return nil, errUsage
	}
	if f.config != "" {
		if err := applyConfigFile(fs, f.config); err != nil {
			return nil, err
		}
	}
	if f.db == "" {
		// The DSN holds a password: from the environment (a Secret, in a
		// Pod) it stays off the command line, which any user of the host
		// can read in /proc.
		f.db = os.Getenv("KILN_DB")
	}
	if err := finishEgressFlags(&f.svc.Egress, f.data); err != nil {
		return nil, err
	}
	if f.svc.PoolSize == 0 {
		f.svc.PoolSize = -1 // the flag's 0 means off; the config's 0 means default
	}
	if err := checkServeFlags(f); err != nil {
		return nil, err
	}
	if f.backend == "kubernetes" {
		// A sandbox Pod keeps its workspace in the Pod (an emptyDir or a
		// PVC): the directory on kiln's own host only names it, so it is
		// a plain one, neither mounted nor root-owned, and kiln serve can
		// run as a non-root Pod (deploy/kubernetes).
		f.svc.Workspaces = workspace.Plain
		// Warm Pods (--k8s-warm-pods) are made for what a session gets
		// when it asks for nothing.
		f.k8s.warmLimits = f.svc.DefaultLimits
	}
	return f, nil
}

func serveCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	f, err := parseServe(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return nil
	}
	if err != nil {
		return err
	}
	log, err := newLogger(stderr, f.logLevel, f.logFormat)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(f.data, 0o711); err != nil {
		return kiln.Wrap(kiln.Invalid, err, "cannot make the data directory %s", f.data)
	}
	f.svc.DataDir = f.data
	st, err := openStore(ctx, f)
	if err != nil {
		return err
	}
	if pg, ok := st.(*store.DB); ok && f.db != "" {
		f.svc.Replicas, f.svc.ReplicaAddr = postgres.NewReplicas(pg), f.listen
	}
	var b engine.Backend
	if f.backend == "kubernetes" {
		b, err = newKubernetesBackend(ctx, f.k8s, log)
	} else {
		b, err = newBackend(ctx, f.backend, log)
	}
	if err == nil {
		err = setDockerRuntime(ctx, b, f.dockerRuntime)
	}
	if err == nil && f.svc.Replicas != nil {
		err = nameReplica(b, f.data)
	}
	if err == nil {
		err = claimBackend(ctx, b, f.data, log)
	}
	if err != nil {
		st.Close()
		return err
	}
	k, err := stack.New(ctx, stack.Config{Service: f.svc, HTTP: f.http, Store: st, Log: log, Engine: engine.New(b, log)})
	if err != nil {
		return err
	}
	if c, ok := b.(io.Closer); ok && f.backend == "kubernetes" {
		// after the service (defers run last first): the warm pool's
		// Pods are deleted, not left to the next start's reaping
		defer c.Close()
	}
	defer k.Close(context.Background())
	if err := announceKey(ctx, k.Service, f, stdout); err != nil {
		return err
	}
	h := k.Server
	if f.metricsAddr != "" {
		if err := serveMetrics(ctx, f.metricsAddr, h.MetricsHandler(), log); err != nil {
			return err
		}
	}
	return listenAndServe(ctx, f, h, log)
}

func openStore(ctx context.Context, f *serveFlags) (store.Store, error) {
	if f.db != "" {
		if !strings.HasPrefix(f.db, "postgres://") && !strings.HasPrefix(f.db, "postgresql://") && !strings.Contains(f.db, "=") {
			return nil, kiln.Errorf(kiln.Invalid, "--db must be a PostgreSQL DSN (postgres://... or key=value pairs)")
		}
		return postgres.Open(ctx, f.db)
	}
	return sqlite.Open(ctx, filepath.Join(f.data, "kiln.db"))
}

// announceKey prints the first admin key once, as Jupyter prints its token.
func announceKey(ctx context.Context, svc *service.Service, f *serveFlags, stdout io.Writer) error {
	key, err := svc.Bootstrap(ctx)
	if err != nil || key == "" {
		return err
	}
	if f.keyFile != "" {
		if err := os.WriteFile(f.keyFile, []byte(key+"\n"), 0o600); err != nil {
			return kiln.Wrap(kiln.Invalid, err, "cannot write the admin key to %s", f.keyFile)
		}
	}
	fmt.Fprintf(stdout, "\nkiln: created the admin API key. It is shown this once; kiln keeps only its hash:\n\n    %s\n\n"+
		"    curl -H 'Authorization: Bearer %s' http://%s/v1/languages\n\n", key, key, f.listen)
	return nil
}

func listenAndServe(ctx context.Context, f *serveFlags, h *server.Server, log *slog.Logger) error {
	ln, err := net.Listen("tcp", f.listen)
	if err != nil {
		return kiln.Wrap(kiln.Invalid, err, "cannot listen on %s", f.listen)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute,
		BaseContext: func(net.Listener) context.Context { return ctx }}
	log.Info("kiln serving", "addr", ln.Addr().String(), "data", f.data, "workspaces", string(f.svc.Workspaces), "version", version)
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	log.Info("kiln stopping")
	stop, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	srv.Shutdown(stop)
	return nil
}

// addMountRoot adds an administrator's mount root: an absolute folder,
// kept as its real path so that sources are resolved beneath it.
func addMountRoot(roots *[]string, v string) error {
	if !filepath.IsAbs(v) {
		return fmt.Errorf("%q is not an absolute path", v)
	}
	real, err := filepath.EvalSymlinks(v)
	if err != nil {
		return err
	}
	if fi, err := os.Stat(real); err != nil || !fi.IsDir() {
		return fmt.Errorf("%s is not a folder", v)
	}
	if real == "/" {
		return fmt.Errorf("/ cannot be a mount root: name the folders that hold project code")
	}
	*roots = append(*roots, real)
	return nil
}
