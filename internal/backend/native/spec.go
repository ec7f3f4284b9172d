package native

import (
	"fmt"
	"strings"

	"github.com/kiln-dev/kiln/internal/kiln"
	"github.com/kiln-dev/kiln/internal/protocol"
)

// Spec describes one sandbox.
type Spec struct {
	Limits   kiln.Limits // zero fields take defaults
	Env      []string    // extra KEY=VALUE for user processes, on top of BaseEnv
	Hostname string      // default "sandbox"
	// HostDir is an optional host directory to bind as the workspace (else
	// a tmpfs): absolute, not a symlink. Create gives it and everything in
	// it to the sandbox's user, so no other sandbox may be using it.
	HostDir string
	// BuildCache is an optional host directory of one user's build
	// caches, bound read-write (nosuid, nodev) at protocol.BuildCachePath:
	// absolute, not a symlink. Its files are not given to the sandbox's
	// user (several sandboxes of the user may share it at once): the
	// caller makes it writable to all of them (package programs writes it
	// with umask 0) and unreachable to any other on the host.
	BuildCache string
	// Mounts are host directories shown read-only (nosuid, nodev) in the
	// sandbox: project code to import and test, never written. Each
	// Source must be a real path, without symlinks (ResolveMount makes
	// one); a Target of "" is /mnt/<the source's name>.
	Mounts []Mount
	// EgressSocket, when set, is the host path of a unix socket on which
	// the caller serves the sandbox's egress proxy session (package
	// egress). Create gives it to the sandbox's root (mode 0600), the boot
	// binds it at protocol.EgressSocketPath, the agent bridges the
	// sandbox's loopback port protocol.EgressProxyAddr to it, and user
	// processes get protocol.EgressEnv. Without it the sandbox has no
	// proxy, only its empty network namespace.
	EgressSocket string
}

// Mount is a host directory bound read-only into the sandbox.
type Mount struct {
	Source string // on the host, absolute
	Target string // in the sandbox: /project, or a folder below /mnt or /project
}

// MaxMounts bounds a sandbox's read-only mounts.
const MaxMounts = 8

// Inside the sandbox.
const (
	Workspace = "/workspace"
	UserUID   = 1000
	userName  = "user"
)

// BaseEnv is the whole environment of a user process unless Spec.Env adds
// to it. Nothing of the host's environment reaches the sandbox.
var BaseEnv = []string{
	// Every toolchain kiln runs is on it (Go lives in /usr/local/go), so
	// a bash cell finds the same compilers as kiln's program cells. First,
	// the session's venv (service/packages.go), once it exists: its
	// python3 and pip install into it, also from a subprocess.
	"PATH=/tmp/.kiln/packages/python/bin:/usr/local/bin:/usr/bin:/bin:/usr/local/go/bin",
	"HOME=" + Workspace,
	"USER=" + userName,
	"LOGNAME=" + userName,
	"LANG=C.UTF-8",
	"LC_ALL=C.UTF-8",
	"TMPDIR=/tmp",
	"XDG_CACHE_HOME=/tmp/.cache", // caches (fontconfig, pip) stay out of the workspace
	"TERM=dumb",
	"SHELL=/bin/bash",
}

// roBinds are the host directories that make up the read-only root. On a
// merged-/usr host the top-level ones are symlinks and are recreated as such.
var roBinds = []string{"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"}

// etcBinds are host /etc entries (paths relative to /etc) that programs need
// to start or to behave as on the host; none holds secrets (so /etc/ssl/certs,
// never /etc/ssl with its private keys). Missing ones are skipped.
var etcBinds = []string{
	"ld.so.cache", "ld.so.conf", "ld.so.conf.d", "alternatives", "localtime", "timezone",
	"ssl/certs", "ssl/openssl.cnf", "ca-certificates", "mime.types", "protocols", "services", "fonts",
	"python3", "python3.11", "matplotlibrc", "bash.bashrc", "profile", "inputrc",
	"java-17-openjdk", "xdg", "magic", "php",
}

func etcFiles(hostname string) []protocol.File {
	return []protocol.File{
		{Name: "passwd", Data: "root:x:0:0:root:/nonexistent:/usr/sbin/nologin\n" +
			fmt.Sprintf("%s:x:%d:%d:kiln user:%s:/bin/bash\n", userName, UserUID, UserUID, Workspace) +
			"nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n"},
		{Name: "group", Data: fmt.Sprintf("root:x:0:\n%s:x:%d:\nnogroup:x:65534:\n", userName, UserUID)},
		{Name: "hosts", Data: "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n127.0.1.1\t" + hostname + "\n"},
		{Name: "hostname", Data: hostname + "\n"},
		{Name: "resolv.conf", Data: "# kiln: this sandbox has no network\n"},
		{Name: "nsswitch.conf", Data: "passwd: files\ngroup: files\nshadow: files\nhosts: files dns\nnetworks: files\nprotocols: files\nservices: files\n"},
	}
}

// validHostname accepts an RFC 1123 label.
func validHostname(h string) error {
	if len(h) == 0 || len(h) > 63 || strings.HasPrefix(h, "-") || strings.HasSuffix(h, "-") {
		return kiln.Errorf(kiln.Invalid, "hostname %q must be 1 to 63 letters, digits or inner hyphens", h)
	}
	for _, c := range h {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-') {
			return kiln.Errorf(kiln.Invalid, "hostname %q must be 1 to 63 letters, digits or inner hyphens", h)
		}
	}
	return nil
}
