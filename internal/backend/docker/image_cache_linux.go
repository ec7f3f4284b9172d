package docker

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// Finding the environment image's tag means hashing its layer: reading
// the kiln binary (tens of MB) and the host's /etc entries into a tar,
// 250-300 ms, paid by every `kiln run --backend docker`. FindImage
// remembers the tag by the inputs' file identities instead (path, inode,
// size, modification time, mode, link target: what a rebuild or an
// upgrade changes), so a run on unchanged inputs only stats them. The
// tag is still the hash of the contents, and an explicit `kiln image
// build` (BuildImage) always computes it.

// imageCacheVersion changes when imageTar's layout does, so that no tag
// remembered for an older layout is used.
const imageCacheVersion = "kiln-env-cache 1"

// FindImage is BuildImage for a binary whose image was made before on
// unchanged inputs: the remembered tag, if the engine still has it, else
// BuildImage (which remembers the tag it finds or makes).
func (b *Backend) FindImage(ctx context.Context, agentPath string) (ref string, built bool, err error) {
	key, kerr := inputsKey(agentPath, "/etc")
	dir, derr := b.socketDir()
	cacheable := kerr == nil && derr == nil // socketDir checked that the directory is ours
	if cacheable {
		if ref, ok := readCached(dir, key); ok {
			if _, err := b.cli.ImageInspect(ctx, ref); err == nil {
				return ref, false, nil
			}
		}
	}
	ref, built, err = b.BuildImage(ctx, agentPath)
	if err == nil && cacheable {
		writeCached(dir, key, ref) // a cache: failing to write it costs only time
	}
	return ref, built, err
}

// inputsKey names imageTar's inputs by their file identities.
func inputsKey(agentPath, hostEtc string) (string, error) {
	h := sha256.New()
	fmt.Fprintf(h, "%s\nuid %d\n", imageCacheVersion, UID)
	if err := identity(h, agentPath); err != nil {
		return "", err
	}
	for _, l := range []string{"bin", "sbin", "lib", "lib32", "lib64", "libx32"} {
		target, _ := os.Readlink(filepath.Join("/", l))
		fmt.Fprintf(h, "link %s %q\n", l, target)
	}
	for _, e := range etcEntries {
		err := filepath.WalkDir(filepath.Join(hostEtc, e), func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				fmt.Fprintf(h, "unreadable %q\n", p) // skipped by imageTar too
				return nil
			}
			return identity(h, p)
		})
		if err != nil {
			return "", err
		}
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// identity writes what names one file's version: a change of contents
// through a rebuild, a copy or a package upgrade changes at least one
// of these.
func identity(w io.Writer, p string) error {
	fi, err := os.Lstat(p)
	if err != nil {
		return err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return fmt.Errorf("no stat of %s", p)
	}
	target := ""
	if fi.Mode()&fs.ModeSymlink != 0 {
		target, _ = os.Readlink(p)
	}
	_, err = fmt.Fprintf(w, "%q %d %d %d %d.%09d %o %d:%d %q\n", p, st.Dev, st.Ino, st.Size,
		st.Mtim.Sec, st.Mtim.Nsec, fi.Mode(), st.Uid, st.Gid, target)
	return err
}

// ownDir says whether dir is this process's own (owned by its user,
// 0700), so that nobody else could have put a socket or a tag there.
func ownDir(dir string) bool {
	fi, err := os.Lstat(dir)
	if err != nil || !fi.IsDir() || fi.Mode().Perm() != 0o700 {
		return false
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	return ok && int(st.Uid) == os.Geteuid()
}

func cachePath(dir, key string) string { return filepath.Join(dir, "image-"+key[:40]) }

func readCached(dir, key string) (string, bool) {
	b, err := os.ReadFile(cachePath(dir, key))
	ref := strings.TrimSpace(string(b))
	if err != nil || !strings.HasPrefix(ref, Repository+":") || len(ref) > 128 {
		return "", false
	}
	return ref, true
}

// writeCached writes the tag whole or not at all (a rename).
func writeCached(dir, key, ref string) {
	f, err := os.CreateTemp(dir, "image-*.tmp")
	if err != nil {
		return
	}
	_, werr := f.WriteString(ref + "\n")
	if cerr := f.Close(); werr != nil || cerr != nil || os.Rename(f.Name(), cachePath(dir, key)) != nil {
		os.Remove(f.Name())
	}
}
