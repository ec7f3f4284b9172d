package agent

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"runtime/debug"
	"sync"
	"syscall"

	"github.com/kiln-dev/kiln/internal/agent/boot"
	"github.com/kiln-dev/kiln/internal/cgroups"
	"github.com/kiln-dev/kiln/internal/protocol"
)

// Main builds the sandbox (package boot) and then runs the agent until the
// service hangs up or asks it to shut down. It never returns.
func Main() {
	cfg, err := boot.ReadConfig()
	if err != nil {
		fmt.Fprintf(os.Stderr, "kiln boot: %v\n", err)
		os.Exit(1)
	}
	a, err := newAgent(cfg.Agent)
	if err != nil {
		fmt.Fprintf(os.Stderr, "kiln agent: %v\n", err)
		os.Exit(1)
	}
	// The first spare's runtime starts while the root is being built.
	a.refill()
	if err := boot.Build(cfg); err != nil {
		fmt.Fprintf(os.Stderr, "kiln boot: %v\n", err)
		os.Exit(1)
	}
	if err := a.startEgress(); err != nil {
		fmt.Fprintf(os.Stderr, "kiln agent: egress bridge: %v\n", err)
		os.Exit(1)
	}
	if err := a.serve(protocol.NewReader(a.conn)); err != nil {
		fmt.Fprintf(os.Stderr, "kiln agent: %v\n", err)
		os.Exit(1)
	}
	os.Exit(0)
}

// agentSoftMemory is the Go heap the agent aims to stay under.
const agentSoftMemory = 64 << 20

// Agent is one running agent.
type Agent struct {
	cfg    protocol.AgentConfig
	cg     *cgroups.Handles
	out    *protocol.Writer
	reaper *reaper
	log    *slog.Logger

	conn    *os.File
	mu      sync.Mutex
	execs   map[uint64]*execution
	spare   *spare // a spawn stage waiting for its request, or nil
	kernels map[string]*kernel
	specs   map[string]protocol.Kernel // how to start each language's kernel
	cells   map[uint64]*cellRun
	stdins  map[uint64]*stdinQueue // open stdin of running execs and cells, by request id
	terms   map[uint64]*terminal   // open terminals, by request id (terminal_linux.go)
	files   sync.Mutex             // one file operation at a time keeps chown and sizes simple

	// unisolated: a plain host process (ServeUnisolated), for tests only.
	unisolated bool
	// confine: an unisolated agent's user programs are confined further
	// in the rlimit stage (Unisolated.Confine).
	confine bool
	// clients, when set, is the connection of the current client of an
	// agent that serves one client after another (ServeClients): the
	// sandbox outlives a client's hang-up. shutdown: a client asked the
	// agent to end.
	clients  *switchWriter
	shutdown bool
}

// hangUp is the end of the client's connection: the end of the sandbox,
// or with clients, of what that client had running (letGo).
func (a *Agent) hangUp() {
	if a.clients != nil {
		a.letGo()
		return
	}
	a.killAll()
}

func newAgent(cfg protocol.AgentConfig) (*Agent, error) {
	os.Clearenv()
	// The agent's cgroup has a small memory limit (cgroups.DefaultAgentLimits)
	// that a burst of garbage must not reach: past this the collector runs
	// as often as it must. What the agent holds is bounded by design; this
	// keeps the garbage from piling up on top of it.
	debug.SetMemoryLimit(agentSoftMemory)
	// Only the service ends the agent, by closing the connection or killing
	// it; stray job-control signals must not (Go would exit on SIGINT).
	// They are caught and dropped, not ignored: an ignored disposition
	// would pass to every process the agent starts, and user programs must
	// start with the default ones.
	stray := make(chan os.Signal, 8)
	signal.Notify(stray, syscall.SIGINT, syscall.SIGHUP, syscall.SIGTERM, syscall.SIGQUIT)
	go func() {
		for range stray {
		}
	}()
	var hs cgroups.HandleSpec
	if err := json.Unmarshal(cfg.Cgroup, &hs); err != nil {
		return nil, fmt.Errorf("cgroup spec: %w", err)
	}
	cg, err := cgroups.FromSpec(hs)
	if err != nil {
		return nil, err
	}
	// Inherited descriptors must not reach user processes by accident.
	for _, fd := range append([]int{cfg.ConnFD}, cfg.KeepFDs...) {
		syscall.CloseOnExec(fd)
	}
	conn := os.NewFile(uintptr(cfg.ConnFD), "conn")
	return &Agent{
		cfg:     cfg,
		cg:      cg,
		conn:    conn,
		out:     protocol.NewWriter(conn),
		reaper:  startReaper(),
		log:     slog.New(slog.NewTextHandler(os.Stderr, nil)),
		execs:   map[uint64]*execution{},
		kernels: map[string]*kernel{},
		specs:   map[string]protocol.Kernel{},
		cells:   map[uint64]*cellRun{},
		stdins:  map[uint64]*stdinQueue{},
	}, nil
}

