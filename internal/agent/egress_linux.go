package agent

import (
	"errors"
	"io"
	"net"
	"sync"
	"time"

	"github.com/kiln-dev/kiln/internal/protocol"
)

// maxEgressConns bounds the connections the bridge carries at once, so
// that user code cannot grow the agent (whose cgroup is small) by opening
// connections; the proxy bounds them per session too.
const maxEgressConns = 64

// egressBridge listens on protocol.EgressProxyAddr in the sandbox's
// network namespace and copies every connection to the egress proxy's
// unix socket. It knows nothing of the proxy's protocol: the proxy on the
// host decides, records and answers.
type egressBridge struct {
	ln    net.Listener
	sock  string
	slots chan struct{}
	wg    sync.WaitGroup
}

// startEgress starts the bridge when the sandbox has an egress socket.
// It runs after the root is built (loopback is up, the socket bound) and
// before the agent serves, so user code never finds the port free.
func (a *Agent) startEgress() error {
	if a.cfg.Egress == "" {
		return nil
	}
	b, err := listenEgress(protocol.EgressProxyAddr, a.cfg.Egress)
	if err != nil {
		return err
	}
	go b.serve()
	return nil
}

func listenEgress(addr, sock string) (*egressBridge, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	return &egressBridge{ln: ln, sock: sock, slots: make(chan struct{}, maxEgressConns)}, nil
}

// serve accepts until the listener is closed.
func (b *egressBridge) serve() {
	for {
		c, err := b.ln.Accept()
		if errors.Is(err, net.ErrClosed) {
			b.wg.Wait()
			return
		}
		if err != nil {
			// Out of descriptors, say: the port stays, the next try may work.
			time.Sleep(10 * time.Millisecond)
			continue
		}
		select {
		case b.slots <- struct{}{}:
		default:
			c.Close() // over the bound: refused at once, never queued
			continue
		}
		b.wg.Add(1)
		go func() {
			defer b.wg.Done()
			defer func() { <-b.slots }()
			b.bridge(c)
		}()
	}
}

func (b *egressBridge) close() { b.ln.Close() }

// bridge copies one connection both ways, passing on each side's end of
// writing, until both directions are done.
func (b *egressBridge) bridge(c net.Conn) {
	defer c.Close()
	u, err := net.DialTimeout("unix", b.sock, 5*time.Second)
	if err != nil {
		return
	}
	defer u.Close()
	done := make(chan struct{})
	go func() {
		io.Copy(u, c)
		u.(*net.UnixConn).CloseWrite()
		close(done)
	}()
	io.Copy(c, u)
	c.(*net.TCPConn).CloseWrite()
	<-done
}
