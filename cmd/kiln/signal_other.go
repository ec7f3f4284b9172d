//go:build !linux

package main

// signalNum: off Linux no sandboxed program runs (native.NeedsLinux), so
// none dies of a signal.
func signalNum(name string) int { return 0 }
