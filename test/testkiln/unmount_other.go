//go:build !linux

package testkiln

import "testing"

// unmountUnder: kiln serve makes sandboxes, and mounts, only on Linux.
func unmountUnder(t testing.TB, dir string) {}
