package server_test

import (
	"strings"
	"testing"

	"github.com/kiln-dev/kiln/client"
)

// TestWebSocketInputRequest: a cell that waits in input() sends an
// input_request event with its prompt, after the prompt's stdout; the
// client answers and the cell goes on.
func TestWebSocketInputRequest(t *testing.T) {
	e := newEnv(t, options{})
	ctx := ctxT(t)
	c := e.user("ira")
	s, err := c.CreateSession(ctx, client.SessionRequest{})
	if err != nil {
		t.Fatal(err)
	}
	st, err := c.ExecWS(ctx, s.ID, client.ExecRequest{Code: "name = input('Name: ')\nage = input('Age: ')\nprint('hi', name, age)"})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var out strings.Builder
	var prompts []string
	for _, answer := range []string{"ada\n", "36\n"} {
		for {
			ev, err := st.Recv(ctx)
			if err != nil {
				t.Fatalf("waiting for an input request: %v (stdout %q)", err, out.String())
			}
			out.WriteString(ev.Data)
			if ev.Type == client.EventInputRequest {
				prompts = append(prompts, ev.Prompt)
				if !strings.HasSuffix(out.String(), ev.Prompt) {
					t.Errorf("input request %q came before its prompt (stdout %q)", ev.Prompt, out.String())
				}
				break
			}
		}
		if err := st.Stdin(ctx, []byte(answer)); err != nil {
			t.Fatal(err)
		}
	}
	x, err := st.Wait(ctx, func(ev client.Event) { out.WriteString(ev.Data) })
	if err != nil || x.Status != "ok" || out.String() != "Name: Age: hi ada 36\n" {
		t.Fatalf("after stdin: stdout %q, %+v, %v", out.String(), x, err)
	}
	if strings.Join(prompts, "|") != "Name: |Age: " {
		t.Errorf("prompts %q, want Name: and Age: ", prompts)
	}
}
