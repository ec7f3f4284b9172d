package archive

import (
	"strings"

	"github.com/kiln-dev/kiln/internal/kiln"
)

// Format is an archive format.
type Format string

// The formats. Unpack reads a gzip-compressed tar as Tar or TarGz alike:
// it looks at the data, not at the name.
const (
	Zip   Format = "zip"
	Tar   Format = "tar"
	TarGz Format = "tar.gz"
)

// ParseFormat reads a format's name as a client gives it: zip, tar, tar.gz
// or tgz, in any case.
func ParseFormat(s string) (Format, error) {
	switch strings.ToLower(s) {
	case "zip":
		return Zip, nil
	case "tar":
		return Tar, nil
	case "tar.gz", "tgz":
		return TarGz, nil
	}
	return "", badFormat(s)
}

func (f Format) check() error {
	switch f {
	case Zip, Tar, TarGz:
		return nil
	}
	return badFormat(string(f))
}

func badFormat(s string) error {
	return kiln.Errorf(kiln.Invalid, "unknown archive format %.40q: use zip, tar or tar.gz", s)
}
