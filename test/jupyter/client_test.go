package jupyter_test

import (
	"strings"
	"testing"
	"time"
)

// TestJupyterClientDirect: jupyter_client's Session makes and checks
// every message (headers, parent_header, protocol 5.3) over kiln's
// kernel WebSocket: a kernel started over REST, 1+1 is an execute_result
// of 2, a print a stream, 1/0 an error, input() an input_request that the
// reply answers, completion, is_complete, inspect, comm_info, an
// interrupt_request on the control channel that stops a loop, a restart
// that forgets state and counts from 1, and a delete.
func TestJupyterClientDirect(t *testing.T) {
	need(t, map[string]string{"jupyter_client": "python3-jupyter-client", "tornado": "python3-tornado"})
	s := startServe(t)
	out := runPython(t, 5*time.Minute, "direct.py", s.url, s.key)
	for _, step := range []string{"start", "kernel_info", "execute_result", "stream", "error", "input", "password", "complete", "is_complete", "inspect_comm", "interrupt", "restart", "delete"} {
		if !strings.Contains(out, `{"ok": "`+step+`"`) {
			t.Errorf("step %s did not pass:\n%s", step, out)
		}
	}
	if !strings.Contains(out, `"prompt": "Your name: ", "stream": "hi Ada\n"`) {
		t.Errorf("input(): the prompt belongs in the input_request, not in the output (as IPython does):\n%s", out)
	}
}
