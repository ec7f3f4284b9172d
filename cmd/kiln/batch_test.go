package main

import (
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
