package stack

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/kiln-dev/kiln/internal/agent"
	"github.com/kiln-dev/kiln/internal/kiln"
	"github.com/kiln-dev/kiln/internal/service"
)

func TestMain(m *testing.M) {
	agent.Dispatch() // the native backend's sandboxes re-execute this binary
	os.Exit(m.Run())
}

func TestNeedsADataDirectory(t *testing.T) {
	if _, err := New(context.Background(), Config{}); kiln.KindOf(err) != kiln.Invalid {
		t.Errorf("no data directory: %v, want invalid", err)
	}
}

// TestStackServesAndKeepsItsStore: a stack made as kiln serve makes it
// answers the API with the first admin's key, and a second stack on the
// same data directory finds that admin (no new bootstrap key).
func TestStackServesAndKeepsItsStore(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: the native backend makes sandboxes")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	top := t.TempDir()
	// The sandboxes' host uids must reach the data directory below it.
	os.Chmod(filepath.Dir(top), 0o711)
	os.Chmod(top, 0o711)
	dir := filepath.Join(top, "data")
	cfg := Config{Service: service.Config{DataDir: dir, PoolSize: -1}}
	s, err := New(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	key, err := s.Service.Bootstrap(ctx)
	if err != nil || key == "" {
		t.Fatalf("bootstrap: %q, %v", key, err)
	}
	hs := httptest.NewServer(s.Server)
	req, _ := http.NewRequestWithContext(ctx, "GET", hs.URL+"/v1/languages", nil)
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("GET /v1/languages: %d, want 200", resp.StatusCode)
	}
	hs.Close()
	if err := s.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(dir); err != nil || fi.Mode().Perm() != 0o711 {
		t.Errorf("data directory: %v, %v; want it made with mode 0711", fi, err)
	}
	again, err := New(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close(ctx)
	if k, err := again.Service.Bootstrap(ctx); err != nil || k != "" {
		t.Errorf("a second stack on the same data: bootstrap key %q, %v; want none (the store was kept)", k, err)
	}
}
