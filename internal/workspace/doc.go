// Package workspace keeps sessions' workspaces on the host: one size- and
// inode-limited filesystem per session, mounted in kiln's mount namespace
// at <root>/<id>. Such a mount outlives the sandbox that uses it and the
// kiln process that made it (a service killed and restarted finds its
// sessions' files again).
//
// A workspace is of one of two kinds. Disk (the service's default) is a
// sparse ext4 image, <root>/<id>.img, on a loop device: it takes disk, not
// memory, and survives a reboot, after which Restore mounts it again.
// Tmpfs takes the host's memory, and a reboot leaves its directory without
// its mount: a workspace that was lost.
//
// A sandbox gets a workspace through native.Spec.HostDir, which binds it as
// /workspace; the filesystem's size is then the workspace's hard limit.
package workspace
