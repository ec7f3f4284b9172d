package main

// Exit statuses, the same in every command; the README has them as a
// table. A program's own status passes through `kiln run` unchanged.
const (
	exitCellError   = 1   // a cell ended with an error (kiln exec), an item failed (kiln batch)
	exitUsage       = 2   // the command line was wrong; the usage follows
	exitTimeout     = 124 // a time limit stopped it, as timeout(1) says
	exitKiln        = 125 // kiln or the server failed, as docker run says
	exitInterrupted = 130 // Ctrl-C: 128 + SIGINT
	exitKilled      = 137 // the memory or output limit: 128 + SIGKILL
)
