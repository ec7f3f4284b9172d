package main

import (
	"os"
	"syscall"
)

// fileOwner is the uid that owns name.
func fileOwner(name string) (uint32, bool) {
	fi, err := os.Stat(name)
	if err != nil {
		return 0, false
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, false
	}
	return st.Uid, true
}
