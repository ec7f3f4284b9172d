package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

func TestServeLogFormat(t *testing.T) {
	var buf bytes.Buffer
	log, err := newLogger(&buf, "info", "json")
	if err != nil {
		t.Fatal(err)
	}
	log.Info("request", "route", "GET /v1/sessions", "status", 200)
	log.Debug("hidden")
	var m map[string]any
	if err := json.Unmarshal(buf.Bytes(), &m); err != nil || m["route"] != "GET /v1/sessions" || m["status"] != float64(200) {
		t.Errorf("--log-format json wrote %q (%v), want one JSON line", buf.String(), err)
	}
	for _, tc := range []struct{ level, format, want string }{
		{"info", "yaml", `--log-format "yaml" is not one of text, json`},
		{"loud", "text", `--log-level "loud"`},
	} {
		if _, err := newLogger(io.Discard, tc.level, tc.format); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("newLogger(%q, %q) = %v, want %q", tc.level, tc.format, err, tc.want)
		}
	}
}

func TestServeFlagsChecked(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--max-code", "2000000"}, "--max-code 2000000 is over the 1 MiB"},
		{[]string{"--metrics-addr", DefaultListen}, "--metrics-addr must differ"},
	} {
		_, err := parseServe(tc.args, io.Discard)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("kiln serve %v: %v, want %q", tc.args, err, tc.want)
		}
	}
	f, err := parseServe([]string{"--metrics-addr", "127.0.0.1:9420", "--log-format", "json", "--spool-total", "100"}, io.Discard)
	if err != nil || f.metricsAddr != "127.0.0.1:9420" || f.logFormat != "json" || f.http.MaxSpoolBytes != 100 {
		t.Errorf("flags parsed to %+v, %v", f, err)
	}
}

// TestServeMetricsListener: --metrics-addr listens at once and stops with
// the server.
func TestServeMetricsListener(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	ctx, cancel := context.WithCancel(context.Background())
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "kiln_up 1\n") })
	if err := serveMetrics(ctx, addr, h, slog.New(slog.NewTextHandler(io.Discard, nil))); err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(b) != "kiln_up 1\n" {
		t.Errorf("metrics listener answered %q", b)
	}
	cancel()
	for i := 0; i < 100; i++ {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			return
		}
		c.Close()
		time.Sleep(10 * time.Millisecond)
	}
	t.Error("the metrics listener still accepts after the server stopped")
}