func (a *Agent) serve(in *protocol.Reader) error {
	if err := a.out.Send(0, protocol.THello, protocol.Hello{Version: protocol.Version, Agent: "kiln"}); err != nil {
		return err
	}
	m, err := in.Read()
	if err != nil {
		return fmt.Errorf("read hello: %w", err)
	}
	var h protocol.Hello
	if m.Type != protocol.THello || m.Decode(&h) != nil || h.Version != protocol.Version {
		return fmt.Errorf("service speaks protocol %d, agent speaks %d", h.Version, protocol.Version)
	}
	for {
		m, err := in.Read()
		if errors.Is(err, io.EOF) {
			a.hangUp()
			return nil
		}
		if err != nil {
			a.hangUp()
			return err
		}
		if m.Type == protocol.TShutdown {
			a.killAll()
			a.out.Send(m.ID, protocol.TOK, protocol.FileResult{})
			a.shutdown = true
			return nil
		}
		a.dispatch(m)
	}
}

func (a *Agent) dispatch(m *protocol.Message) {
	switch m.Type {
	case protocol.TPing:
		a.out.Send(m.ID, protocol.TOK, protocol.FileResult{})
	case protocol.TExec:
		var req protocol.Exec
		if err := m.Decode(&req); err != nil {
			a.fail(m.ID, protocol.ErrInvalid, err.Error())
			return
		}
		a.startExec(m.ID, req)
	case protocol.TStdin:
		a.stdin(m)
	case protocol.TSignal, protocol.TCancel:
		if !a.controlCell(m) {
			a.control(m)
		}
	case protocol.TCell:
		var req protocol.Cell
		if err := m.Decode(&req); err != nil {
			a.fail(m.ID, protocol.ErrInvalid, err.Error())
			return
		}
		var in *stdinQueue
		if req.StdinOpen {
			// Registered before the cell starts, so that input the service
			// sends right behind the request is kept.
			ok := false
			if in, ok = a.openStdin(m.ID, []byte(req.Stdin)); !ok {
				a.fail(m.ID, protocol.ErrBusy, "a request with this id is running")
				return
			}
		}
		go a.runCell(m.ID, req, in)
	case protocol.TRestart:
		var r protocol.Restart
		if len(m.Body) > 0 {
			if err := m.Decode(&r); err != nil {
				a.fail(m.ID, protocol.ErrInvalid, err.Error())
				return
			}
		}
		go a.restart(m.ID, r)
	case protocol.TComplete, protocol.TCheck:
		var q protocol.KernelQuery
		if err := m.Decode(&q); err != nil {
			a.fail(m.ID, protocol.ErrInvalid, err.Error())
			return
		}
		go a.query(m.ID, m.Type, q)
	case protocol.TFileOp:
		var op protocol.FileOp
		if err := m.Decode(&op); err != nil {
			a.fail(m.ID, protocol.ErrInvalid, err.Error())
			return
		}
		go a.fileOp(m.ID, op)
	case protocol.TTermOpen, protocol.TTermInput, protocol.TTermResize, protocol.TTermAck, protocol.TTermClose:
		a.termMsg(m)
	default:
		a.fail(m.ID, protocol.ErrInvalid, "unknown request type "+m.Type)
	}
}

func (a *Agent) fail(id uint64, code, msg string) {
	a.out.Send(id, protocol.TError, protocol.Error{Code: code, Message: msg})
}
