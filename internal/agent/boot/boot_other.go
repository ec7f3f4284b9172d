//go:build !linux

package boot

import (
	"errors"

	"github.com/kiln-dev/kiln/internal/protocol"
)

// ReadConfig fails: sandboxes need Linux.
func ReadConfig() (*protocol.Boot, error) { return nil, errors.New("sandboxes need Linux") }

// Build fails: sandboxes need Linux.
func Build(*protocol.Boot) error { return errors.New("sandboxes need Linux") }
