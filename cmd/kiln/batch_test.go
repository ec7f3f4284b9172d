package main

import (
	"encoding/json"
	"flag"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/kiln-dev/kiln/client"
)

func TestReadBatchFile(t *testing.T) {
	items, err := readBatchFile("-", strings.NewReader(`{"id":"a","language":"python","code":"print(1)","check":{"stdout":"1\n"}}

{"language":"c","code":"int main(){return 3;}","limits":{"timeout_ms":2000},"check":{"exit_code":3}}
`))
	if err != nil {
		t.Fatal(err)
	}
	if len(items) != 2 || items[0].ID != "a" || *items[0].Check.Stdout != "1\n" || *items[1].Check.ExitCode != 3 || items[1].Limits.TimeoutMS != 2000 {
		t.Errorf("items = %+v", items)
	}
	for _, tc := range []struct{ in, want string }{
		{"", "has no items"},
		{`{"language":"python","code":"1"}` + "\n" + `{"language":"python","cod":"1"}`, `line 2: not a batch item: json: unknown field "cod"`},
		{"not json", "line 1"},
		{strings.Repeat(`{"language":"python","code":"1"}`+"\n", client.MaxBatchItems+1), "more than 5000 items"},
		{"x", "in.jsonl line 1"},
	} {
		_, err := parseBatch("in.jsonl", strings.NewReader(tc.in))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("parseBatch(%.40q) = %v, want an error with %q", tc.in, err, tc.want)
		}
	}
}

func TestBatchSummary(t *testing.T) {
	got := batchSummary(&client.Batch{ID: "b1", Total: 5, Passed: 2, Failed: 3, Reasons: map[string]int{"timeout": 1, "compile_error": 2}})
	want := "batch b1: 5 items, 2 passed, 3 failed\n  compile_error  2\n  timeout        1\n"
	if got != want {
		t.Errorf("summary:\n%s\nwant:\n%s", got, want)
	}
}

// TestBatchLocal runs kiln batch on this machine: the results file has a
// verdict per item, the summary counts them, and a failed item makes the
// status 1.
func TestBatchLocal(t *testing.T) {
	needRoot(t)
	dir := t.TempDir()
	in := `{"id":"ok","language":"python","code":"print(6*7)","check":{"stdout":"42\n"}}
{"id":"bad","language":"python","code":"def f(): return 1","check":{"test":"assert f() == 2, 'f is wrong'"}}
{"id":"js","language":"javascript","code":"console.log('x  ')","check":{"stdout":"x","trim":true}}
`
	res := execKiln(t, invocation{dir: dir, stdin: []byte(in)}, "batch", "-o", "out.jsonl", "-")
	if res.code != 1 || !strings.Contains(res.stderr, "3 items, 2 passed, 1 failed") || !strings.Contains(res.stderr, "wrong_answer   1") {
		t.Fatalf("status %d, stderr:\n%s", res.code, res.stderr)
	}
	data, err := os.ReadFile(filepath.Join(dir, "out.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]client.BatchItemResult{}
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		var r client.BatchItemResult
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("a result line that is not JSON: %q", line)
		}
		got[r.ID] = r
	}
	if len(got) != 3 || !got["ok"].Passed || !got["js"].Passed || got["bad"].Reason != client.ReasonWrongAnswer || got["bad"].Detail != "assertion failed: f is wrong" {
		t.Errorf("results: %+v", got)
	}
}

// TestParseInterspersed: flags count after the file too, as users type
// `kiln batch items.jsonl -o results.jsonl`; "--" ends them.
func TestParseInterspersed(t *testing.T) {
	for _, tc := range []struct {
		args    []string
		out     string
		cache   bool
		files   []string
		wantErr bool
	}{
		{args: []string{"-o", "r.jsonl", "b.jsonl"}, out: "r.jsonl", files: []string{"b.jsonl"}},
		{args: []string{"b.jsonl", "-o", "r.jsonl", "-cache"}, out: "r.jsonl", cache: true, files: []string{"b.jsonl"}},
		{args: []string{"a.jsonl", "b.jsonl"}, files: []string{"a.jsonl", "b.jsonl"}},
		{args: []string{"--", "-o"}, files: []string{"-o"}},
		{args: []string{"b.jsonl", "-nope"}, wantErr: true},
	} {
		fs := flag.NewFlagSet("batch", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		out := fs.String("o", "", "")
		cache := fs.Bool("cache", false, "")
		files, err := parseInterspersed(fs, tc.args)
		if (err != nil) != tc.wantErr {
			t.Errorf("%q: error %v, want error %v", tc.args, err, tc.wantErr)
			continue
		}
		if err == nil && (*out != tc.out || *cache != tc.cache || !slices.Equal(files, tc.files)) {
			t.Errorf("%q: -o %q -cache %v files %q; want %q %v %q", tc.args, *out, *cache, files, tc.out, tc.cache, tc.files)
		}
	}
}
