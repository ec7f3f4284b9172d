package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"time"

	"golang.org/x/term"

	"github.com/kiln-dev/kiln/client"
	"github.com/kiln-dev/kiln/internal/engine"
	"github.com/kiln-dev/kiln/internal/kiln"
)

const execSynopsis = `kiln exec [--lang L] [--stdin FILE|-] [--timeout 10s] [--save-outputs DIR] [--json] SESSION [CODE|-]

Runs CODE as a cell of SESSION; without CODE, or with "-", the code is
read from stdin. Output streams as it comes: stdout and stderr to kiln's,
display outputs as text (an image as a line "[image/png N bytes]", or
with --save-outputs saved as DIR/output-N.png), then the error and
traceback if any. Put "--" before code that starts with "-".

Exit status: 0 when the cell's status is ok, 1 error, 124 timeout,
130 interrupted, 137 memory_limit or output_limit, 125 when kiln or
the server failed (the message says why), 2 for a usage error. --json
prints the final execution as JSON instead of the output, with the
same exit status.`

// execCmd is `kiln exec`: one cell in a remote session, streamed.
func execCmd(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	var (
		rf        remoteFlags
		language  string
		stdinFrom string
		timeout   time.Duration
		asJSON    bool
		saveDir   string
	)
	fs := newFlagSet("kiln exec", execSynopsis, stderr, &rf)
	fs.StringVar(&language, "lang", "", "the cell's language (default: the session's first)")
	fs.StringVar(&language, "l", "", "short for --lang")
	fs.StringVar(&stdinFrom, "stdin", "", "a file whose content is the cell's stdin, or - for kiln's stdin (default: none; reading stdin fails at once)")
	fs.Var(durationFlag{&timeout}, "timeout", "this cell's wall-clock limit, e.g. 10s (default: the session's)")
	fs.BoolVar(&asJSON, "json", false, "print the final execution as JSON instead of streaming the output")
	fs.StringVar(&saveDir, "save-outputs", "", "save image outputs (plots) as files output-N.png, .svg, ... in this `directory`, made if missing; existing files are kept")
	pos, done, err := positional(fs, args, 1, 2)
	if done {
		return err
	}
	code := "-"
	if len(pos) == 2 {
		code = pos[1]
	}
	if code == "-" && stdinFrom == "-" {
		fmt.Fprint(stderr, "kiln exec: the code and --stdin cannot both come from stdin; give the code as an argument or --stdin a file\n\n")
		fs.Usage()
		return errUsage
	}
	req := client.ExecRequest{Code: code, Language: language, TimeoutMS: millis(timeout)}
	if code == "-" {
		if f, ok := stdin.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
			fmt.Fprintln(stderr, "kiln: reading the code from the terminal; end it with Ctrl-D")
		}
		b, err := readLimited(stdin, engine.MaxCodeBytes, "the code on stdin")
		if err != nil {
			return err
		}
		req.Code = string(b)
	}
	if stdinFrom != "" {
		var b []byte
		if stdinFrom == "-" {
			b, err = readLimited(stdin, engine.MaxStdinBytes, "stdin")
		} else {
			b, err = readFileLimited(stdinFrom, engine.MaxStdinBytes)
		}
		if err != nil {
			return err
		}
		s := string(b)
		req.Stdin = &s
	}
	if strings.TrimSpace(req.Code) == "" {
		return kiln.Errorf(kiln.Invalid, "the code is empty")
	}
	var saver *outputSaver
	if saveDir != "" {
		if saver, err = newOutputSaver(saveDir); err != nil {
			return err
		}
	}
	rc, err := rf.connect(stderr)
	if err != nil {
		return err
	}
	if asJSON {
		x, err := rc.Exec(ctx, pos[0], req)
		if err != nil {
			return rc.fail(err)
		}
		if err := printJSON(stdout, x); err != nil {
			return err
		}
		if saver != nil && x.Result != nil {
			for _, o := range x.Result.Outputs {
				if _, name, err := saver.save(o); err != nil {
					fmt.Fprintf(stderr, "kiln: could not save an output: %s\n", reason(err))
				} else if name != "" {
					fmt.Fprintf(stderr, "kiln: saved %s\n", name)
				}
			}
		}
		return execStatus(x)
	}
	x, err := rc.ExecStream(ctx, pos[0], req, func(ev client.Event) {
		switch ev.Type {
		case client.EventStdout:
			io.WriteString(stdout, ev.Data)
		case client.EventStderr:
			io.WriteString(stderr, ev.Data)
		case client.EventDisplay:
			if ev.Output != nil {
				saver.show(stdout, stderr, *ev.Output)
			}
		}
	})
	if err != nil && ctx.Err() != nil {
		// Ctrl-C: stop the cell too, not only the stream.
		ictx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 3*time.Second)
		defer cancel()
		if rc.Interrupt(ictx, pos[0]) == nil {
			fmt.Fprintln(stderr, "kiln: interrupted the cell")
		}
		return exitError{130}
	}
	if err != nil {
		return rc.fail(err)
	}
	if x.Result != nil {
		(&renderer{stdout: stdout, stderr: stderr}).report(*x.Result)
	}
	return execStatus(x)
}

// execStatus is kiln exec's exit status for a finished cell.
func execStatus(x *client.Execution) error {
	status := x.Status
	if x.Result != nil && (status == "" || status == "running") {
		status = string(x.Result.Status)
	}
	switch kiln.CellStatus(status) {
	case kiln.StatusOK:
		return nil
	case kiln.StatusTimeout:
		return exitError{exitTimeout}
	case kiln.StatusInterrupted:
		return exitError{exitInterrupted}
	case kiln.StatusMemory, kiln.StatusOutput:
		return exitError{exitKilled}
	}
	return exitError{exitCellError}
}

// imageTypes are shown as a line naming them rather than as bytes.
var imageTypes = []string{"image/png", "image/jpeg", "image/gif", "image/svg+xml"}

// showOutput prints one display output on a terminal: an image as its
// type and size, otherwise its text/plain, otherwise the types it has.
func showOutput(w io.Writer, o client.Output) {
	for _, mime := range imageTypes {
		raw, ok := o.Data[mime]
		if !ok {
			continue
		}
		var s string
		json.Unmarshal(raw, &s)
		n := len(s)
		if mime != "image/svg+xml" { // the others travel as base64
			if b, err := base64.StdEncoding.DecodeString(strings.Join(strings.Fields(s), "")); err == nil {
				n = len(b)
			}
		}
		fmt.Fprintf(w, "[%s %d bytes]\n", mime, n)
		return
	}
	if t := engine.Text(o); t != "" {
		io.WriteString(w, t)
		if !strings.HasSuffix(t, "\n") {
			io.WriteString(w, "\n")
		}
		return
	}
	mimes := make([]string, 0, len(o.Data))
	for m := range o.Data {
		mimes = append(mimes, m)
	}
	sort.Strings(mimes)
	for _, m := range mimes {
		fmt.Fprintf(w, "[%s output]\n", clean(m))
	}
}
