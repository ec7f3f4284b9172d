package client

import (
	"bytes"
	"io"
	"net/http"
	"strings"
	"testing"
)

// TestFilePathsInURLs: each name is escaped on its own, the leading slash
// is dropped, and nothing is cleaned: ".." reaches the server as it is.
func TestFilePathsInURLs(t *testing.T) {
	for _, tt := range []struct{ path, uri string }{
		{"a.txt", "/v1/sessions/s1/files/a.txt?stat=true"},
		{"/d/a.txt", "/v1/sessions/s1/files/d/a.txt?stat=true"},
		{"//d", "/v1/sessions/s1/files/d?stat=true"},
		{"a b/c?d#e%f", "/v1/sessions/s1/files/a%20b/c%3Fd%23e%25f?stat=true"},
		{"d/", "/v1/sessions/s1/files/d/?stat=true"},
		{"../etc/passwd", "/v1/sessions/s1/files/../etc/passwd?stat=true"},
		{"a/./b/../c", "/v1/sessions/s1/files/a/./b/../c?stat=true"},
		{"ünï/😀", "/v1/sessions/s1/files/%C3%BCn%C3%AF/%F0%9F%98%80?stat=true"},
		{"", "/v1/sessions/s1/files/?stat=true"},
	} {
		c := testServer(t, func(w http.ResponseWriter, r *http.Request) {
			if r.RequestURI != tt.uri {
				t.Errorf("Stat(%q) sent %s; want %s", tt.path, r.RequestURI, tt.uri)
			}
			writeJSON(w, 200, FileInfo{})
		})
		if _, err := c.Stat(ctxT(t), "s1", tt.path); err != nil {
			t.Errorf("Stat(%q): %v", tt.path, err)
		}
	}
}

func TestEmptyPathRefused(t *testing.T) {
	c := testServer(t, func(w http.ResponseWriter, r *http.Request) {
		t.Errorf("a request was sent: %s %s", r.Method, r.RequestURI)
	})
	ctx := ctxT(t)
	if _, err := c.Upload(ctx, "s1", "/", strings.NewReader("x"), true); err == nil {
		t.Error("Upload to the root: no error")
	}
	if err := c.DeleteFile(ctx, "s1", "", true); err == nil {
		t.Error("DeleteFile of the root: no error")
	}
	if _, err := c.Mkdir(ctx, "s1", ""); err == nil {
		t.Error("Mkdir of the root: no error")
	}
	if _, err := c.Move(ctx, "s1", MoveRequest{From: "a"}); err == nil {
		t.Error("Move to the root: no error")
	}
}

// onceReader is a reader that is not a bytes.Reader, so the body is
// streamed with chunked encoding, as a file or pipe would be.
type onceReader struct{ r io.Reader }

func (o onceReader) Read(p []byte) (int, error) { return o.r.Read(p) }

func TestUpload(t *testing.T) {
	data := bytes.Repeat([]byte("0123456789"), 100_000)
	for _, tt := range []struct {
		overwrite bool
		uri       string
	}{
		{true, "/v1/sessions/s1/files/out/data.bin"},
		{false, "/v1/sessions/s1/files/out/data.bin?overwrite=false"},
	} {
		c := testServer(t, func(w http.ResponseWriter, r *http.Request) {
			if r.Method != "PUT" || r.RequestURI != tt.uri {
				t.Errorf("request %s %s; want PUT %s", r.Method, r.RequestURI, tt.uri)
			}
			if ct := r.Header.Get("Content-Type"); ct != "application/octet-stream" {
				t.Errorf("Content-Type %q", ct)
			}
			got, _ := io.ReadAll(r.Body)
			if !bytes.Equal(got, data) {
				t.Errorf("the server got %d bytes; want the %d sent", len(got), len(data))
			}
			writeJSON(w, 201, FileInfo{Path: "out/data.bin", Size: int64(len(got))})
		})
		fi, err := c.Upload(ctxT(t), "s1", "/out/data.bin", onceReader{bytes.NewReader(data)}, tt.overwrite)
		if err != nil {
			t.Fatal(err)
		}
		if fi == nil || fi.Size != int64(len(data)) {
			t.Errorf("FileInfo %+v; want size %d", fi, len(data))
		}
	}
}

func TestUploadWithoutAnswerBody(t *testing.T) {
	c := testServer(t, func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(201) })
	fi, err := c.Upload(ctxT(t), "s1", "a", strings.NewReader("x"), true)
	if err != nil || fi != nil {
		t.Errorf("Upload answered 201 without a body: %+v, %v; want nil, nil", fi, err)
	}
}

func TestUploadConflict(t *testing.T) {
	c := testServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/problem+json")
		w.WriteHeader(409)
		io.WriteString(w, `{"status":409,"code":"conflict","detail":"a exists"}`)
	})
	_, err := c.Upload(ctxT(t), "s1", "a", strings.NewReader("x"), false)
	if p, ok := err.(*Problem); !ok || p.Code != "conflict" {
		t.Errorf("err = %v; want the conflict Problem", err)
	}
}

