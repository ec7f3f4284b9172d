package agent

import (
	"os"
	"os/signal"
	"sync"

	"golang.org/x/sys/unix"
)

// reaper waits for every child of PID 1: the processes the agent started and
// the orphans the kernel reparents to it. Exit statuses of the agent's own
// processes go to whoever started them; the rest are discarded.
type reaper struct {
	mu      sync.Mutex
	waiters map[int]chan exitStatus
}

type exitStatus struct {
	ws unix.WaitStatus
	ru unix.Rusage
}

func startReaper() *reaper {
	r := &reaper{waiters: map[int]chan exitStatus{}}
	sig := make(chan os.Signal, 64)
	signal.Notify(sig, unix.SIGCHLD)
	go func() {
		for range sig {
			r.reap()
		}
	}()
	return r
}

// start runs fork and registers the new pid while holding the lock, so the
// reaper cannot collect the child's status before anyone waits for it.
func (r *reaper) start(fork func() (int, error)) (int, <-chan exitStatus, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	pid, err := fork()
	if err != nil {
		return 0, nil, err
	}
	ch := make(chan exitStatus, 1)
	r.waiters[pid] = ch
	return pid, ch, nil
}

func (r *reaper) reap() {
	for {
		var st exitStatus
		pid, err := unix.Wait4(-1, &st.ws, unix.WNOHANG, &st.ru)
		if pid <= 0 || err != nil {
			return
		}
		r.mu.Lock()
		if ch, ok := r.waiters[pid]; ok {
			delete(r.waiters, pid)
			ch <- st
		}
		r.mu.Unlock()
	}
}
