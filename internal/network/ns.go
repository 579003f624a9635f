package network

import (
	"fmt"
	"runtime"

	"github.com/vishvananda/netns"
)

// inNS runs fn on an OS thread that has joined the network namespace ns
// (netns.None(): the daemon's own, fn runs right here). Sockets fn opens
// stay in ns after it returns: that is how the forwarder listens on, and
// asks upstream from, a namespace the daemon itself is not in.
func inNS(ns netns.NsHandle, fn func() error) error {
	if !ns.IsOpen() {
		return fn()
	}
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := netns.Get()
		if err != nil {
			runtime.UnlockOSThread()
			errc <- err
			return
		}
		defer orig.Close()
		if err := netns.Set(ns); err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("join network namespace: %w", err)
			return
		}
		err = fn()
		// A thread that cannot go back stays locked: the goroutine's end
		// then ends the thread, and nothing else runs in the wrong
		// namespace.
		if netns.Set(orig) == nil {
			runtime.UnlockOSThread()
		}
		errc <- err
	}()
	return <-errc
}
