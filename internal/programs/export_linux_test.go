package programs

import "testing"

// NewHostExecer runs programs on the host (hostExecer), for the external
// tests.
func NewHostExecer(t testing.TB) Execer { return newHost(t) }
