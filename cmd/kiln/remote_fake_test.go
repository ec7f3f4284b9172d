package main

// fakeKiln is a small kiln server for the remote commands' tests: the few
// routes they use, answering like the API in client/doc.go, with canned
// data and a log of what it was sent. It is a protocol fake; end-to-end
// tests against the real server come with the server.

import (
	"archive/tar"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kiln-dev/kiln/client"
)

const fakeKey = "kiln_fake_secret"

var t0 = time.Date(2025, 3, 4, 5, 6, 7, 0, time.UTC)

type fakeKiln struct {
	t   *testing.T
	srv *httptest.Server

	mu       sync.Mutex
	requests []string          // "METHOD URI", in order
	bodies   map[string][]byte // the last body sent to each "METHOD URI"
	files    map[string][]byte // the workspace of session s1
}

func newFakeKiln(t *testing.T) *fakeKiln {
	f := &fakeKiln{t: t, bodies: map[string][]byte{}, files: map[string][]byte{
		"data/a.csv": []byte("x,y\n1,2\n"),
		"notes.txt":  []byte("hello\n"),
	}}
	mux := http.NewServeMux()
	for pattern, h := range map[string]func(http.ResponseWriter, *http.Request, []byte){
		"POST /v1/sessions":                        f.createSession,
		"GET /v1/sessions":                         f.listSessions,
		"GET /v1/sessions/{id}":                    f.getSession,
		"DELETE /v1/sessions/{id}":                 f.noContent,
		"POST /v1/sessions/{id}/interrupt":         f.noContent,
		"POST /v1/sessions/{id}/restart":           f.noContent,
		"PUT /v1/sessions/{id}/network":            f.setNetwork,
		"POST /v1/sessions/{id}/executions":        f.execute,
		"GET /v1/sessions/{id}/executions":         f.history,
		"GET /v1/sessions/{id}/files":              f.getFile,
		"GET /v1/sessions/{id}/files/{path...}":    f.getFile,
		"PUT /v1/sessions/{id}/files/{path...}":    f.putFile,
		"POST /v1/sessions/{id}/files/{path...}":   f.extract,
		"DELETE /v1/sessions/{id}/files/{path...}": f.deleteFile,
		"POST /v1/users":                           f.createUser,
		"GET /v1/users":                            f.listUsers,
		"GET /v1/users/{id}":                       f.getUser,
		"POST /v1/users/{id}/keys":                 f.createKey,
		"GET /v1/users/{id}/keys":                  f.listKeys,
		"DELETE /v1/users/{id}/keys/{key}":         f.noContent,
	} {
		mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
			body, _ := io.ReadAll(r.Body)
			f.mu.Lock()
			f.requests = append(f.requests, r.Method+" "+r.RequestURI)
			f.bodies[r.Method+" "+r.RequestURI] = body
			f.mu.Unlock()
			if r.Header.Get("Authorization") != "Bearer "+fakeKey {
				problem(w, 401, "unauthenticated", "a valid API key is needed")
				return
			}
			if id := r.PathValue("id"); strings.HasPrefix(r.URL.Path, "/v1/sessions/") && id != "s1" {
				problem(w, 404, "not_found", "no session "+id)
				return
			}
			h(w, r, body)
		})
	}
	f.srv = httptest.NewServer(mux)
	t.Cleanup(f.srv.Close)
	return f
}

func problem(w http.ResponseWriter, status int, code, detail string) {
	w.Header().Set("Content-Type", "application/problem+json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(client.Problem{Title: http.StatusText(status), Status: status, Code: code, Detail: detail})
}

func answer(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

// sent returns the requests made, in order.
func (f *fakeKiln) sent() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.requests...)
}

func (f *fakeKiln) body(req string) []byte {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.bodies[req]
}

// file returns a workspace file's content.
func (f *fakeKiln) file(path string) []byte {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.files[path]
}

// paths lists the workspace's files.
func (f *fakeKiln) paths() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var ps []string
	for p := range f.files {
		ps = append(ps, p)
	}
	return ps
}

func (f *fakeKiln) noContent(w http.ResponseWriter, r *http.Request, _ []byte) {
	w.WriteHeader(http.StatusNoContent)
}

