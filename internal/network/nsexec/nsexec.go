// Package nsexec runs code in a network namespace and waits for links to
// carry packets: what the sessions' network (package network) and the
// tests' own small internet (package nettest) both need. It must stay
// small and free of policy.
package nsexec

import (
	"fmt"
	"runtime"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
)

// Do runs fn on an OS thread that has joined the network namespace ns
// (netns.None(): the caller's own, fn runs right here). Sockets fn opens
// stay in ns after it returns: that is how a daemon listens on, and dials
// from, a namespace it is not in itself.
func Do(ns netns.NsHandle, fn func() error) error {
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

// New makes an anonymous network namespace, gone once the returned handle
// and everything else that holds it are closed. The calling thread stays
// in its own namespace.
func New() (netns.NsHandle, error) {
	errc := make(chan error, 1)
	var ns netns.NsHandle
	go func() {
		runtime.LockOSThread()
		orig, err := netns.Get()
		if err != nil {
			errc <- err
			return
		}
		defer orig.Close()
		if ns, err = netns.New(); err != nil {
			errc <- fmt.Errorf("create a network namespace: %w", err)
			return
		}
		// A thread that cannot go back stays locked and ends with its
		// goroutine.
		if netns.Set(orig) == nil {
			runtime.UnlockOSThread()
		}
		errc <- nil
	}()
	return ns, <-errc
}

// WaitUp waits, for at most 2 s, until link n1 (seen through h1) and link
// n2 (through h2) are operationally up with their real queueing
// discipline: the kernel marks a link up a moment before it replaces its
// "noop" discipline, which drops every packet, so the first packet sent
// right after creating a link is often lost (a refused connection then
// takes a whole SYN retransmission to fail).
func WaitUp(h1 *netlink.Handle, n1 string, h2 *netlink.Handle, n2 string) error {
	deadline := time.Now().Add(2 * time.Second)
	for {
		a, err := h1.LinkByName(n1)
		if err != nil {
			return err
		}
		b, err := h2.LinkByName(n2)
		if err != nil {
			return err
		}
		if ready(h1, a) && ready(h2, b) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("links %s and %s are not up after 2 s (states %s and %s)", n1, n2, a.Attrs().OperState, b.Attrs().OperState)
		}
		time.Sleep(50 * time.Microsecond)
	}
}

func ready(h *netlink.Handle, l netlink.Link) bool {
	if l.Attrs().OperState != netlink.OperUp {
		return false
	}
	qs, err := h.QdiscList(l)
	if err != nil || len(qs) == 0 {
		return false // noop is not listed
	}
	for _, q := range qs {
		if q.Type() == "noop" {
			return false
		}
	}
	return true
}
