package server_test

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"

	"github.com/kiln-dev/kiln/client"
)

// TestHostilePaths: every way of naming a place outside the workspace is
// refused or stays inside it, and the host is unchanged.
func TestHostilePaths(t *testing.T) {
	e := newEnv(t, options{})
	ctx := ctxT(t)
	c := e.user("eve")
	k, _ := e.admin.CreateKey(ctx, "me", "raw") // raw requests for what the client would not send
	s, err := c.CreateSession(ctx, client.SessionRequest{})
	if err != nil {
		t.Fatal(err)
	}
	canary, _ := os.ReadFile("/etc/hostname")
	// User code plants links out of the workspace.
	x, err := c.Exec(ctx, s.ID, client.ExecRequest{Code: `import os
os.symlink('/etc/passwd', 'passwd')
os.symlink('/etc', 'etc')
os.symlink('../../../../etc/hostname', 'up')
os.mkfifo('fifo')`})
	if err != nil || x.Status != "ok" {
		t.Fatalf("planting links: %+v %v", x, err)
	}
	base := e.url + "/v1/sessions/" + s.ID
	for _, tc := range []struct {
		name, method, path string
		status             int
	}{
		{"dot-dot", "GET", "/files/../../../etc/passwd", 0},
		{"encoded dot-dot", "GET", "/files/%2e%2e/%2e%2e/etc/passwd", 400},
		{"encoded slash", "GET", "/files/..%2f..%2fetc%2fpasswd", 400},
		{"absolute", "GET", "/files//etc/passwd", 0},
		{"NUL", "GET", "/files/a%00b", 400},
		{"backslash", "GET", "/files/..%5c..%5cetc", 400},
		{"write dot-dot", "PUT", "/files/%2e%2e/x", 400},
		{"write through link dir", "PUT", "/files/etc/kiln-pwned", 0},
		{"write onto link", "PUT", "/files/passwd", 0},
		{"delete dot-dot", "DELETE", "/files/%2e%2e/%2e%2e/etc?recursive=true", 400},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, p := raw(t, tc.method, base+tc.path, k.Secret, "", "pwned")
			if resp.StatusCode < 400 {
				t.Fatalf("%s %s answered %d", tc.method, tc.path, resp.StatusCode)
			}
			if tc.status != 0 && resp.StatusCode != tc.status {
				t.Errorf("%s %s: %d %+v, want %d", tc.method, tc.path, resp.StatusCode, p, tc.status)
			}
		})
	}
	// Reading a planted link gives nothing of the host's.
	for _, name := range []string{"passwd", "up", "etc/hostname"} {
		var buf bytes.Buffer
		_, err := c.Download(ctx, s.ID, name, &buf)
		if err == nil || strings.Contains(buf.String(), "root:") || (len(canary) > 0 && bytes.Contains(buf.Bytes(), canary)) {
			t.Errorf("download %s: err %v, body %q", name, err, trunc(buf.String()))
		}
	}
	_, err = c.Download(ctx, s.ID, "fifo", io.Discard)
	wantProblem(t, "download a FIFO", err, 400, "invalid")

	// Archives with escaping entries are refused before anything is written.
	for name, body := range map[string][]byte{
		"zip dot-dot":  zipOf(t, map[string]string{"ok.txt": "ok", "../../escape.txt": "x"}),
		"zip absolute": zipOf(t, map[string]string{"/etc/escape": "x"}),
		"tar dot-dot":  tarOf(t, "../escape.txt", tar.TypeReg, ""),
		"tar symlink":  tarOf(t, "link", tar.TypeSymlink, "/etc"),
		"tar hardlink": tarOf(t, "hard", tar.TypeLink, "/etc/passwd"),
	} {
		format := "zip"
		if strings.HasPrefix(name, "tar") {
			format = "tar"
		}
		_, err := c.Extract(ctx, s.ID, "in", format, bytes.NewReader(body))
		wantProblem(t, name, err, 400, "invalid")
	}
	if _, err := c.Stat(ctx, s.ID, "in/ok.txt"); err == nil {
		t.Error("a refused archive left a file behind")
	}
	// A zip bomb: 1 GiB of zeros in a few MiB stops at the limit.
	_, err = c.Extract(ctx, s.ID, "bomb", "zip", bytes.NewReader(zipBomb(t)))
	wantProblem(t, "zip bomb", err, 413, "too_large")

	// The host is unchanged and the workspace still works.
	if after, _ := os.ReadFile("/etc/hostname"); !bytes.Equal(after, canary) {
		t.Error("/etc/hostname changed")
	}
	if _, err := os.Stat("/etc/kiln-pwned"); err == nil {
		t.Fatal("/etc/kiln-pwned exists on the host")
	}
	if _, err := c.Upload(ctx, s.ID, "fine.txt", strings.NewReader("fine"), true); err != nil {
		t.Errorf("a plain upload afterwards: %v", err)
	}
	resp, _ := raw(t, "GET", e.url+"/v1/health/ready", "", "", "")
	if resp.StatusCode != http.StatusOK {
		t.Errorf("ready after the hostile requests: %d", resp.StatusCode)
	}
}

func trunc(s string) string {
	if len(s) > 80 {
		return s[:80]
	}
	return s
}

func zipOf(t *testing.T, files map[string]string) []byte {
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for name, body := range files {
		w, err := zw.CreateHeader(&zip.FileHeader{Name: name, Method: zip.Deflate})
		if err != nil {
			t.Fatal(err)
		}
		io.WriteString(w, body)
	}
	zw.Close()
	return buf.Bytes()
}

func tarOf(t *testing.T, name string, typ byte, link string) []byte {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	hdr := &tar.Header{Name: name, Typeflag: typ, Linkname: link, Mode: 0o644}
	if err := tw.WriteHeader(hdr); err != nil {
		t.Fatal(err)
	}
	tw.Close()
	return buf.Bytes()
}

func zipBomb(t *testing.T) []byte {
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	w, err := zw.CreateHeader(&zip.FileHeader{Name: "zeros", Method: zip.Deflate})
	if err != nil {
		t.Fatal(err)
	}
	chunk := make([]byte, 1<<20)
	for range 1024 {
		w.Write(chunk)
	}
	zw.Close()
	return buf.Bytes()
}