var fakeSessions = []client.Session{
	{ID: "s1", Status: "active", Languages: []string{"python", "bash"}, Metadata: map[string]string{"conv": "42", "app": "demo"},
		IdleTTLSeconds: 3600, Network: client.NetworkPolicy{Mode: "none"}, Limits: client.Limits{TimeoutMS: 30000, MemoryBytes: 512 << 20, CPUMillis: 1000, Pids: 128},
		Created: t0, LastActive: t0.Add(time.Minute)},
	{ID: "s0", Status: "ended", Languages: []string{"javascript"}, Created: t0.Add(-time.Hour), LastActive: t0.Add(-time.Hour),
		EndReason: "idle"},
}

func (f *fakeKiln) createSession(w http.ResponseWriter, r *http.Request, body []byte) {
	var req client.SessionRequest
	if err := json.Unmarshal(body, &req); err != nil {
		problem(w, 400, "invalid", "the body is not a SessionRequest")
		return
	}
	s := client.Session{ID: "s-new", Status: "active", Languages: req.Languages, Limits: req.Limits, IdleTTLSeconds: req.IdleTTLSeconds,
		Network: client.NetworkPolicy{Mode: "none"}, Metadata: req.Metadata, Created: t0, LastActive: t0}
	answer(w, 201, s)
}

// listSessions answers in pages of one, so the command must follow the
// cursor.
func (f *fakeKiln) listSessions(w http.ResponseWriter, r *http.Request, _ []byte) {
	var match []client.Session
	for _, s := range fakeSessions {
		if st := r.URL.Query().Get("status"); st != "" && s.Status != st {
			continue
		}
		if v := r.URL.Query().Get("metadata.conv"); v != "" && s.Metadata["conv"] != v {
			continue
		}
		match = append(match, s)
	}
	i := 0
	fmt.Sscan(r.URL.Query().Get("cursor"), &i)
	list := client.SessionList{Sessions: []client.Session{}}
	if i < len(match) {
		list.Sessions = match[i : i+1]
		if i+1 < len(match) {
			list.NextCursor = fmt.Sprint(i + 1)
		}
	}
	answer(w, 200, list)
}

func (f *fakeKiln) getSession(w http.ResponseWriter, r *http.Request, _ []byte) {
	answer(w, 200, fakeSessions[0])
}

// Canned cells, chosen by their code.
func fakeCell(req client.ExecRequest) (events []client.Event, status client.CellStatus, cellErr *client.CellError) {
	out := func(typ, data string) client.Event { return client.Event{Type: typ, Data: data} }
	display := func(data map[string]string) client.Event {
		o := client.Output{Data: map[string]json.RawMessage{}}
		for k, v := range data {
			b, _ := json.Marshal(v)
			o.Data[k] = b
		}
		return client.Event{Type: client.EventDisplay, Output: &o}
	}
	switch req.Code {
	case "print('hi')":
		return []client.Event{out("stdout", "hi\n")}, "ok", nil
	case "plot()":
		return []client.Event{
			out("stdout", "drawing\n"),
			display(map[string]string{"image/png": "iVBORw0KGgoAAAANSUhEUg==", "text/plain": "<Figure>"}),
			display(map[string]string{"text/plain": "42"}),
			display(map[string]string{"text/html": "<b>x</b>", "application/json": "{}"}),
		}, "ok", nil
	case "1/0":
		return []client.Event{out("stdout", "before\n")}, "error", &client.CellError{Name: "ZeroDivisionError", Message: "division by zero",
			Traceback: []string{"Traceback (most recent call last):", `  Cell line 1, in <module>`, "ZeroDivisionError: division by zero"}}
	case "sleep()":
		return []client.Event{out("stderr", "zzz\n")}, "timeout", nil
	case "input()":
		if req.Stdin == nil {
			return nil, "error", &client.CellError{Name: "EOFError", Message: "no stdin"}
		}
		return []client.Event{out("stdout", "got "+*req.Stdin)}, "ok", nil
	}
	return []client.Event{out("stdout", "ran "+req.Language+": "+req.Code+"\n")}, "ok", nil
}

