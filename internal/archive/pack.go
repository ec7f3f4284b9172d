package archive

import (
	"context"
	"fmt"
	"io"
	"path"
	"sort"

	"github.com/kiln-dev/kiln/internal/kiln"
	"github.com/kiln-dev/kiln/internal/protocol"
)

// item is one entry to pack.
type item struct {
	name string // relative to the packed directory, clean, slash-separated
	info protocol.FileInfo
}

// Pack writes the directory dir of the workspace, read through fsys, to w
// as an archive of the given format. Entries are named relative to dir;
// directories come before what they hold, each directory's entries in
// name order. Regular files and directories are packed; symlinks and
// anything else are skipped, never followed, and so are names that would
// be unsafe in an archive (a backslash, a leading drive letter), which
// Unpack would refuse.
//
// Pack lists the whole tree before it writes, so the limits in lim
// (kiln.TooLarge) fail before the first byte reaches w. A file that
// shrinks while it is packed fails with kiln.Conflict; one that grows is
// packed at the size it was listed with. Any error after the first byte
// leaves w holding an incomplete archive.
func Pack(ctx context.Context, fsys FS, dir string, format Format, w io.Writer, lim PackLimits) error {
	if err := format.check(); err != nil {
		return err
	}
	lim = lim.withDefaults()
	items, err := collect(ctx, fsys, dir, lim)
	if err != nil {
		return err
	}
	aw := newWriter(format, w)
	for _, it := range items {
		if it.info.Type == "dir" {
			err = aw.dir(it)
		} else {
			err = packFile(ctx, fsys, dir, aw, it)
		}
		if err != nil {
			return err
		}
	}
	return aw.close()
}

func packFile(ctx context.Context, fsys FS, dir string, aw writer, it item) error {
	fw, err := aw.file(it)
	if err != nil || it.info.Size == 0 {
		return err
	}
	p := path.Join(dir, it.name)
	n, err := fsys.ReadTo(ctx, p, fw, it.info.Size)
	if err != nil {
		return fmt.Errorf("pack %s: %w", p, err)
	}
	if n < it.info.Size {
		return kiln.Errorf(kiln.Conflict, "%s shrank while it was being packed; try again", p)
	}
	return nil
}

// collect lists the tree under dir, depth first, within the limits.
func collect(ctx context.Context, fsys FS, dir string, lim PackLimits) ([]item, error) {
	var items []item
	var total int64
	var walk func(rel string, depth int) error
	walk = func(rel string, depth int) error {
		p := path.Join(dir, rel)
		ents, err := fsys.List(ctx, p)
		if err != nil {
			return fmt.Errorf("pack %s: %w", p, err)
		}
		sort.Slice(ents, func(i, j int) bool { return ents[i].Name < ents[j].Name })
		for _, e := range ents {
			name := path.Join(rel, e.Name)
			if !packable(e.Name, name) || e.Type != "file" && e.Type != "dir" {
				continue
			}
			if len(items) >= lim.MaxEntries {
				return kiln.Errorf(kiln.TooLarge, "%s holds more than %d files and directories", displayDir(dir), lim.MaxEntries)
			}
			items = append(items, item{name: name, info: e})
			if e.Type == "file" {
				if total += e.Size; e.Size < 0 || total > lim.MaxBytes {
					return kiln.Errorf(kiln.TooLarge, "%s holds more than %d bytes", displayDir(dir), lim.MaxBytes)
				}
				continue
			}
			if depth >= lim.MaxDepth {
				return kiln.Errorf(kiln.TooLarge, "%s is nested more than %d directories deep", path.Join(dir, name), lim.MaxDepth)
			}
			if err := walk(name, depth+1); err != nil {
				return err
			}
		}
		return nil
	}
	return items, walk("", 0)
}

// packable says whether a listed name may go into an archive: one plain
// component (whatever the lister sent) and a whole name Unpack accepts.
func packable(base, name string) bool {
	if base == "" || base == "." || base == ".." || path.Base(base) != base {
		return false
	}
	clean, rule := cleanName(name)
	return rule == "" && clean == name
}

func displayDir(dir string) string {
	if dir == "" || dir == "/" {
		return "the workspace"
	}
	return dir
}
