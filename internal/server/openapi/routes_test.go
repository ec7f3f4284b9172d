package openapi

import (
	"bufio"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// routeLine matches a line of the route table in client/doc.go:
// "//\tGET    /v1/sessions/{id}    Session". Continuation lines start with
// spaces, not a method, so they do not match.
var routeLine = regexp.MustCompile(`^//\t(GET|HEAD|POST|PUT|PATCH|DELETE|OPTIONS)\s+(/\S*)`)

// routeTable reads the route table that client/doc.go documents.
func routeTable(t *testing.T) []Operation {
	t.Helper()
	f, err := os.Open("../../../client/doc.go")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var ops []Operation
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		m := routeLine.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		// The mux's catch-all wildcard {path...} is the template {path}.
		path := strings.ReplaceAll(m[2], "...}", "}")
		ops = append(ops, Operation{Method: m[1], Path: path})
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(ops) < 10 {
		t.Fatalf("found %d routes in client/doc.go; the table's format changed", len(ops))
	}
	return ops
}

// The document and the route table of client/doc.go list the same
// operations, so neither can change without the other.
func TestOperationsMatchRouteTable(t *testing.T) {
	want := routeTable(t)
	slices.SortFunc(want, func(a, b Operation) int {
		if c := strings.Compare(a.Path, b.Path); c != 0 {
			return c
		}
		return strings.Compare(a.Method, b.Method)
	})
	if diff := cmp.Diff(want, Operations()); diff != "" {
		t.Errorf("operations (-client/doc.go +openapi.json):\n%s", diff)
	}
}

func TestOperationsIsACopy(t *testing.T) {
	ops := Operations()
	ops[0].Path = "/changed"
	if Operations()[0].Path == "/changed" {
		t.Error("changing Operations' answer changed the next one")
	}
}
