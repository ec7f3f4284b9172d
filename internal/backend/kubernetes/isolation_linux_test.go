package kubernetes

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/kiln-dev/kiln/internal/agentclient"
)

// The agent's own isolation check: a reachable API server is an error
// naming it once the wait is over; a refused connect is isolation at once.
func TestIsolatedFrom(t *testing.T) {
	if err := isolatedFrom(""); err != nil {
		t.Errorf("no API server to check: %v", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go acceptAndClose(ln)
	defer func(w time.Duration) { isolationWait = w }(isolationWait)
	isolationWait = 300 * time.Millisecond
	err = isolatedFrom(ln.Addr().String())
	if err == nil || !strings.Contains(err.Error(), "reaches the API server at "+ln.Addr().String()) || !strings.Contains(err.Error(), "must enforce NetworkPolicy") {
		t.Errorf("a reachable API server: %v; want an error naming it and what the cluster lacks", err)
	}
	addr := ln.Addr().String()
	ln.Close()
	t0 := time.Now()
	if err := isolatedFrom(addr); err != nil || time.Since(t0) > time.Second {
		t.Errorf("a refused connect: %v after %v; want isolated at once", err, time.Since(t0))
	}
}

// A bridge that comes before the check is done waits for it; if the Pod
// is not isolated, kiln gets the reason instead of the agent's hello.
func TestAfterIsolation(t *testing.T) {
	isolation := make(chan error, 1)
	trusted := afterIsolation(func(net.Conn) error { return nil }, isolation)
	agentSide, kilnSide := net.Pipe()
	defer kilnSide.Close()
	result := make(chan error, 1)
	go func() {
		err := trusted(agentSide)
		agentSide.Close()
		result <- err
	}()
	select {
	case err := <-result:
		t.Fatalf("passed before the check was done: %v", err)
	case <-time.After(100 * time.Millisecond):
	}
	isolation <- errors.New("the sandbox's Pod reaches the API server at 10.0.0.1:443")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err := agentclient.Dial(ctx, kilnSide)
	if !errors.Is(err, agentclient.ErrRefused) || !strings.Contains(err.Error(), "reaches the API server at 10.0.0.1:443") {
		t.Errorf("dial: %v; want the agent's refusal with its reason", err)
	}
	if err := <-result; err == nil {
		t.Error("a Pod that is not isolated: the connection was trusted")
	}
	// and every later bridge too, at once
	a2, k2 := net.Pipe()
	defer k2.Close()
	go k2.Read(make([]byte, 1<<10))
	if err := trusted(a2); err == nil {
		t.Error("a second bridge was trusted")
	}
}

// acceptAndClose closes each connection to ln at once, until ln closes.
func acceptAndClose(ln net.Listener) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		c.Close()
	}
}
