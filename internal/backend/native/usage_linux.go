package native

import (
	"context"
	"fmt"
	"time"
)

// SandboxUsage is what the user code of a sandbox made by CreateSandbox
// has used since it started: CPU time and peak memory of its user/
// cgroup, read from the host side. The service finds it by type
// assertion, for the resource use of its session list.
func (b *Backend) SandboxUsage(ctx context.Context, id string) (cpu time.Duration, peakMemory int64, err error) {
	sb, err := b.made.Get(id)
	if err != nil {
		return 0, 0, err
	}
	if sb.group == nil {
		return 0, 0, fmt.Errorf("sandbox %s has no cgroup", id)
	}
	u, err := sb.group.Stats()
	if err != nil {
		return 0, 0, err
	}
	return u.CPUTime, u.PeakMemoryBytes, nil
}
