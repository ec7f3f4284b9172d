package main

// kiln repl --server URL SESSION: the REPL of repl.go on a session of a
// kiln server, through the HTTP API.

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/kiln-dev/kiln/client"
	"github.com/kiln-dev/kiln/internal/engine"
	"github.com/kiln-dev/kiln/internal/kiln"
	"github.com/kiln-dev/kiln/internal/lang"
)

func remoteRepl(ctx context.Context, fs *flag.FlagSet, rf remoteFlags, language string, stdin io.Reader, stdout, stderr io.Writer) error {
	for _, name := range []string{"timeout", "memory", "output", "pids", "cpus"} {
		if flagSet(fs, name) {
			fmt.Fprintf(stderr, "kiln repl: --%s does not go with --server: a session's limits are set when it is made (kiln session create)\n\n", name)
			fs.Usage()
			return errUsage
		}
	}
	if fs.NArg() != 1 {
		fmt.Fprint(stderr, "kiln repl: with --server, give one session id (kiln session create makes one)\n\n")
		fs.Usage()
		return errUsage
	}
	rc, err := rf.connect(stderr)
	if err != nil {
		return err
	}
	id := fs.Arg(0)
	s, err := rc.Session(ctx, id)
	if err != nil {
		return rc.fail(err)
	}
	if s.Status != "active" {
		return kiln.Errorf(kiln.Conflict, "session %s has ended; kiln session create makes a new one", clean(id))
	}
	if language == "" && len(s.Languages) > 0 {
		language = s.Languages[0]
	}
	l, err := lang.Lookup(first(language, "python"))
	if err != nil {
		return err
	}
	r := &repl{lang: l, sess: &remoteSession{rc: rc, id: s.ID}, where: "on " + rc.server, stdout: stdout, stderr: stderr,
		render: &renderer{stdout: stdout, stderr: stderr, artifactHint: ":get %s to copy it here"}}
	return r.start(ctx, stdin)
}

// remoteSession is a session on a kiln server.
type remoteSession struct {
	rc *remote
	id string
}

func (s *remoteSession) ID() string { return s.id }

// Complete guesses, as the API has no completeness check: once a line
// opens a block (Python's ":", bash's "do" and "then") or a bracket is
// open, the cell goes on until an empty line (see ready) ends it.
func (s *remoteSession) Complete(_ context.Context, _, code string) bool {
	lines := strings.Split(code, "\n")
	for _, line := range lines {
		line = strings.TrimRight(line, " \t")
		for _, open := range []string{":", " do", ";do", " then", ";then", "else"} {
			if strings.HasSuffix(line, open) || line == strings.TrimLeft(open, " ;") {
				return false
			}
		}
	}
	last := strings.TrimRight(lines[len(lines)-1], " \t")
	if strings.HasSuffix(last, "\\") || strings.HasSuffix(last, ",") {
		return false
	}
	depth := 0
	for _, c := range code {
		switch c {
		case '(', '[', '{':
			depth++
		case ')', ']', '}':
			depth--
		}
	}
	return depth <= 0
}

func (s *remoteSession) Run(ctx context.Context, c engine.Cell, ev engine.Events) (kiln.CellResult, error) {
	x, err := s.rc.ExecStream(ctx, s.id, client.ExecRequest{Code: c.Code, Language: c.Language}, func(e client.Event) {
		switch e.Type {
		case client.EventStdout:
			ev.Stdout([]byte(e.Data))
		case client.EventStderr:
			ev.Stderr([]byte(e.Data))
		case client.EventDisplay:
			if e.Output != nil {
				ev.Output(*e.Output)
			}
		}
	})
	if err != nil {
		return kiln.CellResult{}, s.rc.fail(err)
	}
	if x.Result == nil {
		return kiln.CellResult{}, kiln.Errorf(kiln.Unavailable, "the server sent no result for the cell")
	}
	return *x.Result, nil
}

func (s *remoteSession) Interrupt() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return s.rc.fail(s.rc.Interrupt(ctx, s.id))
}

func (s *remoteSession) Restart(ctx context.Context, language string) error {
	return s.rc.fail(s.rc.Restart(ctx, s.id, language))
}

func (s *remoteSession) List(ctx context.Context, dir string) ([]replEntry, error) {
	l, err := s.rc.ListFiles(ctx, s.id, dir)
	if err != nil {
		return nil, s.rc.fail(err)
	}
	out := make([]replEntry, 0, len(l.Entries))
	for _, e := range l.Entries {
		out = append(out, replEntry{Type: e.Type, Name: e.Name, Size: e.Size})
	}
	return out, nil
}

func (s *remoteSession) ReadFile(ctx context.Context, path string) ([]byte, error) {
	var buf bytes.Buffer
	if _, err := s.rc.Download(ctx, s.id, path, &limitedWriter{w: &buf, n: engine.MaxFilesBytes}); err != nil {
		return nil, s.rc.fail(err)
	}
	return buf.Bytes(), nil
}

func (s *remoteSession) WriteFile(ctx context.Context, path string, data []byte) error {
	_, err := s.rc.Upload(ctx, s.id, path, bytes.NewReader(data), true)
	return s.rc.fail(err)
}

// limitedWriter fails once more than n bytes are written, so that a huge
// file does not fill this machine's memory.
type limitedWriter struct {
	w io.Writer
	n int64
}

func (l *limitedWriter) Write(p []byte) (int, error) {
	if int64(len(p)) > l.n {
		return 0, kiln.Errorf(kiln.TooLarge, "the file is larger than %s; use kiln files get", kiln.FormatBytes(engine.MaxFilesBytes))
	}
	l.n -= int64(len(p))
	return l.w.Write(p)
}
