package docker

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/moby/moby/api/types/mount"
)

// usrMount is the container's /usr: the host's /usr through a read-only
// overlay of the container's own, as the native backend's (boot's
// shareRO). A file seen through an overlay is an inode of that overlay,
// so file locks taken on it and inotify watches on it stay within the
// container; a bind of the host's /usr would share both with the host
// and every other sandbox, a channel between tenants. The overlay is an
// anonymous volume of the engine's local driver (which mounts it when the
// container starts), labelled as the sandbox's and removed with the
// container (ContainerRemove's RemoveVolumes); nothing is copied. A
// read-only overlay needs two lower layers: the second is an empty
// directory of kiln's, shared by every container.
func (b *Backend) usrMount(id string) (mount.Mount, error) {
	empty, err := b.emptyLower()
	if err != nil {
		return mount.Mount{}, err
	}
	return mount.Mount{
		Type:   mount.TypeVolume,
		Target: "/usr",
		// Not ReadOnly, which the engine refuses for an anonymous volume:
		// the overlay itself is mounted read-only ("ro" below), so every
		// write under /usr fails with EROFS all the same.
		VolumeOptions: &mount.VolumeOptions{
			NoCopy: true, // the image's /usr is empty; and the overlay is read-only
			Labels: b.labels(id),
			DriverConfig: &mount.Driver{Name: "local", Options: map[string]string{
				"type":   "overlay",
				"device": "kiln-usr",
				"o":      "ro,nosuid,nodev,lowerdir=/usr:" + empty,
			}},
		},
	}, nil
}

// emptyLower makes (once) the empty directory that is the overlays'
// second lower layer, beside the agents' sockets (root's, 0700).
func (b *Backend) emptyLower() (string, error) {
	dir, err := b.socketDir()
	if err != nil {
		return "", fmt.Errorf("cannot make kiln's Docker directory: %w", err)
	}
	empty := filepath.Join(dir, "empty")
	// The engine's local driver splits its mount options at commas, and
	// overlayfs its lower layers at colons.
	if strings.ContainsAny(empty, ",:") {
		return "", fmt.Errorf("kiln's Docker directory %s has a comma or colon, which an overlay's options cannot hold", dir)
	}
	if err := os.Mkdir(empty, 0o555); err != nil && !errors.Is(err, fs.ErrExist) {
		return "", fmt.Errorf("cannot make the overlays' empty layer: %w", err)
	}
	return empty, nil
}
