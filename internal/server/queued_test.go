package server_test

import (
	"context"
	"testing"
	"time"

	"github.com/kiln-dev/kiln/client"
	"github.com/kiln-dev/kiln/internal/service"
)

// TestQueuedEventThenStarted: with one slot, taken by alice's sleeping
// cell, bob's cell streams "queued" with its place and why, and then,
// once alice's cell is interrupted, "started" and the rest; over SSE and
// over the WebSocket alike.
func TestQueuedEventThenStarted(t *testing.T) {
	e := newEnv(t, options{svc: service.Config{Concurrency: 1, UserConcurrency: 1}})
	ctx := ctxT(t)
	alice, bob := e.user("alice"), e.user("bob")
	as, err := alice.CreateSession(ctx, client.SessionRequest{})
	if err != nil {
		t.Fatal(err)
	}
	bs, err := bob.CreateSession(ctx, client.SessionRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for _, transport := range []string{"sse", "ws"} {
		t.Run(transport, func(t *testing.T) {
			sleeping := make(chan struct{}, 1)
			aliceDone := make(chan error, 1)
			go func() {
				_, err := alice.ExecStream(ctx, as.ID, client.ExecRequest{Code: "import time\nprint('zzz', flush=True)\ntime.sleep(90)", TimeoutMS: 120_000},
					func(ev client.Event) {
						if ev.Type == client.EventStdout {
							sleeping <- struct{}{}
						}
					})
				aliceDone <- err
			}()
			select {
			case <-sleeping:
			case <-time.After(60 * time.Second):
				t.Fatal("alice's cell did not start")
			}
			var types []string
			onEvent := func(ev client.Event) {
				types = append(types, ev.Type)
				if ev.Type == client.EventQueued {
					if ev.Position != 1 || ev.Reason != "server" {
						t.Errorf("queued event: position %d reason %q, want 1, server", ev.Position, ev.Reason)
					}
					go alice.Interrupt(context.Background(), as.ID)
				}
			}
			req := client.ExecRequest{Code: "print(1)"}
			var x *client.Execution
			if transport == "sse" {
				x, err = bob.ExecStream(ctx, bs.ID, req, onEvent)
			} else {
				var st *client.Stream
				if st, err = bob.ExecWS(ctx, bs.ID, req); err != nil {
					t.Fatal(err)
				}
				x, err = st.Wait(ctx, onEvent)
				st.Close()
			}
			if err != nil {
				t.Fatal(err)
			}
			if x.Status != "ok" {
				t.Errorf("bob's cell: status %s", x.Status)
			}
			if len(types) < 3 || types[0] != client.EventQueued || types[1] != client.EventStarted || types[len(types)-1] != client.EventDone {
				t.Errorf("bob's events: %v, want queued, started, ..., done", types)
			}
			if err := <-aliceDone; err != nil {
				t.Errorf("alice's cell: %v", err)
			}
		})
	}
}
