package daemon

import (
	"runtime"
	"sync"
)

// reserveThreads makes the Go runtime start n more OS threads and leaves
// them idle in its pool. The runtime takes an idle thread before it clones
// a new one, and a failed clone is fatal to a Go program ("failed to create
// new OS thread"), so these threads are the pids a process keeps for
// itself: when a fork bomb holds every other pid of the sandbox, the agent
// and a call's supervisor still have threads to kill it with.
//
// Each goroutine locks its thread while the others are created, which
// forces a distinct thread per goroutine; unlocked and finished, a thread
// goes back to the idle pool rather than exiting.
func reserveThreads(n int) {
	var wg sync.WaitGroup
	locked := make(chan struct{}, n)
	release := make(chan struct{})
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			runtime.LockOSThread()
			locked <- struct{}{}
			<-release
			runtime.UnlockOSThread()
		}()
	}
	for range n {
		<-locked
	}
	close(release)
	wg.Wait()
}
