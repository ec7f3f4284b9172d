package archive

import (
	"fmt"
	"io"
	"os"

	"github.com/kiln-dev/kiln/internal/kiln"
)

// spool copies an upload into a temporary file, at most max bytes, so the
// archive can be read twice and zip's directory at the end can be reached.
// The file is unlinked at once: it goes away when it is closed, also if the
// process dies first.
func spool(r io.Reader, max int64) (*os.File, int64, error) {
	f, err := os.CreateTemp("", "kiln-archive-*")
	if err != nil {
		return nil, 0, kiln.Wrap(kiln.Internal, err, "cannot store the archive")
	}
	os.Remove(f.Name())
	n, err := io.Copy(f, io.LimitReader(r, max+1))
	switch {
	case err != nil:
		err = fmt.Errorf("read the archive: %w", err)
	case n > max:
		err = kiln.Errorf(kiln.TooLarge, "the archive is larger than %d bytes", max)
	}
	if err != nil {
		f.Close()
		return nil, 0, err
	}
	return f, n, nil
}
