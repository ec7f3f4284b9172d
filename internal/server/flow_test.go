package server_test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"image/png"
	"net/http"
	"strings"
	"testing"

	"github.com/kiln-dev/kiln/client"
)

// TestDataAnalysisFlow is the "done when": a session, a CSV in,
// pandas over it, a chart back as an image, a file the code wrote out,
// and the history.
func TestDataAnalysisFlow(t *testing.T) {
	e := newEnv(t, options{})
	ctx := ctxT(t)
	c := e.user("ada")
	s, err := c.CreateSession(ctx, client.SessionRequest{Metadata: map[string]string{"conversation": "c-1"}})
	if err != nil {
		t.Fatal(err)
	}
	if s.Status != "active" || s.Languages[0] != "python" || s.IdleTTLSeconds != 3600 {
		t.Errorf("new session = %+v", s)
	}
	csv := "city,temp\nOslo,4\nRome,18\nCairo,27\n"
	if _, err := c.Upload(ctx, s.ID, "data/temps.csv", strings.NewReader(csv), true); err != nil {
		t.Fatal(err)
	}
	x, err := c.Exec(ctx, s.ID, client.ExecRequest{Code: "import pandas as pd\ndf = pd.read_csv('data/temps.csv')\ndf.temp.mean()"})
	if err != nil {
		t.Fatal(err)
	}
	if x.Status != "ok" || len(x.Result.Outputs) == 0 || !strings.Contains(text(x.Result.Outputs[0]), "16.33") {
		t.Fatalf("mean cell: status %s outputs %v error %+v", x.Status, x.Result.Outputs, x.Result.Error)
	}
	x, err = c.Exec(ctx, s.ID, client.ExecRequest{Code: `import matplotlib.pyplot as plt
plt.bar(df.city, df.temp)
plt.savefig('chart.png')
plt.show()
df.describe().to_csv('summary.csv')`})
	if err != nil {
		t.Fatal(err)
	}
	var img []byte
	for _, o := range x.Result.Outputs {
		if raw, ok := o.Data["image/png"]; ok {
			var b64 string
			json.Unmarshal(raw, &b64)
			img, _ = base64.StdEncoding.DecodeString(b64)
		}
	}
	if _, err := png.Decode(bytes.NewReader(img)); err != nil {
		t.Fatalf("the chart is not a PNG (%d bytes): %v; result %+v", len(img), err, x.Result)
	}
	var buf bytes.Buffer
	ct, err := c.Download(ctx, s.ID, "summary.csv", &buf)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(ct, "text/csv") || !strings.Contains(buf.String(), "mean") {
		t.Errorf("summary.csv: type %q, body %q", ct, buf.String())
	}
	buf.Reset()
	if ct, err = c.Download(ctx, s.ID, "chart.png", &buf); err != nil || ct != "image/png" {
		t.Errorf("chart.png: type %q err %v", ct, err)
	}
	hist, err := c.History(ctx, s.ID, 0, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(hist.Executions) != 2 || hist.Executions[0].Seq != 1 || hist.Executions[1].Seq != 2 ||
		hist.Executions[1].Result == nil || len(hist.Executions[1].Result.Artifacts) == 0 {
		t.Fatalf("history = %+v", hist)
	}
	got, err := c.Execution(ctx, hist.Executions[0].ID)
	if err != nil || got.Code != hist.Executions[0].Code {
		t.Errorf("execution by id: %+v, %v", got, err)
	}
	list, err := c.ListSessions(ctx, client.ListOptions{Metadata: map[string]string{"conversation": "c-1"}})
	if err != nil || len(list.Sessions) != 1 || list.Sessions[0].ID != s.ID {
		t.Errorf("sessions by metadata: %+v, %v", list, err)
	}
	if err := c.DeleteSession(ctx, s.ID); err != nil {
		t.Fatal(err)
	}
	_, err = c.Exec(ctx, s.ID, client.ExecRequest{Code: "1"})
	wantProblem(t, "a cell in an ended session", err, http.StatusConflict, "conflict")
	if s, err = c.Session(ctx, s.ID); err != nil || s.Status != "ended" || s.EndReason != "deleted" {
		t.Errorf("after delete: %+v, %v", s, err)
	}
	if hist, err = c.History(ctx, s.ID, 0, ""); err != nil || len(hist.Executions) != 2 {
		t.Errorf("history after delete: %+v, %v", hist, err)
	}
}

func text(o client.Output) string {
	var s string
	json.Unmarshal(o.Data["text/plain"], &s)
	return s
}

// TestStreamsAndOneShot covers SSE, the WebSocket and /v1/run.
func TestStreamsAndOneShot(t *testing.T) {
	e := newEnv(t, options{})
	ctx := ctxT(t)
	c := e.user("bo")
	s, err := c.CreateSession(ctx, client.SessionRequest{Languages: []string{"python", "bash"}})
	if err != nil {
		t.Fatal(err)
	}
	var types []string
	var out strings.Builder
	x, err := c.ExecStream(ctx, s.ID, client.ExecRequest{Code: "import time\nfor i in range(3):\n    print(i, flush=True); time.sleep(0.05)\n'end'"}, func(ev client.Event) {
		if len(types) == 0 || types[len(types)-1] != ev.Type {
			types = append(types, ev.Type)
		}
		out.WriteString(ev.Data)
	})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(types, ",") != "started,stdout,display,done" || out.String() != "0\n1\n2\n" || x.Seq != 1 {
		t.Errorf("SSE: events %v, stdout %q, seq %d", types, out.String(), x.Seq)
	}
	x, err = c.Exec(ctx, s.ID, client.ExecRequest{Language: "bash", Code: "echo $((6*7)) >&2; exit 3"})
	if err != nil || strings.TrimSpace(x.Result.Stderr) != "42" || x.Result.ExitCode == nil || *x.Result.ExitCode != 3 {
		t.Errorf("bash cell: %+v, %v", x.Result, err)
	}

	st, err := c.ExecWS(ctx, s.ID, client.ExecRequest{Code: "print('ws', 1+1)"})
	if err != nil {
		t.Fatal(err)
	}
	out.Reset()
	x, err = st.Wait(ctx, func(ev client.Event) { out.WriteString(ev.Data) })
	st.Close()
	if err != nil || out.String() != "ws 2\n" || x.Status != "ok" {
		t.Errorf("WebSocket: stdout %q, %+v, %v", out.String(), x, err)
	}

	r, err := c.Run(ctx, client.RunRequest{Language: "c", Code: "#include <stdio.h>\nint main(){FILE*f=fopen(\"out.txt\",\"w\");fputs(\"made\",f);fclose(f);puts(\"hi\");}",
		Files: []client.File{{Path: "in.txt", Content: []byte("x")}}})
	if err != nil {
		t.Fatal(err)
	}
	if r.Result.Stdout != "hi\n" || len(r.Files) != 1 || r.Files[0].Path != "out.txt" || string(r.Files[0].Content) != "made" {
		t.Errorf("one-shot: %+v files %+v", r.Result, r.Files)
	}
}

// TestWebSocketStdin: a cell waits in input(), the client sees the prompt
// and answers over the socket.
func TestWebSocketStdin(t *testing.T) {
	e := newEnv(t, options{})
	ctx := ctxT(t)
	c := e.user("wes")
	s, err := c.CreateSession(ctx, client.SessionRequest{})
	if err != nil {
		t.Fatal(err)
	}
	st, err := c.ExecWS(ctx, s.ID, client.ExecRequest{Code: "name = input('name? ')\nprint('hi', name)"})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var out strings.Builder
	for !strings.Contains(out.String(), "name? ") {
		ev, err := st.Recv(ctx)
		if err != nil {
			t.Fatalf("before the prompt: %v (stdout %q)", err, out.String())
		}
		out.WriteString(ev.Data)
	}
	if err := st.Stdin(ctx, []byte("ada\n")); err != nil {
		t.Fatal(err)
	}
	x, err := st.Wait(ctx, func(ev client.Event) { out.WriteString(ev.Data) })
	if err != nil || x.Status != "ok" || out.String() != "name? hi ada\n" {
		t.Fatalf("after stdin: stdout %q, %+v, %v", out.String(), x, err)
	}
}

// TestArchivesRoundTrip: a directory comes out as zip and tar and goes
// back in unpacked; multipart, mkdir, move and delete work.
func TestArchivesRoundTrip(t *testing.T) {
	e := newEnv(t, options{})
	ctx := ctxT(t)
	c := e.user("ari")
	s, err := c.CreateSession(ctx, client.SessionRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.UploadMultipart(ctx, s.ID, "src", []client.File{{Path: "a.txt", Content: []byte("alpha")}, {Path: "b.txt", Content: []byte("beta")}}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Mkdir(ctx, s.ID, "src/deep/er"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Move(ctx, s.ID, client.MoveRequest{From: "src/b.txt", To: "src/deep/er/b.txt"}); err != nil {
		t.Fatal(err)
	}
	_, err = c.Move(ctx, s.ID, client.MoveRequest{From: "src/a.txt", To: "src/deep/er/b.txt"})
	wantProblem(t, "move onto an existing file", err, 409, "conflict")
	for _, format := range []string{"zip", "tar"} {
		var buf bytes.Buffer
		if err := c.DownloadArchive(ctx, s.ID, "src", format, &buf); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Extract(ctx, s.ID, "copy-"+format, format, &buf); err != nil {
			t.Fatal(err)
		}
		var got bytes.Buffer
		if _, err := c.Download(ctx, s.ID, "copy-"+format+"/deep/er/b.txt", &got); err != nil || got.String() != "beta" {
			t.Errorf("%s round trip: %q %v", format, got.String(), err)
		}
	}
	err = c.DeleteFile(ctx, s.ID, "src", false)
	wantProblem(t, "delete a non-empty directory", err, 409, "conflict")
	if err := c.DeleteFile(ctx, s.ID, "src", true); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Stat(ctx, s.ID, "src"); err == nil {
		t.Error("src still there after a recursive delete")
	}
}
