package workspace

import "github.com/kiln-dev/kiln/internal/kiln"

// maxID is the longest id: a SHA-256 in hex.
const maxID = 64

// validID accepts 1 to 64 lowercase hex digits. An id becomes a path
// component under the root, so it must never hold a slash, a dot or
// anything else a path could be made of.
func validID(id string) error {
	if len(id) == 0 || len(id) > maxID {
		return kiln.Errorf(kiln.Invalid, "workspace id %q must be 1 to %d lowercase hex digits", id, maxID)
	}
	for i := 0; i < len(id); i++ {
		if c := id[i]; !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return kiln.Errorf(kiln.Invalid, "workspace id %q must be 1 to %d lowercase hex digits", id, maxID)
		}
	}
	return nil
}
