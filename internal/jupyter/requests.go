package jupyter

import (
	"context"
	"encoding/json"
	"io"
	"runtime/debug"
	"strings"
	"sync"
	"time"

	"github.com/kiln-dev/kiln/internal/kiln"
	"github.com/kiln-dev/kiln/internal/service"
)

// queryTimeout bounds a completion or check: a kernel busy with a long
// cell would otherwise hold the shell queue.
const queryTimeout = 10 * time.Second

// shell handles one shell request; it reports whether it was an execute
// that failed and asked to stop on error.
func (k *kernel) shell(m *inMsg) (stopQueue bool) {
	switch m.hdr.MsgType {
	case "execute_request":
		return k.execute(m)
	case "kernel_info_request":
		k.reply(m, "kernel_info_reply", k.info())
	case "complete_request":
		k.complete(m)
	case "inspect_request":
		// kiln's kernels have no introspection: a proper "nothing found".
		k.reply(m, "inspect_reply", map[string]any{"status": "ok", "found": false, "data": map[string]any{}, "metadata": map[string]any{}})
	case "is_complete_request":
		k.isComplete(m)
	case "history_request":
		k.history(m)
	case "comm_info_request":
		k.reply(m, "comm_info_reply", map[string]any{"status": "ok", "comms": map[string]any{}})
	case "comm_open":
		// No comm target exists in a kiln kernel; IPython closes a comm
		// opened to an unknown target, and so does kiln.
		var c struct {
			CommID string `json:"comm_id"`
		}
		json.Unmarshal(m.Content, &c)
		k.broadcast(k.message("iopub", "comm_close", m, map[string]any{"comm_id": c.CommID, "data": map[string]any{}}))
	case "comm_msg", "comm_close":
		// Acknowledged by the busy and idle status around it.
	case "shutdown_request", "interrupt_request":
		k.control(m)
	default:
		if strings.HasSuffix(m.hdr.MsgType, "_request") {
			k.reply(m, replyType(m.hdr.MsgType), errorContent("NotImplementedError", "kiln's kernels do not take "+trunc(m.hdr.MsgType, 60)))
		}
	}
	return false
}

// control handles a control request, at once, beside a running cell.
func (k *kernel) control(m *inMsg) {
	switch m.hdr.MsgType {
	case "interrupt_request":
		content := map[string]any{"status": "ok"}
		if err := k.g.svc.Interrupt(k.ctx, k.owner, k.session); err != nil {
			content = errorContent("InterruptError", kiln.Message(err))
		}
		k.reply(m, "interrupt_reply", content)
	case "shutdown_request":
		var c struct {
			Restart bool `json:"restart"`
		}
		json.Unmarshal(m.Content, &c)
		if c.Restart {
			content := map[string]any{"status": "ok", "restart": true}
			if err := k.restart(k.ctx); err != nil {
				content = errorContent("RestartError", kiln.Message(err))
				content["restart"] = true
			}
			k.reply(m, "shutdown_reply", content)
			return
		}
		k.reply(m, "shutdown_reply", map[string]any{"status": "ok", "restart": false})
		if err := k.g.shutdown(context.Background(), k); err != nil {
			k.g.cfg.Log.Warn("jupyter: shutdown", "kernel", k.id, "err", err)
		}
	case "kernel_info_request":
		k.reply(m, "kernel_info_reply", k.info())
	default:
		if strings.HasSuffix(m.hdr.MsgType, "_request") {
			k.reply(m, replyType(m.hdr.MsgType), errorContent("NotImplementedError", "kiln's kernels do not take "+trunc(m.hdr.MsgType, 60)))
		}
	}
}

func (k *kernel) info() map[string]any {
	version := "dev"
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" {
		version = bi.Main.Version
	}
	return map[string]any{
		"status":                 "ok",
		"protocol_version":       ProtocolVersion,
		"implementation":         "kiln",
		"implementation_version": version,
		"language_info":          k.spec.info,
		"banner":                 k.spec.Display + ": a kiln session, in a sandbox",
		"help_links":             []any{},
		"debugger":               false,
	}
}

