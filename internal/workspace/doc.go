// Package workspace keeps sessions' workspaces on the host: one size- and
// inode-limited tmpfs per session, mounted in the host's mount namespace at
// <root>/<id>. Such a mount outlives the sandbox that uses it and the kiln
// process that made it (a service killed and restarted finds its sessions'
// files again), but not a reboot of the machine, after which the directory
// is there without its mount: a workspace that was lost.
//
// A sandbox gets a workspace through native.Spec.HostDir, which binds it as
// /workspace; the tmpfs's size is then the workspace's hard limit.
package workspace
