// Package osthreads has a Go process make its OS threads ahead, for a
// process that shares a pids cgroup with user code: the Go runtime makes
// an OS thread whenever it needs one (a goroutine blocked in a system
// call holds its thread), and if the clone fails, as it does while a
// fork bomb holds every pid, the runtime aborts.
package osthreads

import (
	"runtime"
	"sync"
)

// Reserve has the runtime make n more OS threads and leaves them idle: n
// goroutines each lock a thread of their own at the same time, then
// unlock and end, and the runtime parks the threads for reuse (it never
// ends an idle thread).
func Reserve(n int) {
	var locked, done sync.WaitGroup
	release := make(chan struct{})
	locked.Add(n)
	done.Add(n)
	for range n {
		go func() {
			defer done.Done()
			runtime.LockOSThread()
			locked.Done()
			<-release
			runtime.UnlockOSThread()
		}()
	}
	locked.Wait()
	close(release)
	done.Wait()
}
