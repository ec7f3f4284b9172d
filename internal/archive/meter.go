package archive

import (
	"errors"
	"fmt"
	"io"

	"github.com/kiln-dev/kiln/internal/kiln"
)

// meter counts the bytes an archive's entries really expand to, across a
// whole pass. Declared sizes are never trusted: an entry's reader stops the
// moment a count passes a limit, and hands on none of the bytes that did.
type meter struct {
	lim   UnpackLimits
	total int64
}

// entryReader reads one entry's data through the meter.
type entryReader struct {
	m *meter
	h header
	r io.Reader
	n int64
	// The errors it met, kept to tell in explain who failed: the archive
	// (over a limit, corrupt) or whatever the data was written to.
	limitErr, srcErr error
}

func (m *meter) entry(h header, r io.Reader) *entryReader {
	return &entryReader{m: m, h: h, r: r}
}

func (e *entryReader) Read(p []byte) (int, error) {
	n, err := e.r.Read(p)
	e.n += int64(n)
	e.m.total += int64(n)
	lim := e.m.lim
	switch {
	case e.m.total > lim.MaxBytes:
		return 0, e.refuse(fmt.Sprintf("the archive expands beyond %d bytes", lim.MaxBytes))
	case e.n > e.h.size:
		return 0, e.refuse(fmt.Sprintf("its data is longer than the %d bytes it declares", e.h.size))
	case e.h.packed >= 0 && e.n > lim.RatioMinBytes && e.n > satMul(e.h.packed, lim.MaxRatio):
		return 0, e.refuse(fmt.Sprintf("it expands more than %d times its compressed size", lim.MaxRatio))
	}
	if err != nil && err != io.EOF {
		e.srcErr = err
	}
	return n, err
}

func (e *entryReader) refuse(why string) error {
	e.limitErr = kiln.Errorf(kiln.TooLarge, "archive entry %.200q refused: %s", e.h.name, why)
	return e.limitErr
}

// explain turns an error from copying the entry's data into one that says
// whose fault it was. The destination's errors come back wrapped, so that
// callers can still look into them.
func (e *entryReader) explain(err error) error {
	var ke *kiln.Error
	switch {
	case err == nil:
		return nil
	case e.limitErr != nil && errors.Is(err, e.limitErr):
		return e.limitErr
	case e.srcErr == nil || !errors.Is(err, e.srcErr):
		return writeFailed(e.h.name, err)
	case errors.As(e.srcErr, &ke):
		// The reader under the entry refused: a tar.gz stream expanding
		// too far, a zip entry longer than its header says.
		return kiln.Errorf(ke.Kind, "archive entry %.200q refused: %s", e.h.name, ke.Message)
	}
	return kiln.Errorf(kiln.Invalid, "archive entry %.200q cannot be read: %v", e.h.name, err)
}

// writeFailed wraps an error of the destination with the entry's name.
func writeFailed(name string, err error) error {
	return fmt.Errorf("archive entry %.200q: %w", name, err)
}
