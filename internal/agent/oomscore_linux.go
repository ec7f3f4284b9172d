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
// before the agent and the container's init.
const userOOMScoreAdj = "1000"

const oomScoreAdjFile = "/proc/self/oom_score_adj"

var oomScoreMu sync.Mutex

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
	old, err := os.ReadFile(oomScoreAdjFile)
	if err != nil || os.WriteFile(oomScoreAdjFile, []byte(userOOMScoreAdj), 0) != nil {
		return fork()
	}
	defer os.WriteFile(oomScoreAdjFile, bytes.TrimSpace(old), 0)
	return fork()
}
