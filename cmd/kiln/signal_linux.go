package main

import "golang.org/x/sys/unix"

// signalNum is the number of a signal a sandboxed program died of, by name
// ("SIGKILL"), for the 128+N exit status; 0 for an unknown name.
func signalNum(name string) int { return int(unix.SignalNum(name)) }
