package docker

// maskedPaths are the paths the runtime masks in every container (a file
// behind /dev/null, a directory behind an empty read-only tmpfs). Setting
// them replaces the engine's default list, so that list comes first; then
// the /proc files and directories the native backend masks
// (agent/boot's procMasks and procDirMasks: the host's locks, kernel
// command line and configuration, disks, interrupts, memory layout,
// pressure), and /sys, which natively is not there at all: it shows the
// host's devices and CPU topology.
var maskedPaths = []string{
	// The engine's defaults (Engine 20.10, oci/defaults.go).
	"/proc/asound", "/proc/acpi", "/proc/kcore", "/proc/keys", "/proc/latency_stats",
	"/proc/timer_list", "/proc/timer_stats", "/proc/sched_debug", "/proc/scsi", "/sys/firmware",
	// Native's.
	"/proc/kallsyms", "/proc/kmsg", "/proc/locks", "/proc/cmdline", "/proc/config.gz",
	"/proc/diskstats", "/proc/interrupts", "/proc/softirqs", "/proc/partitions", "/proc/swaps",
	"/proc/modules", "/proc/vmallocinfo", "/proc/buddyinfo", "/proc/zoneinfo", "/proc/pagetypeinfo",
	"/proc/schedstat", "/proc/key-users", "/proc/pressure",
	"/sys",
}
