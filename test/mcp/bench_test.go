package mcp_test

import (
	"context"
	"net/http"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kiln-dev/kiln/client"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// BenchmarkWarmCell measures the round trip of a warm Python `1+1` cell:
// an MCP tool call (execute_code) over stdio to `kiln mcp`, the same over
// streamable HTTP to kiln serve's /mcp, and the same cell through the
// REST API (POST /v1/sessions/{id}/executions). Each reports the median
// in ms besides Go's mean.
//
//	go test -run '^$' -bench WarmCell -benchtime 200x ./test/mcp/
func BenchmarkWarmCell(b *testing.B) {
	if kilnBin == "" {
		b.Skip("needs root to make sandboxes")
	}
	b.Run("mcp-stdio", func(b *testing.B) {
		// The rate limit is the API's (50 calls a second by default); a
		// benchmark calls faster than an agent would.
		cs := connect(b, &sdk.CommandTransport{Command: exec.Command(kilnBin, "mcp", "--rate", "10000", "--burst", "10000")})
		benchTool(b, cs)
	})
	b.Run("mcp-http", func(b *testing.B) {
		s := startServe(b)
		hc := &http.Client{Transport: bearer{s.key}}
		cs := connect(b, &sdk.StreamableClientTransport{Endpoint: s.url + "/mcp", HTTPClient: hc})
		benchTool(b, cs)
	})
	b.Run("rest-http", func(b *testing.B) {
		s := startServe(b)
		c, err := client.New(s.url, s.key)
		if err != nil {
			b.Fatal(err)
		}
		ctx := context.Background()
		sess, err := c.CreateSession(ctx, client.SessionRequest{})
		if err != nil {
			b.Fatal(err)
		}
		measure(b, func() {
			x, err := c.Exec(ctx, sess.ID, client.ExecRequest{Code: "1+1"})
			if err != nil || x.Status != "ok" {
				b.Fatalf("exec: %v %+v", err, x)
			}
		})
	})
}

type bearer struct{ key string }

func (t bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+t.key)
	return http.DefaultTransport.RoundTrip(r)
}

func connect(b *testing.B, t sdk.Transport) *sdk.ClientSession {
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "kiln-bench", Version: "1"}, nil).Connect(context.Background(), t, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { cs.Close() })
	return cs
}

var sessionRE = regexp.MustCompile(`session_id: (\S+)`)

// benchTool makes a session through the tools, then measures
// execute_code of 1+1 in it.
func benchTool(b *testing.B, cs *sdk.ClientSession) {
	ctx := context.Background()
	r, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "create_session", Arguments: map[string]any{}})
	if err != nil || r.IsError {
		b.Fatalf("create_session: %v %+v", err, r)
	}
	m := sessionRE.FindStringSubmatch(r.Content[0].(*sdk.TextContent).Text)
	if m == nil {
		b.Fatalf("create_session said %+v", r.Content[0])
	}
	args := map[string]any{"session_id": m[1], "code": "1+1"}
	measure(b, func() {
		r, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "execute_code", Arguments: args})
		if err != nil || r.IsError || !strings.Contains(r.Content[0].(*sdk.TextContent).Text, "2") {
			b.Fatalf("execute_code: %v %+v", err, r.Content[0])
		}
	})
}

// measure runs op once to warm up, then b.N times, and reports the
// median besides the mean.
func measure(b *testing.B, op func()) {
	op()
	times := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for range b.N {
		start := time.Now()
		op()
		times = append(times, time.Since(start))
	}
	b.StopTimer()
	slices.Sort(times)
	b.ReportMetric(float64(times[len(times)/2].Microseconds())/1000, "median-ms")
}