func (k *kernel) complete(m *inMsg) {
	var c struct {
		Code      string `json:"code"`
		CursorPos *int   `json:"cursor_pos"`
	}
	json.Unmarshal(m.Content, &c)
	cursor := len([]rune(c.Code))
	if c.CursorPos != nil {
		cursor = *c.CursorPos
	}
	ctx, cancel := context.WithTimeout(k.ctx, queryTimeout)
	defer cancel()
	res, err := k.g.svc.Complete(ctx, k.owner, k.session, k.spec.Language, c.Code, cursor)
	if err != nil {
		k.reply(m, "complete_reply", errorContent("CompleteError", kiln.Message(err)))
		return
	}
	matches := res.Matches
	if matches == nil {
		matches = []string{}
	}
	k.reply(m, "complete_reply", map[string]any{"status": "ok", "matches": matches, "cursor_start": res.CursorStart,
		"cursor_end": res.CursorEnd, "metadata": map[string]any{}})
}

func (k *kernel) isComplete(m *inMsg) {
	var c struct {
		Code string `json:"code"`
	}
	json.Unmarshal(m.Content, &c)
	ctx, cancel := context.WithTimeout(k.ctx, queryTimeout)
	defer cancel()
	res, err := k.g.svc.Check(ctx, k.owner, k.session, k.spec.Language, c.Code)
	switch {
	case err != nil:
		k.reply(m, "is_complete_reply", map[string]any{"status": "unknown"})
	case res.Status == "incomplete":
		k.reply(m, "is_complete_reply", map[string]any{"status": "incomplete", "indent": indentAfter(c.Code)})
	case res.Status == "complete" || res.Status == "invalid":
		k.reply(m, "is_complete_reply", map[string]any{"status": res.Status})
	default:
		k.reply(m, "is_complete_reply", map[string]any{"status": "unknown"})
	}
}

// indentAfter is the indent a console offers for the next line of
// incomplete code: the last line's, one level more after an opening
// colon or brace.
func indentAfter(code string) string {
	lines := strings.Split(strings.TrimRight(code, "\n"), "\n")
	last := lines[len(lines)-1]
	indent := last[:len(last)-len(strings.TrimLeft(last, " \t"))]
	if t := strings.TrimSpace(last); strings.HasSuffix(t, ":") || strings.HasSuffix(t, "{") || strings.HasSuffix(t, "(") || strings.HasSuffix(t, "[") {
		indent += "    "
	}
	return indent
}

// executeContent is an execute_request's content.
type executeContent struct {
	Code         string `json:"code"`
	Silent       bool   `json:"silent"`
	StoreHistory *bool  `json:"store_history"`
	AllowStdin   bool   `json:"allow_stdin"`
	StopOnError  *bool  `json:"stop_on_error"`
}

