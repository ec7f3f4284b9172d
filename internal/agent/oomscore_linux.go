package agent

import (
	"bytes"
	"os"
	"sync"
)

// In its unisolated mode (a container of the Docker or Kubernetes backend)
// the agent shares the sandbox's memory cgroup with user code. The
// cgroup's OOM killer takes the process with the largest footprint, so a
// memory bomb of many processes each smaller than the agent (some 12 MB)
// would take the agent, and with it the sandbox. User processes are
// therefore started with the highest OOM score adjustment: they all go
// before the agent.
const userOOMScoreAdj = "1000"

const oomScoreAdjFile = "/proc/self/oom_score_adj"

var (
	oomScoreMu sync.Mutex
	// oomScoreHeld, when set, is the agent's oom_score_adj, opened before
	// the agent made itself not dumpable (HoldOOMScoreFile).
	oomScoreHeld *os.File
)

// HoldOOMScoreFile opens the process's oom_score_adj for the rest of its
// life. A process that is not dumpable has its /proc/self entries owned
// by root, so one that makes itself so (a container's agent, PID 1) opens
// the file first: a write through a descriptor opened before is allowed.
func HoldOOMScoreFile() error {
	f, err := os.OpenFile(oomScoreAdjFile, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	oomScoreMu.Lock()
	oomScoreHeld = f
	oomScoreMu.Unlock()
	return nil
}

// readOOMScore and writeOOMScore use the held descriptor when there is one.
func readOOMScore() ([]byte, error) {
	if oomScoreHeld == nil {
		return os.ReadFile(oomScoreAdjFile)
	}
	b := make([]byte, 32)
	n, err := oomScoreHeld.ReadAt(b, 0)
	if n > 0 {
		err = nil
	}
	return b[:n], err
}

func writeOOMScore(v []byte) error {
	if oomScoreHeld == nil {
		return os.WriteFile(oomScoreAdjFile, v, 0)
	}
	_, err := oomScoreHeld.WriteAt(v, 0)
	return err
}

// withUserOOMScore runs fork, which starts a user process, with the
// agent's own oom_score_adj raised to userOOMScoreAdj, so that the child
// has it from its first instruction (a grandchild forked at once
// inherits it too), and lowers it back after. Anyone may raise their
// adjustment, and lower it back to any value not below the minimum a
// privileged process set, which the value it had is never below. When
// the file cannot be read or written, fork runs as it is.
func withUserOOMScore(fork func() (int, error)) (int, error) {
	oomScoreMu.Lock()
	defer oomScoreMu.Unlock()
	old, err := readOOMScore()
	if err != nil || writeOOMScore([]byte(userOOMScoreAdj)) != nil {
		return fork()
	}
	defer writeOOMScore(bytes.TrimSpace(old))
	return fork()
}