func (f *fakeKiln) execute(w http.ResponseWriter, r *http.Request, body []byte) {
	var req client.ExecRequest
	if err := json.Unmarshal(body, &req); err != nil {
		problem(w, 400, "invalid", "the body is not an ExecRequest")
		return
	}
	if req.Code == "boom" {
		problem(w, 503, "unavailable", "the session's sandbox is gone")
		return
	}
	events, status, cellErr := fakeCell(req)
	x := client.Execution{ID: "e7", SessionID: "s1", Seq: 7, Language: first(req.Language, "python"), Code: req.Code, Status: "running", Started: t0}
	res := &client.CellResult{Language: x.Language, Status: status, Outputs: []client.Output{}, Error: cellErr}
	for _, ev := range events {
		switch ev.Type {
		case "stdout":
			res.Stdout += ev.Data
		case "stderr":
			res.Stderr += ev.Data
		case "display":
			res.Outputs = append(res.Outputs, *ev.Output)
		}
	}
	done := x
	done.Status, done.Result = string(status), res
	ended := t0.Add(1500 * time.Millisecond)
	done.Ended = &ended
	if r.Header.Get("Accept") != "text/event-stream" {
		answer(w, 200, done)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	frame := func(ev client.Event) {
		b, _ := json.Marshal(ev)
		fmt.Fprintf(w, "event: %s\ndata: %s\n\n: keep-alive\n\n", ev.Type, b)
		w.(http.Flusher).Flush()
	}
	frame(client.Event{Type: "started", Execution: &x})
	if req.Code == "hang()" {
		<-r.Context().Done() // until the client goes away
		return
	}
	for _, ev := range events {
		frame(ev)
	}
	frame(client.Event{Type: "done", Execution: &done})
}

func (f *fakeKiln) history(w http.ResponseWriter, r *http.Request, _ []byte) {
	end := func(d time.Duration) *time.Time { e := t0.Add(d); return &e }
	all := []client.Execution{
		{ID: "e1", Seq: 1, Language: "python", Code: "import pandas as pd\ndf = pd.read_csv('data/a.csv')", Status: "ok", Started: t0, Ended: end(1234 * time.Millisecond)},
		{ID: "e2", Seq: 2, Language: "bash", Code: "  ls -la\x1b[31m  ", Status: "error", Started: t0.Add(time.Minute), Ended: end(time.Minute + 20*time.Millisecond)},
		{ID: "e3", Seq: 3, Language: "python", Code: strings.Repeat("x", 80), Status: "running", Started: t0.Add(2 * time.Minute)},
	}
	if r.URL.Query().Get("cursor") == "" {
		answer(w, 200, client.ExecutionList{Executions: all[:2], NextCursor: "2"})
		return
	}
	answer(w, 200, client.ExecutionList{Executions: all[2:]})
}

// fileInfo describes path in the fake workspace: a file, a directory
// (a prefix of files), or nothing.
func (f *fakeKiln) fileInfo(path string) (client.FileInfo, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	name := path[strings.LastIndex(path, "/")+1:]
	if b, ok := f.files[path]; ok {
		return client.FileInfo{Path: path, Name: name, Type: "file", Size: int64(len(b)), Mode: 0o644, ModTime: t0}, true
	}
	for p := range f.files {
		if path == "" || strings.HasPrefix(p, path+"/") {
			return client.FileInfo{Path: path, Name: name, Type: "dir", Mode: 0o755, ModTime: t0}, true
		}
	}
	return client.FileInfo{}, false
}

func (f *fakeKiln) getFile(w http.ResponseWriter, r *http.Request, _ []byte) {
	path := r.PathValue("path")
	fi, ok := f.fileInfo(path)
	switch {
	case !ok:
		problem(w, 404, "not_found", "no file "+path)
	case r.URL.Query().Get("stat") == "true":
		answer(w, 200, fi)
	case r.URL.Query().Get("archive") != "":
		if fi.Type != "dir" {
			problem(w, 400, "invalid", path+" is not a directory")
			return
		}
		w.Header().Set("Content-Type", "application/x-tar")
		io.WriteString(w, "ARCHIVE OF "+path+" AS "+r.URL.Query().Get("archive"))
	case fi.Type == "file":
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		f.mu.Lock()
		w.Write(f.files[path])
		f.mu.Unlock()
	default:
		f.mu.Lock()
		seen := map[string]bool{}
		list := client.FileList{Path: path, Entries: []client.FileInfo{}}
		var names []string
		for p := range f.files {
			rest, ok := strings.CutPrefix(p, path+"/")
			if path == "" {
				rest, ok = p, true
			}
			if !ok {
				continue
			}
			first, _, _ := strings.Cut(rest, "/")
			if !seen[first] {
				seen[first] = true
				names = append(names, strings.TrimPrefix(path+"/"+first, "/"))
			}
		}
		f.mu.Unlock()
		sort.Strings(names)
		for _, n := range names {
			fi, _ := f.fileInfo(n)
			list.Entries = append(list.Entries, fi)
		}
		answer(w, 200, list)
	}
}

func (f *fakeKiln) putFile(w http.ResponseWriter, r *http.Request, body []byte) {
	path := r.PathValue("path")
	f.mu.Lock()
	_, exists := f.files[path]
	if exists && r.URL.Query().Get("overwrite") == "false" {
		f.mu.Unlock()
		problem(w, 409, "conflict", path+" exists")
		return
	}
	f.files[path] = body
	f.mu.Unlock()
	fi, _ := f.fileInfo(path)
	answer(w, 201, fi)
}

// extract unpacks a tar the way a careful server would: names must stay
// inside; anything but files and directories is refused.
func (f *fakeKiln) extract(w http.ResponseWriter, r *http.Request, body []byte) {
	if r.URL.Query().Get("extract") != "tar" {
		problem(w, 400, "invalid", "only ?extract=tar here")
		return
	}
	dir := r.PathValue("path")
	tr := tar.NewReader(strings.NewReader(string(body)))
	var up client.Uploaded
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			problem(w, 400, "invalid", "a broken tar: "+err.Error())
			return
		}
		if strings.HasPrefix(h.Name, "/") || strings.Contains("/"+h.Name+"/", "/../") {
			problem(w, 400, "invalid", "an entry outside: "+h.Name)
			return
		}
		switch h.Typeflag {
		case tar.TypeDir:
		case tar.TypeReg:
			b, _ := io.ReadAll(tr)
			p := strings.TrimPrefix(dir+"/"+h.Name, "/")
			f.mu.Lock()
			f.files[p] = b
			f.mu.Unlock()
			fi, _ := f.fileInfo(p)
			fi.Mode = uint32(h.Mode)
			up.Files = append(up.Files, fi)
		default:
			problem(w, 400, "invalid", "a link or special file: "+h.Name)
			return
		}
	}
	answer(w, 201, up)
}

