package native

import (
	"testing"

	"github.com/kiln-dev/kiln/internal/backend/backendtest"
)

// The native backend passes the conformance suite, its security half
// included.
func TestConformance(t *testing.T) {
	backendtest.Run(t, newBackend(t))
}
