package main

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/kiln-dev/kiln/client"
	"github.com/kiln-dev/kiln/internal/kiln"
)

// outputSaver writes a cell's image outputs to files in dir, for kiln exec
// --save-outputs. Names are kiln's (output-N.EXT), never the server's, and
// never replace a file that is there.
type outputSaver struct {
	dir string
	n   int
}

// imageExts are the image types saved, with their file extensions.
var imageExts = []struct{ mime, ext string }{
	{"image/png", ".png"}, {"image/jpeg", ".jpg"}, {"image/gif", ".gif"}, {"image/svg+xml", ".svg"},
}

// newOutputSaver checks dir before any cell runs, making it if needed.
func newOutputSaver(dir string) (*outputSaver, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, kiln.Errorf(kiln.Invalid, "--save-outputs %s: cannot make the directory: %s", dir, reason(err))
	}
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		return nil, kiln.Errorf(kiln.Invalid, "--save-outputs %s is not a directory", dir)
	}
	return &outputSaver{dir: dir}, nil
}

// save writes o's image, if it has one, and returns the file's name.
func (s *outputSaver) save(o client.Output) (mime, name string, err error) {
	for _, kind := range imageExts {
		raw, ok := o.Data[kind.mime]
		if !ok {
			continue
		}
		var text string
		if err := json.Unmarshal(raw, &text); err != nil {
			return kind.mime, "", fmt.Errorf("the server sent %s that is not a string", kind.mime)
		}
		data := []byte(text)
		if kind.mime != "image/svg+xml" { // the others travel as base64
			if data, err = base64.StdEncoding.DecodeString(strings.Join(strings.Fields(text), "")); err != nil {
				return kind.mime, "", fmt.Errorf("the server sent %s that is not base64", kind.mime)
			}
		}
		name, err := s.write(kind.ext, data)
		return kind.mime, name, err
	}
	return "", "", nil
}

// write creates the next free output-N.ext and writes data to it.
func (s *outputSaver) write(ext string, data []byte) (string, error) {
	for range 10000 {
		s.n++
		name := filepath.Join(s.dir, fmt.Sprintf("output-%d%s", s.n, ext))
		f, err := os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		if err != nil {
			return "", err
		}
		_, err = f.Write(data)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			os.Remove(name)
			return "", err
		}
		return name, nil
	}
	return "", fmt.Errorf("%s holds too many outputs already", s.dir)
}

// show prints a display output as showOutput does, saving an image first:
// its line names the file instead of the size.
func (s *outputSaver) show(w, stderr io.Writer, o client.Output) {
	if s != nil {
		mime, name, err := s.save(o)
		switch {
		case err != nil:
			fmt.Fprintf(stderr, "kiln: could not save an output: %s\n", reason(err))
		case name != "":
			fmt.Fprintf(w, "[%s saved to %s]\n", mime, name)
			return
		}
	}
	showOutput(w, o)
}
