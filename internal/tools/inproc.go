package tools

import (
	"io"
	"net/http"
	"sync"

	"github.com/kiln-dev/kiln/client"
)

// InProcess returns a client of the API handler h, called in this
// process with no socket: each request goes through h (kiln's server)
// exactly as it would over HTTP, authenticated with key, from the client
// address remoteAddr (the address the failed-authentication limit counts;
// for /mcp, the MCP client's own).
func InProcess(h http.Handler, key, remoteAddr string) (*client.Client, error) {
	return client.New("http://kiln.in-process", key,
		client.WithHTTPClient(&http.Client{Transport: handlerTransport{h: h, remote: remoteAddr}}),
		client.WithUserAgent("kiln-tools"))
}

// handlerTransport is an http.RoundTripper that serves a request with a
// handler on a goroutine and streams its answer through a pipe, so that
// SSE streams arrive as they are written.
type handlerTransport struct {
	h      http.Handler
	remote string
}

func (t handlerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	pr, pw := io.Pipe()
	w := &pipeWriter{header: http.Header{}, pw: pw, ready: make(chan struct{})}
	in := req.Clone(req.Context())
	in.RemoteAddr, in.Host, in.RequestURI = t.remote, req.URL.Host, req.URL.RequestURI()
	if in.Body == nil {
		in.Body = http.NoBody
	}
	go func() {
		defer func() {
			// The server re-panics http.ErrAbortHandler, which a real
			// server swallows; so must this one.
			if v := recover(); v != nil {
				pw.CloseWithError(io.ErrUnexpectedEOF)
				w.commit(http.StatusInternalServerError)
				return
			}
			w.commit(http.StatusOK)
			pw.Close()
		}()
		t.h.ServeHTTP(w, in)
	}()
	select {
	case <-w.ready:
	case <-req.Context().Done():
		pr.CloseWithError(req.Context().Err())
		return nil, req.Context().Err()
	}
	return &http.Response{Status: http.StatusText(w.status), StatusCode: w.status, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: w.sent, Body: pr, ContentLength: -1, Request: req}, nil
}

// pipeWriter is the handler's http.ResponseWriter: the header goes to
// the response once, the body into the pipe.
type pipeWriter struct {
	header http.Header
	sent   http.Header
	status int
	pw     *io.PipeWriter
	once   sync.Once
	ready  chan struct{}
}

func (w *pipeWriter) Header() http.Header { return w.header }

func (w *pipeWriter) commit(code int) {
	w.once.Do(func() {
		w.status, w.sent = code, w.header.Clone()
		close(w.ready)
	})
}

func (w *pipeWriter) WriteHeader(code int) {
	if code >= 100 && code < 200 {
		return // informational answers are not passed on
	}
	w.commit(code)
}

func (w *pipeWriter) Write(p []byte) (int, error) {
	w.commit(http.StatusOK)
	return w.pw.Write(p)
}

// Flush does nothing: the pipe has no buffer.
func (w *pipeWriter) Flush() {}
