package docker

import (
	"slices"

	"github.com/kiln-dev/kiln/internal/agent/boot"
)

// maskedPaths are the paths the runtime masks in every container (a file
// behind /dev/null, a directory behind an empty read-only tmpfs). Setting
// them replaces the engine's default list, so that list comes first; then
// the /proc files and directories the native backend masks, taken from
// native's own list (boot.ProcMasks and boot.ProcDirMasks: the host's
// locks, kernel command line and configuration, disks, interrupts, memory
// layout, pressure), so the two cannot drift; and /sys, which natively is
// not there at all: it shows the host's devices and CPU topology.
var maskedPaths = masks()

// engineMasks is the engine's default list (Engine 20.10, oci/defaults.go).
var engineMasks = []string{
	"/proc/asound", "/proc/acpi", "/proc/kcore", "/proc/keys", "/proc/latency_stats",
	"/proc/timer_list", "/proc/timer_stats", "/proc/sched_debug", "/proc/scsi", "/sys/firmware",
}

func masks() []string {
	paths := slices.Clone(engineMasks)
	for _, name := range slices.Concat(boot.ProcMasks, boot.ProcDirMasks) {
		if p := "/proc/" + name; !slices.Contains(paths, p) {
			paths = append(paths, p)
		}
	}
	return append(paths, "/sys")
}
