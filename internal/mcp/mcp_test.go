package mcp

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kiln-dev/kiln/client"
	"github.com/kiln-dev/kiln/internal/tools"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// fakeAPI answers a streamed cell with a plot and a written file, and
// serves one workspace file.
func fakeAPI(t *testing.T) *client.Client {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/sessions/{id}/executions", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, "event: stdout\ndata: {\"type\":\"stdout\",\"data\":\"hi\\n\"}\n\n")
		png, _ := json.Marshal("iVBORw0KGgo=")
		x := client.Execution{ID: "x", Status: "ok", Result: &client.CellResult{Status: "ok", Stdout: "hi\n",
			Outputs:   []client.Output{{Data: map[string]json.RawMessage{"image/png": png}}},
			Artifacts: []client.Artifact{{Path: "out.csv", Size: 4, Change: "created"}}}}
		b, _ := json.Marshal(client.Event{Type: "done", Execution: &x})
		fmt.Fprintf(w, "event: done\ndata: %s\n\n", b)
	})
	mux.HandleFunc("GET /v1/sessions/{id}/files/{path...}", func(w http.ResponseWriter, r *http.Request) {
		if r.PathValue("path") != "out.csv" {
			w.Header().Set("Content-Type", "application/problem+json")
			w.WriteHeader(404)
			fmt.Fprint(w, `{"status":404,"code":"not_found","detail":"no file"}`)
			return
		}
		w.Header().Set("Content-Type", "text/csv")
		fmt.Fprint(w, "a,b\n")
	})
	c, err := tools.InProcess(mux, "k", "192.0.2.1:1")
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func connect(t *testing.T, progress func(*sdk.ProgressNotificationClientRequest)) *sdk.ClientSession {
	ct, st := sdk.NewInMemoryTransports()
	ctx := context.Background()
	ss, err := NewServer("test", StdioClient(fakeAPI(t))).Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ss.Close() })
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "t", Version: "1"}, &sdk.ClientOptions{ProgressNotificationHandler: func(_ context.Context, r *sdk.ProgressNotificationClientRequest) {
		if progress != nil {
			progress(r)
		}
	}}).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// A cell's result becomes MCP content: text, an image, a resource link
// that resources/read fetches; a progress token gets notifications.
func TestToolResultAsMCPContent(t *testing.T) {
	var mu sync.Mutex
	var msgs []string
	cs := connect(t, func(r *sdk.ProgressNotificationClientRequest) {
		mu.Lock()
		msgs = append(msgs, r.Params.Message)
		mu.Unlock()
	})
	ctx := context.Background()
	params := &sdk.CallToolParams{Name: "execute_code", Arguments: map[string]any{"session_id": "s1", "code": "print('hi')"}}
	params.SetProgressToken("p1")
	r, err := cs.CallTool(ctx, params)
	if err != nil || r.IsError || len(r.Content) != 3 {
		t.Fatalf("CallTool: %v %+v", err, r)
	}
	if txt, ok := r.Content[0].(*sdk.TextContent); !ok || txt.Text != "hi\n" {
		t.Errorf("first content %#v, want the stdout", r.Content[0])
	}
	if img, ok := r.Content[1].(*sdk.ImageContent); !ok || img.MIMEType != "image/png" || string(img.Data[:4]) != "\x89PNG" {
		t.Errorf("second content %#v, want a PNG image", r.Content[1])
	}
	link, ok := r.Content[2].(*sdk.ResourceLink)
	if !ok || link.URI != "kiln://sessions/s1/files/out.csv" {
		t.Fatalf("third content %#v, want a resource link", r.Content[2])
	}
	res, err := cs.ReadResource(ctx, &sdk.ReadResourceParams{URI: link.URI})
	if err != nil || res.Contents[0].Text != "a,b\n" || res.Contents[0].MIMEType != "text/csv" {
		t.Errorf("ReadResource: %v %+v", err, res)
	}
	if _, err := cs.ReadResource(ctx, &sdk.ReadResourceParams{URI: "kiln://sessions/s1/files/gone.txt"}); err == nil || !strings.Contains(err.Error(), "not found") {
		t.Errorf("a missing file: %v, want not found", err)
	}
	// Notifications are handled apart from the call's answer: give them
	// a moment.
	for i := 0; i < 100; i++ {
		mu.Lock()
		n := len(msgs)
		mu.Unlock()
		if n > 0 {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(msgs) == 0 || !strings.Contains(strings.Join(msgs, "|"), "hi") {
		t.Errorf("progress %q, want the output as it came", msgs)
	}
}

// Bad arguments and a tool kiln does not have are tool errors
// (isError), not protocol errors, so the model sees the message.
func TestToolErrorsAreIsError(t *testing.T) {
	cs := connect(t, nil)
	r, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "execute_code", Arguments: map[string]any{"code": "1"}})
	if err != nil || !r.IsError || !strings.Contains(r.Content[0].(*sdk.TextContent).Text, "session_id") {
		t.Errorf("missing session_id: %v %+v", err, r)
	}
	tl, err := cs.ListTools(context.Background(), nil)
	if err != nil || len(tl.Tools) != len(tools.All()) {
		t.Fatalf("ListTools: %v %d", err, len(tl.Tools))
	}
	for _, tool := range tl.Tools {
		if tool.Annotations == nil || tool.InputSchema == nil || tool.Description == "" {
			t.Errorf("tool %s lacks annotations, schema or description", tool.Name)
		}
	}
}
