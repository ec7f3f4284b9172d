package main

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/kiln-dev/kiln/internal/engine"
	"github.com/kiln-dev/kiln/internal/kiln"
)

// newLogger is kiln serve's log: text (the default, for a terminal or the
// journal) or JSON lines (for a log collector), at the level asked for.
func newLogger(w io.Writer, level, format string) (*slog.Logger, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		return nil, kiln.Errorf(kiln.Invalid, "--log-level %q is not one of debug, info, warn, error", level)
	}
	opts := &slog.HandlerOptions{Level: l}
	switch format {
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, kiln.Errorf(kiln.Invalid, "--log-format %q is not one of text, json", format)
}

// checkServeFlags refuses values that the flag package accepts but kiln
// cannot honour.
func checkServeFlags(f *serveFlags) error {
	if f.svc.MaxCodeBytes > engine.MaxCodeBytes {
		return kiln.Errorf(kiln.Invalid, "--max-code %d is over the %s that kiln can run", f.svc.MaxCodeBytes, kiln.FormatBytes(engine.MaxCodeBytes))
	}
	if f.metricsAddr != "" && f.metricsAddr == f.listen {
		return kiln.Errorf(kiln.Invalid, "--metrics-addr must differ from --listen (%s)", f.listen)
	}
	return nil
}

// serveMetrics serves GET /metrics with no key on addr until ctx ends,
// so that Prometheus needs no API key. It returns once it listens.
func serveMetrics(ctx context.Context, addr string, h http.Handler, log *slog.Logger) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return kiln.Wrap(kiln.Invalid, err, "cannot listen on --metrics-addr %s", addr)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute}
	log.Info("kiln metrics", "addr", ln.Addr().String(), "route", "GET /metrics")
	go srv.Serve(ln)
	go func() {
		<-ctx.Done()
		srv.Close()
	}()
	return nil
}
