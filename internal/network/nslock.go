package network

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// LockDir holds the locks that give one daemon at a time a network
// namespace's egress: warren's table and the wrn* links in it. The
// daemons of a host share it, as they share the id block registry
// (/run/warren).
var LockDir = "/run/warren"

// nsLock is a daemon's claim on the egress of one network namespace.
// Without it a second daemon would sweep the first one's table and links
// as leftovers at its start (Reconcile) and cut its sessions off.
type nsLock struct{ f *os.File }

// lockNS claims the namespace that nsPath names ("": the daemon's own),
// or says which daemon holds it.
func lockNS(nsPath string) (*nsLock, error) {
	if nsPath == "" {
		nsPath = "/proc/thread-self/ns/net"
	}
	var st unix.Stat_t
	if err := unix.Stat(nsPath, &st); err != nil {
		return nil, fmt.Errorf("network namespace %s: %w", nsPath, err)
	}
	if err := os.MkdirAll(LockDir, 0o700); err != nil {
		return nil, err
	}
	path := filepath.Join(LockDir, fmt.Sprintf("netns-%d-%d.lock", st.Dev, st.Ino))
	for {
		f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|unix.O_CLOEXEC, 0o600)
		if err != nil {
			return nil, err
		}
		if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
			owner, _ := os.ReadFile(path)
			f.Close()
			if errors.Is(err, unix.EWOULDBLOCK) {
				return nil, fmt.Errorf("another warren daemon (pid %s) manages sessions' egress in this network namespace; "+
					"give each daemon its own namespace for egress (network.netns) or stop the other", string(owner))
			}
			return nil, err
		}
		// The holder before us removes the file as it lets go: a lock
		// on a file no longer at path is no claim; open it anew.
		var held, now unix.Stat_t
		if unix.Fstat(int(f.Fd()), &held) != nil || unix.Stat(path, &now) != nil || held.Ino != now.Ino {
			f.Close()
			continue
		}
		// The pid is for people reading the file; the lock is the claim.
		_ = f.Truncate(0)
		_, _ = f.WriteAt([]byte(fmt.Sprint(os.Getpid())), 0)
		return &nsLock{f: f}, nil
	}
}

// release gives the namespace up and removes the lock file while still
// holding it (lockNS checks that the file it locked is still the one at
// its path), so that nothing is left in the lock directory.
func (l *nsLock) release() {
	if l != nil && l.f != nil {
		os.Remove(l.f.Name())
		l.f.Close()
		l.f = nil
	}
}
