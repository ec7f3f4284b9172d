package service_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kiln-dev/kiln/client"
)

// TestLoad: 50 clients, each its own user and session, run 1,000 cells
// together. Every result must come back right and be in the history in
// order; the only errors allowed are the documented "try again" answers
// (429 rate_limited, 503 queue_full), which the clients honour; and no
// sandbox is left at the end.
func TestLoad(t *testing.T) {
	needRoot(t)
	const clients, perClient = 50, 20
	ctx := ctxT(t, 10*time.Minute)
	data := dataDir(t)
	srv := start(t, data)
	defer srv.stop()
	admin := srv.client(srv.key)

	cs := make([]*client.Client, clients)
	for i := range cs {
		u, err := admin.CreateUser(ctx, client.UserRequest{Name: fmt.Sprintf("load%02d", i)})
		if err != nil {
			t.Fatal(err)
		}
		k, err := admin.CreateKey(ctx, u.ID, "load")
		if err != nil {
			t.Fatal(err)
		}
		cs[i] = srv.client(k.Secret)
	}
	var retries atomic.Int64
	retry := func(f func() error) error {
		for {
			err := f()
			var p *client.Problem
			if errors.As(err, &p) && (p.Code == "rate_limited" || p.Code == "queue_full") {
				retries.Add(1)
				time.Sleep(time.Duration(max(p.RetryAfterSeconds, 1)) * 100 * time.Millisecond)
				continue
			}
			return err
		}
	}
	start := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, clients)
	sessions := make([]string, clients)
	for i, c := range cs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- runClient(ctx, c, i, perClient, retry, &sessions[i])
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	elapsed := time.Since(start)
	t.Logf("%d cells from %d clients in %v (%.0f cells/s), %d retries after 429/503",
		clients*perClient, clients, elapsed.Round(time.Millisecond), float64(clients*perClient)/elapsed.Seconds(), retries.Load())

	// Every result is stored: each history has the cells in order.
	for i, c := range cs {
		var n int64
		for e, err := range c.AllExecutions(ctx, sessions[i]) {
			if err != nil {
				t.Fatal(err)
			}
			n++
			want := fmt.Sprintf("%d", i*1000+int(e.Seq))
			if e.Seq != n || e.Status != "ok" || e.Result == nil || !strings.Contains(textOf(e.Result), want) {
				t.Fatalf("client %d history #%d: seq %d status %s result %+v, want %s", i, n, e.Seq, e.Status, e.Result, want)
			}
		}
		if n != perClient {
			t.Errorf("client %d: %d executions stored, want %d", i, n, perClient)
		}
		if err := retry(func() error { return c.DeleteSession(ctx, sessions[i]) }); err != nil {
			t.Error(err)
		}
	}
	waitNoSandboxes(t, "after the load")
}

// runClient makes a session and runs its cells one after another, each
// checked against what it must print.
func runClient(ctx context.Context, c *client.Client, i, n int, retry func(func() error) error, session *string) error {
	var s *client.Session
	if err := retry(func() (err error) { s, err = c.CreateSession(ctx, client.SessionRequest{}); return }); err != nil {
		return fmt.Errorf("client %d: create session: %w", i, err)
	}
	*session = s.ID
	if err := retry(func() error {
		_, err := c.Exec(ctx, s.ID, client.ExecRequest{Code: fmt.Sprintf("base = %d\nn = 0\nbase + 1", i*1000)})
		return err
	}); err != nil {
		return fmt.Errorf("client %d: first cell: %w", i, err)
	}
	for k := 2; k <= n; k++ {
		var x *client.Execution
		err := retry(func() (err error) {
			x, err = c.Exec(ctx, s.ID, client.ExecRequest{Code: fmt.Sprintf("n += 1\nbase + %d", k)})
			return
		})
		if err != nil {
			return fmt.Errorf("client %d cell %d: %w", i, k, err)
		}
		if want := fmt.Sprint(i*1000 + k); x.Status != "ok" || !strings.Contains(textOf(x.Result), want) {
			return fmt.Errorf("client %d cell %d: status %s, output %q, want %s", i, k, x.Status, textOf(x.Result), want)
		}
	}
	return nil
}