func TestDownload(t *testing.T) {
	data := bytes.Repeat([]byte{0, 1, 2, 255}, 50_000)
	c := testServer(t, func(w http.ResponseWriter, r *http.Request) {
		if r.Method != "GET" || r.RequestURI != "/v1/sessions/s1/files/plot.png" {
			t.Errorf("request %s %s", r.Method, r.RequestURI)
		}
		w.Header().Set("Content-Type", "image/png")
		w.Write(data[:1000])
		w.(http.Flusher).Flush()
		w.Write(data[1000:])
	})
	var buf bytes.Buffer
	ct, err := c.Download(ctxT(t), "s1", "plot.png", &buf)
	if err != nil {
		t.Fatal(err)
	}
	if ct != "image/png" || !bytes.Equal(buf.Bytes(), data) {
		t.Errorf("Download: content type %q, %d bytes; want image/png, %d bytes", ct, buf.Len(), len(data))
	}
}

func TestDownloadArchive(t *testing.T) {
	c := testServer(t, func(w http.ResponseWriter, r *http.Request) {
		if want := "/v1/sessions/s1/files/out?archive=zip"; r.RequestURI != want {
			t.Errorf("request %s; want %s", r.RequestURI, want)
		}
		w.Header().Set("Content-Type", "application/zip")
		io.WriteString(w, "PK...")
	})
	var buf bytes.Buffer
	if err := c.DownloadArchive(ctxT(t), "s1", "out", "zip", &buf); err != nil || buf.String() != "PK..." {
		t.Errorf("DownloadArchive: %q, %v", buf.String(), err)
	}
}

func TestDownloadNotFound(t *testing.T) {
	c := testServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/problem+json")
		w.WriteHeader(404)
		io.WriteString(w, `{"status":404,"code":"not_found","detail":"no file x"}`)
	})
	var buf bytes.Buffer
	_, err := c.Download(ctxT(t), "s1", "x", &buf)
	if p, ok := err.(*Problem); !ok || p.Code != "not_found" {
		t.Errorf("err = %v; want the not_found Problem", err)
	}
	if buf.Len() != 0 {
		t.Errorf("the problem's body reached the writer: %q", buf.String())
	}
}

func TestUploadMultipart(t *testing.T) {
	c := testServer(t, func(w http.ResponseWriter, r *http.Request) {
		if r.Method != "POST" || r.RequestURI != "/v1/sessions/s1/files/in" {
			t.Errorf("request %s %s", r.Method, r.RequestURI)
		}
		mr, err := r.MultipartReader()
		if err != nil {
			t.Fatalf("not multipart: %v", err)
		}
		var got []string
		for {
			p, err := mr.NextPart()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(p)
			got = append(got, p.FormName()+":"+p.FileName()+":"+string(b))
		}
		diff(t, "parts", got, []string{`file:a.csv:1,2`, `file:say "hi".txt:hi`})
		writeJSON(w, 201, Uploaded{Files: []FileInfo{{Path: "in/a.csv"}, {Path: `in/say "hi".txt`}}})
	})
	up, err := c.UploadMultipart(ctxT(t), "s1", "in", []File{{Path: "a.csv", Content: []byte("1,2")}, {Path: `say "hi".txt`, Content: []byte("hi")}})
	if err != nil {
		t.Fatal(err)
	}
	if len(up.Files) != 2 {
		t.Errorf("Uploaded %+v; want two files", up)
	}
}

func TestExtract(t *testing.T) {
	for _, tt := range []struct{ dir, format, uri, ct string }{
		{"", "tar", "/v1/sessions/s1/files/?extract=tar", "application/x-tar"},
		{"pkg", "zip", "/v1/sessions/s1/files/pkg?extract=zip", "application/zip"},
	} {
		c := testServer(t, func(w http.ResponseWriter, r *http.Request) {
			if r.Method != "POST" || r.RequestURI != tt.uri {
				t.Errorf("request %s %s; want POST %s", r.Method, r.RequestURI, tt.uri)
			}
			if ct := r.Header.Get("Content-Type"); ct != tt.ct {
				t.Errorf("Content-Type %q; want %q", ct, tt.ct)
			}
			if b, _ := io.ReadAll(r.Body); string(b) != "archive bytes" {
				t.Errorf("body %q", b)
			}
			writeJSON(w, 201, Uploaded{Files: []FileInfo{{Path: "x"}}})
		})
		up, err := c.Extract(ctxT(t), "s1", tt.dir, tt.format, onceReader{strings.NewReader("archive bytes")})
		if err != nil || len(up.Files) != 1 {
			t.Errorf("Extract: %+v, %v", up, err)
		}
	}
}
