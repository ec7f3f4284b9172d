package archive

import (
	"strings"
	"testing"

	"github.com/kiln-dev/kiln/internal/kiln"
)

func TestParseFormat(t *testing.T) {
	for in, want := range map[string]Format{"zip": Zip, "ZIP": Zip, "tar": Tar, "tar.gz": TarGz, "tgz": TarGz} {
		if got, err := ParseFormat(in); got != want || err != nil {
			t.Errorf("ParseFormat(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{"", "rar", "tar.xz", "7z"} {
		_, err := ParseFormat(in)
		if kiln.KindOf(err) != kiln.Invalid || !strings.Contains(err.Error(), "use zip, tar or tar.gz") {
			t.Errorf("ParseFormat(%q) = %v; want an invalid error naming the formats", in, err)
		}
	}
}