// execute runs an execute_request as a cell of the kernel's session
// through the service (queue, limits, history, audit) and publishes what
// it does as IPython would.
func (k *kernel) execute(m *inMsg) (stopQueue bool) {
	var ec executeContent
	if err := json.Unmarshal(m.Content, &ec); err != nil {
		k.reply(m, "execute_reply", errorContent("ValueError", "execute_request content: "+trunc(err.Error(), 120)))
		return false
	}
	stopOnError := ec.StopOnError == nil || *ec.StopOnError
	counted := !ec.Silent && (ec.StoreHistory == nil || *ec.StoreHistory)
	k.mu.Lock()
	if counted {
		k.count++
	}
	count := k.count
	k.mu.Unlock()
	publish := func(msgType string, content any) {
		if !ec.Silent {
			k.broadcast(k.message("iopub", msgType, m, content))
		}
	}
	publish("execute_input", map[string]any{"code": ec.Code, "execution_count": count})

	out := newStreams(func(name, text string) {
		publish("stream", map[string]any{"name": name, "text": text})
	})
	defer out.stop()
	cell := kiln.CellRequest{Language: k.spec.Language, Code: ec.Code}
	if ec.AllowStdin {
		pr, pw := io.Pipe()
		cell.StdinStream = pr
		in := &stdinFor{conn: m.conn, pending: make(chan string, maxPendingInput), close: func() { pw.Close() }}
		stop := make(chan struct{})
		go func() { // blocks on the pipe until the cell reads; ends with the cell
			for {
				select {
				case v := <-in.pending:
					if _, err := pw.Write([]byte(v)); err != nil {
						return
					}
				case <-stop:
					return
				}
			}
		}()
		k.mu.Lock()
		k.input = in
		k.mu.Unlock()
		defer func() {
			k.mu.Lock()
			if k.input == in {
				k.input = nil
			}
			k.mu.Unlock()
			close(stop)
			pr.Close()
		}()
	}
	var (
		resultMu sync.Mutex
		result   *kiln.Output
	)
	ev := service.ExecEvents{Events: kiln.CellEvents{
		Stdout: func(b []byte) { out.write("stdout", b) },
		Stderr: func(b []byte) { out.write("stderr", b) },
		Output: func(o kiln.Output) {
			if o.Result {
				// The value of the cell's last expression comes last, as
				// in IPython: after all of the cell's output, which the
				// sandbox delivers on another path and may deliver later.
				resultMu.Lock()
				result = &o
				resultMu.Unlock()
				return
			}
			out.flush()
			publish("display_data", map[string]any{"data": o.Data, "metadata": metadataOf(o), "transient": map[string]any{}})
		},
		Input: func(prompt string, password bool) {
			out.dropPrompt(prompt)
			m.conn.send(k.message("stdin", "input_request", m, map[string]any{"prompt": prompt, "password": password}))
		},
	}}
	e, err := k.g.svc.Exec(k.ctx, k.owner, k.session, cell, ev)
	out.stop()
	resultMu.Lock()
	defer resultMu.Unlock()
	if result != nil {
		publish("execute_result", map[string]any{"execution_count": count, "data": result.Data, "metadata": metadataOf(*result)})
	}
	reply := map[string]any{"status": "ok", "execution_count": count, "user_expressions": map[string]any{}, "payload": []any{}}
	var ename, evalue string
	var traceback []string
	switch {
	case err != nil:
		ename, evalue = "KilnError", kiln.Message(err)
	case e.Result == nil:
		ename, evalue = "KilnError", "the cell ended without a result"
	default:
		res := e.Result
		if res.Notice != "" {
			publish("stream", map[string]any{"name": "stderr", "text": "kiln: " + res.Notice + "\n"})
		}
		ename, evalue, traceback = errorOf(k.spec.Language, res)
	}
	if ename != "" {
		if len(traceback) == 0 {
			traceback = []string{ename + ": " + evalue}
		}
		publish("error", map[string]any{"ename": ename, "evalue": evalue, "traceback": traceback})
		reply = map[string]any{"status": "error", "execution_count": count, "ename": ename, "evalue": evalue, "traceback": traceback,
			"user_expressions": map[string]any{}, "payload": []any{}}
	}
	k.reply(m, "execute_reply", reply)
	return ename != "" && stopOnError
}

func metadataOf(o kiln.Output) any {
	if len(o.Metadata) == 0 {
		return map[string]any{}
	}
	return o.Metadata
}

// errorOf is a finished cell's error as Jupyter's error message has it:
// the kernel's exception, or what stopped the cell (kiln's limits).
func errorOf(language string, res *kiln.CellResult) (ename, evalue string, traceback []string) {
	if res.Error != nil {
		return res.Error.Name, res.Error.Message, res.Error.Traceback
	}
	switch res.Status {
	case kiln.StatusOK:
		return "", "", nil
	case kiln.StatusInterrupted:
		if language == "python" {
			return "KeyboardInterrupt", "", nil
		}
		return "Interrupted", "the cell was interrupted", nil
	case kiln.StatusTimeout:
		return "TimeoutError", "the cell ran past its time limit and was stopped", nil
	case kiln.StatusMemory:
		return "MemoryError", "the cell ran out of memory (its session's memory limit) and was stopped", nil
	case kiln.StatusOutput:
		return "OutputLimitError", "the cell wrote more output than its limit allows; the rest was dropped", nil
	}
	return "Error", "the cell ended with status " + string(res.Status), nil
}

// stdinReply passes an input_reply's value to the cell that asked.
func (k *kernel) stdinReply(m *inMsg) {
	if m.hdr.MsgType != "input_reply" {
		return
	}
	var c struct {
		Value string `json:"value"`
	}
	json.Unmarshal(m.Content, &c)
	k.mu.Lock()
	in := k.input
	k.mu.Unlock()
	if in == nil {
		return // the cell has ended; as a kernel, drop a late reply
	}
	select {
	case in.pending <- c.Value + "\n":
	default:
		k.g.cfg.Log.Warn("jupyter: an input_reply was dropped: too many wait for the cell to read them", "kernel", k.id)
	}
}
