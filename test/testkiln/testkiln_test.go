package testkiln

import (
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestStartStopRestart: Start gives a server that answers with its admin
// key; Stop is safe twice; a start on the same data directory is a restart
// that keeps the key.
func TestStartStopRestart(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: kiln serve makes sandboxes")
	}
	bin := filepath.Join(t.TempDir(), "kiln")
	build := exec.Command("go", "build", "-o", bin, "github.com/kiln-dev/kiln/cmd/kiln")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build kiln: %v\n%s", err, out)
	}
	s := Start(t, Options{Bin: bin})
	if s.Key == "" || !answers(t, s) {
		t.Fatalf("a started server: key %q, log:\n%s", s.Key, s.Logs())
	}
	s.Stop()
	s.Stop()
	if answers(t, s) {
		t.Errorf("the server still answers after Stop")
	}
	again := Start(t, Options{Bin: bin, Data: s.Data})
	if again.Key != s.Key || !answers(t, again) {
		t.Errorf("a restart on %s: key %q (before %q); want the same key and answers", s.Data, again.Key, s.Key)
	}
}

// answers reports whether the server lists the sessions of its admin key.
func answers(t *testing.T, s *Server) bool {
	req, _ := http.NewRequest("GET", s.URL+"/v1/sessions", nil)
	req.Header.Set("Authorization", "Bearer "+s.Key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}
