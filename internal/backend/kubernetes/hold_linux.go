package kubernetes

import (
	"os"
	"os/signal"

	"golang.org/x/sys/unix"
)

func init() {
	if len(os.Args) == 2 && os.Args[1] == HoldArg {
		hold()
	}
}

// hold is PID 1 of a sandbox Pod: the agent comes later, by exec, and
// its orphans end up here, so it reaps; it exits on TERM (Pod deletion).
func hold() {
	term := make(chan os.Signal, 1)
	signal.Notify(term, unix.SIGTERM, unix.SIGINT)
	go func() {
		<-term
		os.Exit(0)
	}()
	for {
		var ws unix.WaitStatus
		if _, err := unix.Wait4(-1, &ws, 0, nil); err != nil && err != unix.EINTR {
			// no child yet: wait for one
			var s unix.Timespec = unix.NsecToTimespec(200e6)
			unix.Nanosleep(&s, nil)
		}
	}
}
