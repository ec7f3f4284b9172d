package workspace

import "github.com/kiln-dev/kiln/internal/kiln"

// Kind is what a new workspace is made of. It only decides what Create
// makes: Exists, Restore, Remove, Usage and List handle a workspace of
// either kind, so a service restarted with the other kind keeps its
// sessions.
type Kind string

const (
	// Disk is an ext4 image file per workspace, <root>/<id>.img, sparse
	// and loop-mounted at <root>/<id>. Its size is the workspace's hard
	// limit, its files take disk rather than memory, and it survives a
	// reboot: Restore mounts it again.
	Disk Kind = "disk"
	// Tmpfs is a size- and inode-limited tmpfs at <root>/<id>. Its files
	// take the host's memory and a reboot loses them.
	Tmpfs Kind = "tmpfs"
	// Plain is a bare directory at <root>/<id>: no size or inode limit,
	// no mount, no root needed. It is for tests on a backend without
	// isolation (backend/unboxed) only; ParseKind refuses it, so no flag
	// of kiln serve can choose it.
	Plain Kind = "plain"
)

// ParseKind accepts "disk" or "tmpfs".
func ParseKind(s string) (Kind, error) {
	switch k := Kind(s); k {
	case Disk, Tmpfs:
		return k, nil
	}
	return "", kiln.Errorf(kiln.Invalid, "workspaces %q is not one of: disk, tmpfs", s)
}

// UnmarshalText parses a kind, so that a Kind can be a flag.
func (k *Kind) UnmarshalText(b []byte) error {
	v, err := ParseKind(string(b))
	if err == nil {
		*k = v
	}
	return err
}

// MarshalText is the kind's name.
func (k Kind) MarshalText() ([]byte, error) { return []byte(k), nil }
