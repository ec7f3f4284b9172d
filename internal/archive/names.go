package archive

import (
	"fmt"
	"path"
	"strings"

	"github.com/kiln-dev/kiln/internal/kiln"
)

// Bounds on names, the same the agent applies to paths and Linux to one
// component, so a name that passes here is not refused halfway through.
const (
	maxNameBytes      = 4096
	maxComponentBytes = 255
)

// cleanName checks an entry's name as an archive gives it and returns it
// as a clean relative slash path. It refuses rather than repairs: a name
// that needs repair was made by a tool that cannot be trusted, or made to
// get past one. A name that cleans to "." (the "./" entry that tar -C dir .
// writes) comes back as "."; the caller decides what that means.
func cleanName(name string) (string, string) {
	switch {
	case name == "":
		return "", "the name is empty"
	case strings.IndexByte(name, 0) >= 0:
		return "", "the name contains a NUL byte"
	case strings.IndexByte(name, '\\') >= 0:
		// Windows tools read a backslash as a separator, so "..\\x" leaves.
		return "", "the name contains a backslash"
	case name[0] == '/':
		return "", "the name is absolute"
	case len(name) >= 2 && name[1] == ':' && isLetter(name[0]):
		return "", "the name starts with a Windows drive letter"
	case len(name) > maxNameBytes:
		return "", fmt.Sprintf("the name is longer than %d bytes", maxNameBytes)
	}
	for _, c := range strings.Split(name, "/") {
		if c == ".." {
			return "", "the name has a .. component"
		}
		if len(c) > maxComponentBytes {
			return "", fmt.Sprintf("a component of the name is longer than %d bytes", maxComponentBytes)
		}
	}
	return path.Clean(name), ""
}

func isLetter(b byte) bool { return 'a' <= b && b <= 'z' || 'A' <= b && b <= 'Z' }

// refuse makes the error for an entry that breaks a rule, naming both.
func refuse(name, rule string) error {
	return kiln.Errorf(kiln.Invalid, "archive entry %.200q refused: %s", name, rule)
}

// tree is the set of names an archive has given so far. It refuses a name
// given twice, and a name under one that is a file: either would make the
// result depend on the order of writes, or fail halfway through.
type tree struct {
	files map[string]bool
	named map[string]bool // directories the archive names
	dirs  map[string]bool // those and every parent of a name
}

func newTree() *tree {
	return &tree{files: map[string]bool{}, named: map[string]bool{}, dirs: map[string]bool{}}
}

// add records a clean name; raw is the name as in the archive, for messages.
func (t *tree) add(raw, name string, dir bool) error {
	switch {
	case t.files[name] || dir && t.named[name]:
		return refuse(raw, "the archive has this name twice")
	case !dir && t.dirs[name]:
		return refuse(raw, "the archive has this name as a directory too")
	}
	for p := path.Dir(name); p != "." && !t.dirs[p]; p = path.Dir(p) {
		// A parent seen before was checked then, and so were its own.
		if t.files[p] {
			return refuse(raw, fmt.Sprintf("it is under %.200q, which the archive has as a file", p))
		}
		t.dirs[p] = true
	}
	if dir {
		t.named[name] = true
		t.dirs[name] = true
	} else {
		t.files[name] = true
	}
	return nil
}
