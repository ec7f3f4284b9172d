package programs_test

import (
	"github.com/kiln-dev/kiln/internal/lang"
	"github.com/kiln-dev/kiln/internal/programs"
)

// The internal tests name languages; the registry is lang's.
func init() { programs.SetRegistry(lang.Lookup) }
