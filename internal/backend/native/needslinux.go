package native

import "github.com/kiln-dev/kiln/internal/kiln"

// NeedsLinux is what every sandbox command answers on a system that is not
// Linux (native_other.go): the native backend is made of Linux namespaces,
// cgroups, seccomp and Landlock. The remote commands need none of it, so
// the message points to them.
func NeedsLinux(goos string) error {
	return kiln.Errorf(kiln.Unsupported, "sandboxes need Linux (namespaces, cgroups, seccomp and Landlock), and this kiln is built for %s. "+
		"Run kiln serve on a Linux host; from here, the remote commands work against it: "+
		"kiln session, exec, files, history, key, user and repl --server (with --server URL or KILN_SERVER)", goos)
}
