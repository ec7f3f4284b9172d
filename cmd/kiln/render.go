package main

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/kiln-dev/kiln/internal/engine"
	"github.com/kiln-dev/kiln/internal/kiln"
)

// renderer prints cell results on a terminal: text as text, images saved
// to files in dir.
type renderer struct {
	stdout, stderr io.Writer
	dir            string
	n              int
	artifactHint   string // how to fetch an artifact, e.g. ":get %s"
}

// show prints one rich output.
func (r *renderer) show(o kiln.Output) {
	r.n++
	for _, kind := range []struct{ mime, ext string }{{"image/png", ".png"}, {"image/svg+xml", ".svg"}} {
		raw, ok := o.Data[kind.mime]
		if !ok {
			continue
		}
		var s string
		json.Unmarshal(raw, &s)
		data := []byte(s)
		if kind.mime == "image/png" {
			if data, _ = base64.StdEncoding.DecodeString(s); data == nil {
				continue
			}
		}
		if r.dir == "" {
			d, err := os.MkdirTemp("", "kiln-output-")
			if err != nil {
				continue
			}
			r.dir = d
		}
		name := filepath.Join(r.dir, fmt.Sprintf("output-%d%s", r.n, kind.ext))
		if err := os.WriteFile(name, data, 0o644); err == nil {
			fmt.Fprintf(r.stdout, "[%s saved to %s]\n", kind.mime, name)
			return
		}
	}
	if t := engine.Text(o); t != "" {
		fmt.Fprintln(r.stdout, t)
		return
	}
	for mime := range o.Data {
		fmt.Fprintf(r.stdout, "[%s output]\n", mime)
	}
}

// report prints how a cell ended: its error, a stopped limit, a notice,
// and the files it made.
func (r *renderer) report(res kiln.CellResult) {
	if res.Error != nil {
		r.reportError(res.Error)
	}
	// The notice names the limit that stopped the cell and what became of
	// the kernel's state; the status line is for results without one.
	switch {
	case res.Notice != "":
		fmt.Fprintf(r.stderr, "kiln: %s\n", res.Notice)
	case res.Status == kiln.StatusInterrupted:
		fmt.Fprintln(r.stderr, "kiln: interrupted")
	case res.Status == kiln.StatusTimeout:
		fmt.Fprintln(r.stderr, "kiln: time limit reached; the cell was stopped")
	case res.Status == kiln.StatusMemory:
		fmt.Fprintln(r.stderr, "kiln: memory limit reached; the kernel's state is lost")
	case res.Status == kiln.StatusOutput:
		fmt.Fprintln(r.stderr, "kiln: output limit reached; the cell was stopped")
	}
	if r.artifactHint == "" {
		return
	}
	for _, a := range res.Artifacts {
		if a.Change != "deleted" {
			fmt.Fprintf(r.stderr, "kiln: %s %s (%s); "+r.artifactHint+"\n", a.Change, a.Path, kiln.FormatBytes(a.Size), a.Path)
		}
	}
}

// reportError prints a cell's error: its traceback, the compiler's
// diagnostics, or its name and message.
func (r *renderer) reportError(e *kiln.CellError) {
	switch {
	case len(e.Traceback) > 0:
		fmt.Fprintln(r.stderr, strings.Join(e.Traceback, "\n"))
	case len(e.Diagnostics) > 0:
		for _, d := range e.Diagnostics {
			fmt.Fprintf(r.stderr, "%s:%d:%d: %s: %s\n", d.File, d.Line, d.Column, d.Severity, d.Message)
		}
	case e.Name != "ExitStatus":
		fmt.Fprintf(r.stderr, "%s: %s\n", e.Name, e.Message)
	}
}

// exitStatus is the process status for a one-shot cell, as for a program:
// its own code, 124 when the time limit stopped it, 137 when the memory
// or output limit killed it, 130 when interrupted (see exitcodes.go).
func exitStatus(res kiln.CellResult) int {
	switch res.Status {
	case kiln.StatusTimeout:
		return exitTimeout
	case kiln.StatusMemory, kiln.StatusOutput:
		return exitKilled
	case kiln.StatusInterrupted:
		return exitInterrupted
	}
	if res.ExitCode != nil {
		return *res.ExitCode
	}
	if res.Status == kiln.StatusError {
		return 1
	}
	return 0
}
