//go:build !linux

package service

import "os"

// openSocketDir opens the egress socket directory. Sandboxes, and with
// them egress sockets, need Linux; elsewhere this only lets the package
// build for the remote CLI.
func openSocketDir(dir string) (*os.File, error) {
	return os.Open(dir)
}
