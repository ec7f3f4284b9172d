//go:build !linux

package boot

import (
	"errors"

	"github.com/kiln-dev/kiln/internal/protocol"
)

// Setup fails: sandboxes need Linux.
func Setup() (*protocol.AgentConfig, error) {
	return nil, errors.New("sandboxes need Linux")
}
