package archive

import (
	"context"
	"io"
	"path"

	"github.com/kiln-dev/kiln/internal/kiln"
)

// header is what either format says about one entry before its data.
type header struct {
	name   string // as in the archive
	typ    entryType
	exec   bool   // any execute bit: written 0755, else 0644
	size   int64  // declared bytes of a file's data
	packed int64  // the entry's compressed bytes, or -1 where the format does not say
	what   string // for typeRefused: the rule it breaks
}

type entryType int

const (
	typeFile    entryType = iota
	typeDir               // made with Mkdir
	typeMeta              // says nothing about files (a tar's global header); skipped
	typeRefused           // a link, a device, ...: refuses the whole archive
)

// source is one archive, spooled. walk calls fn for each entry in archive
// order with a reader of a file's data (nil for other entries), stopping at
// fn's first error. It may be called again and gives the same entries.
type source interface {
	walk(fn func(h header, data io.Reader) error) error
}

func notFileOrDir(what string) string {
	return "it is " + what + "; only files and directories are unpacked"
}

// planned is one entry as validation left it.
type planned struct {
	raw  string // the name in the archive
	name string // clean, relative to the target; "" to skip the entry
}

// Unpack extracts an archive of the given format from r into the workspace
// directory dir, through fsys, and returns the paths it wrote (files and
// named directories, joined to dir) in archive order. Existing files of the
// same names are replaced.
//
// Nothing is written until the whole archive has been read once and every
// entry passed (see the package doc); refusals are kiln errors of kind
// Invalid (a name, an entry type, a corrupt archive) or TooLarge (over a
// limit in lim), naming the entry and the rule. An error while writing
// names the entry and wraps fsys's error; the entries before it stay
// written, the failing file may be partly written, and the paths returned
// with the error are those written in full.
func Unpack(ctx context.Context, fsys FS, dir string, format Format, r io.Reader, lim UnpackLimits) ([]string, error) {
	if err := format.check(); err != nil {
		return nil, err
	}
	lim = lim.withDefaults()
	f, size, err := spool(r, lim.MaxArchiveBytes)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var src source
	if format == Zip {
		src, err = openZip(f, size, lim)
	} else {
		src, err = openTar(f, size, lim)
	}
	if err != nil {
		return nil, err
	}
	plan, err := validate(ctx, src, lim)
	if err != nil {
		return nil, err
	}
	return extract(ctx, fsys, dir, src, plan, lim)
}

// validate is the first pass: it checks every entry and reads all the data
// through a meter, writing nothing.
func validate(ctx context.Context, src source, lim UnpackLimits) ([]planned, error) {
	t := newTree()
	m := &meter{lim: lim}
	var plan []planned
	var declared int64
	err := src.walk(func(h header, data io.Reader) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		if len(plan) >= lim.MaxEntries {
			return kiln.Errorf(kiln.TooLarge, "archive entry %.200q refused: the archive has more than %d entries", h.name, lim.MaxEntries)
		}
		name, err := check(h, t)
		if err != nil {
			return err
		}
		plan = append(plan, planned{raw: h.name, name: name})
		if h.typ != typeFile {
			return nil
		}
		if declared += h.size; h.size > lim.MaxBytes || declared > lim.MaxBytes {
			return kiln.Errorf(kiln.TooLarge, "archive entry %.200q refused: the archive declares more than %d bytes", h.name, lim.MaxBytes)
		}
		e := m.entry(h, data)
		_, err = io.Copy(io.Discard, e)
		return e.explain(err)
	})
	return plan, err
}

// check applies the rules for one entry and returns the clean name it is
// written under, or "" when it is skipped.
func check(h header, t *tree) (string, error) {
	if h.typ == typeRefused {
		return "", refuse(h.name, h.what)
	}
	if h.typ == typeMeta {
		return "", nil
	}
	name, rule := cleanName(h.name)
	switch {
	case rule != "":
		return "", refuse(h.name, rule)
	case name == "." && h.typ == typeDir:
		return "", nil // "./": the target itself
	case name == ".":
		return "", refuse(h.name, "the name is empty once cleaned")
	}
	return name, t.add(h.name, name, h.typ == typeDir)
}

// extract is the second pass: it writes what validate passed.
func extract(ctx context.Context, fsys FS, dir string, src source, plan []planned, lim UnpackLimits) ([]string, error) {
	m := &meter{lim: lim}
	var done []string
	i := 0
	err := src.walk(func(h header, data io.Reader) error {
		if i >= len(plan) || plan[i].raw != h.name {
			// Both passes read the same spooled bytes; this is a bug.
			return kiln.Errorf(kiln.Internal, "archive entry %.200q: the archive read differently the second time", h.name)
		}
		p := plan[i]
		i++
		if p.name == "" {
			return nil
		}
		target := path.Join(dir, p.name)
		var err error
		if h.typ == typeDir {
			if err = fsys.Mkdir(ctx, target); err != nil {
				err = writeFailed(h.name, err)
			}
		} else {
			mode := uint32(0o644)
			if h.exec {
				mode = 0o755
			}
			e := m.entry(h, data)
			_, err = fsys.WriteFrom(ctx, target, e, mode)
			err = e.explain(err)
		}
		if err != nil {
			return err
		}
		done = append(done, target)
		return nil
	})
	return done, err
}