func (f *fakeKiln) deleteFile(w http.ResponseWriter, r *http.Request, _ []byte) {
	path := r.PathValue("path")
	fi, ok := f.fileInfo(path)
	if !ok {
		problem(w, 404, "not_found", "no file "+path)
		return
	}
	if fi.Type == "dir" && r.URL.Query().Get("recursive") != "true" {
		problem(w, 409, "conflict", path+" is a directory that is not empty; delete it recursively")
		return
	}
	f.mu.Lock()
	for p := range f.files {
		if p == path || strings.HasPrefix(p, path+"/") {
			delete(f.files, p)
		}
	}
	f.mu.Unlock()
	w.WriteHeader(204)
}

var fakeUsers = []client.User{
	{ID: "u1", Name: "ada", Admin: true, Created: t0},
	{ID: "u2", Name: "bot\x07", Created: t0.Add(time.Hour)},
}

func (f *fakeKiln) createUser(w http.ResponseWriter, r *http.Request, body []byte) {
	var req client.UserRequest
	json.Unmarshal(body, &req)
	answer(w, 201, client.User{ID: "u-new", Name: req.Name, Admin: req.Admin, Created: t0})
}

func (f *fakeKiln) listUsers(w http.ResponseWriter, r *http.Request, _ []byte) {
	answer(w, 200, fakeUsers)
}

func (f *fakeKiln) getUser(w http.ResponseWriter, r *http.Request, _ []byte) {
	switch r.PathValue("id") {
	case "me", "u1":
		answer(w, 200, fakeUsers[0])
	default:
		problem(w, 403, "forbidden", "only admins can see other users")
	}
}

func (f *fakeKiln) createKey(w http.ResponseWriter, r *http.Request, body []byte) {
	var req client.KeyRequest
	json.Unmarshal(body, &req)
	k := client.Key{ID: "k-new", UserID: "u1", Name: req.Name, Prefix: "kiln_Zx9", Secret: "kiln_Zx9_thesecret", Created: t0, Scope: req.Scope}
	if req.ExpiresInSeconds > 0 {
		exp := t0.Add(time.Duration(req.ExpiresInSeconds) * time.Second)
		k.Expires = &exp
	}
	answer(w, 201, k)
}

func (f *fakeKiln) listKeys(w http.ResponseWriter, r *http.Request, _ []byte) {
	used, revoked, expires := t0.Add(time.Hour), t0.Add(2*time.Hour), t0.Add(24*time.Hour)
	answer(w, 200, []client.Key{
		{ID: "k1", UserID: "u1", Name: "laptop", Prefix: "kiln_Ab1", Created: t0, LastUsed: &used, Expires: &expires},
		{ID: "k2", UserID: "u1", Prefix: "kiln_Cd2", Created: t0, Revoked: &revoked, Scope: "metrics"},
	})
}
