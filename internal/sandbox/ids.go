package sandbox

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/warrenhq/warren/internal/spec"
)

// Each sandbox gets its own block of host ids: with a user namespace, its
// root is the block's first id, so a process that escapes lands as a host
// user that owns nothing but that sandbox's own writable layer, and no two
// sandboxes on the host share a uid, whichever daemon started them.
const (
	// DefaultIDBase is the first host id handed to sandboxes. It sits far
	// above the ranges /etc/subuid gives users (from 100000 up).
	DefaultIDBase = 1_000_000_000
	// IDsPerSandbox is the size of each block: a full 16-bit id space, so
	// images' users and groups all map.
	IDsPerSandbox = 65536
	// DefaultRunDir holds what every daemon on the host shares: the
	// registry of id blocks and the locks on cgroup parents. It is on
	// tmpfs: both describe running processes, which a reboot ends.
	DefaultRunDir = "/run/warren"
)

// CheckIDBase refuses a base that puts blocks off the host-wide grid: every
// daemon's blocks start at DefaultIDBase plus a multiple of IDsPerSandbox,
// so two daemons' blocks are either the same block (which the registry
// hands to one of them) or disjoint.
func CheckIDBase(base uint32) error {
	if base < IDsPerSandbox || (int64(base)-DefaultIDBase)%IDsPerSandbox != 0 || uint64(base)+IDsPerSandbox > 1<<32-1 {
		return fmt.Errorf("id base %d is off the host's id grid: it must be %d plus or minus a multiple of %d, at least %d and at most %d",
			base, DefaultIDBase, IDsPerSandbox, DefaultIDBase%IDsPerSandbox+IDsPerSandbox, DefaultIDBase+(uint64(1<<32-1)-IDsPerSandbox-DefaultIDBase)/IDsPerSandbox*IDsPerSandbox)
	}
	return nil
}

// idAllocator hands out blocks of host ids from the registry every daemon
// on the host shares: a directory with one file per block in use, named
// by the block's first id and created with O_EXCL, so two daemons never
// hold the same block. A file records the owner (the daemon's sessions
// directory and pid, the sandbox's name) so that a block whose daemon died
// and whose sandbox left no state can be taken back. The registry's flock
// serializes allocations and that reclaim.
type idAllocator struct {
	base  uint32
	dir   string // the registry
	owner string // this runtime's sessions directory

	mu   sync.Mutex // guards next
	next uint32     // index to try first: allocation goes round the space
}

// idEntry is one block's registry file.
type idEntry struct {
	Sessions string `json:"sessions"` // the owning daemon's sessions directory
	Name     string `json:"name"`     // the sandbox
	Pid      int    `json:"pid"`      // the owning daemon
	Start    uint64 `json:"start"`    // its start time (clock ticks since boot): pids are reused
}

func newIDAllocator(base uint32, registry, owner string) (*idAllocator, error) {
	if err := CheckIDBase(base); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(registry, 0o700); err != nil {
		return nil, fmt.Errorf("create the host's id block registry: %w", err)
	}
	a := &idAllocator{base: base, dir: registry, owner: owner}
	// Blocks of daemons that died and whose sandboxes are gone go back now,
	// not only once the space runs out.
	if err := a.locked(func() error { a.reclaim(); return nil }); err != nil {
		return nil, err
	}
	return a, nil
}

// blocks is how many blocks fit between base and the last valid id.
func (a *idAllocator) blocks() uint32 {
	return uint32((uint64(1)<<32 - 2 - uint64(a.base)) / IDsPerSandbox)
}

// locked runs f with the registry's lock held.
func (a *idAllocator) locked(f func() error) error {
	d, err := os.Open(a.dir)
	if err != nil {
		return err
	}
	defer d.Close()
	for {
		err = unix.Flock(int(d.Fd()), unix.LOCK_EX)
		if err != unix.EINTR {
			break
		}
	}
	if err != nil {
		return fmt.Errorf("lock the host's id block registry: %w", err)
	}
	return f() // the lock goes with the descriptor
}

// get hands a free block to the sandbox name.
func (a *idAllocator) get(name string) (spec.IDRange, error) {
	var r spec.IDRange
	err := a.locked(func() error {
		for pass := 0; pass < 2; pass++ {
			if pass == 1 && a.reclaim() == 0 {
				break
			}
			a.mu.Lock()
			start := a.next
			a.mu.Unlock()
			n := a.blocks()
			for k := uint32(0); k < n; k++ {
				i := (start + k) % n
				host := a.base + i*IDsPerSandbox
				err := a.write(host, name, unix.O_EXCL)
				if errors.Is(err, os.ErrExist) {
					continue
				}
				if err != nil {
					return err
				}
				a.mu.Lock()
				a.next = (i + 1) % n
				a.mu.Unlock()
				r = spec.IDRange{HostID: host, Size: IDsPerSandbox}
				return nil
			}
		}
		return errors.New("no free id block for another sandbox on this host")
	})
	return r, err
}

// write records host's block as held by this runtime's sandbox name.
func (a *idAllocator) write(host uint32, name string, excl int) error {
	b, _ := json.Marshal(idEntry{Sessions: a.owner, Name: name, Pid: os.Getpid(), Start: startTime(os.Getpid())})
	f, err := os.OpenFile(a.path(host), os.O_WRONLY|os.O_CREATE|os.O_TRUNC|excl, 0o600)
	if err != nil {
		return err
	}
	_, err = f.Write(b)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(a.path(host))
		return fmt.Errorf("record id block %d: %w", host, err)
	}
	return nil
}

func (a *idAllocator) path(host uint32) string {
	return filepath.Join(a.dir, strconv.FormatUint(uint64(host), 10))
}

// put gives back the block of this runtime's sandbox name.
func (a *idAllocator) put(name string, r spec.IDRange) {
	// A block not given back stays claimed by a sandbox that is gone,
	// which the next start's sweep gives back.
	_ = a.locked(func() error {
		if e, err := a.read(r.HostID); err == nil && (e.Sessions != a.owner || e.Name != name) {
			return nil // not that sandbox's (any more): leave it
		}
		return os.Remove(a.path(r.HostID))
	})
}

func (a *idAllocator) read(host uint32) (idEntry, error) {
	var e idEntry
	b, err := os.ReadFile(a.path(host))
	if err == nil {
		err = json.Unmarshal(b, &e)
	}
	return e, err
}

// claim takes over the block of a sandbox an earlier daemon of this
// sessions directory started (an adoption). The block must be on the grid
// and held by no other daemon's sandbox.
func (a *idAllocator) claim(name string, r spec.IDRange) error {
	if r.HostID < a.base || (r.HostID-a.base)%IDsPerSandbox != 0 || r.Size != IDsPerSandbox {
		return fmt.Errorf("id block %d+%d is not one this runtime hands out", r.HostID, r.Size)
	}
	return a.locked(func() error {
		e, err := a.read(r.HostID)
		switch {
		case errors.Is(err, os.ErrNotExist):
		case err != nil:
			// Unreadable: a daemon died while writing it; it held nothing.
		case e.Sessions != a.owner && !a.stale(e, r.HostID):
			return fmt.Errorf("id block %d belongs to sandbox %s of the daemon with sessions in %s", r.HostID, e.Name, e.Sessions)
		case e.Sessions == a.owner && e.Name != name && a.live(e):
			return fmt.Errorf("id block %d already belongs to sandbox %s", r.HostID, e.Name)
		}
		return a.write(r.HostID, name, 0)
	})
}

// reclaim removes the entries nothing holds any more, with the lock held,
// and returns how many.
func (a *idAllocator) reclaim() int {
	ents, err := os.ReadDir(a.dir)
	if err != nil {
		return 0
	}
	n := 0
	for _, de := range ents {
		host, err := strconv.ParseUint(de.Name(), 10, 32)
		if err != nil {
			continue
		}
		e, err := a.read(uint32(host))
		if err != nil || a.stale(e, uint32(host)) {
			if os.Remove(a.path(uint32(host))) == nil {
				n++
			}
		}
	}
	return n
}

// stale says whether a block's entry holds nothing: its daemon is gone and
// the sandbox it names has no state recording that block (it was removed,
// or never got that far). A running sandbox of a dead daemon keeps its
// state directory, and so its block, until a daemon removes it.
func (a *idAllocator) stale(e idEntry, host uint32) bool {
	if a.live(e) {
		return false
	}
	b, err := os.ReadFile(filepath.Join(e.Sessions, e.Name, idsFile))
	if err != nil {
		return errors.Is(err, os.ErrNotExist) || e.Name == ""
	}
	var r spec.IDRange
	return json.Unmarshal(b, &r) != nil || r.HostID != host
}

// live says whether the daemon that wrote e still runs.
func (a *idAllocator) live(e idEntry) bool {
	return e.Pid > 0 && e.Start != 0 && startTime(e.Pid) == e.Start
}

// startTime returns when pid started (field 22 of /proc/pid/stat), or 0.
func startTime(pid int) uint64 {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	f := statFields(b)
	if len(f) < 20 {
		return 0
	}
	// Fields after "pid (comm)": state is field 3, starttime field 22.
	n, err := strconv.ParseUint(f[19], 10, 64)
	if err != nil {
		return 0
	}
	return n
}

// parentLocks are the cgroup parents this process holds, so that a daemon
// restarted in-process (a new runtime over the same sessions directory)
// takes its own parent again; flock alone would refuse it.
var parentLocks = struct {
	sync.Mutex
	m map[string]*parentLock
}{m: map[string]*parentLock{}}

type parentLock struct {
	f        *os.File
	sessions string
	refs     int
}

// lockParent claims the cgroup parent for the daemon whose sandboxes'
// state is in sessions: a daemon removes, as leftovers, every sandbox
// cgroup under its parent that none of its sessions owns, so two daemons
// on one parent would destroy each other's sandboxes. The lock is an flock
// on a file named after the parent in the run directory, which records
// the holder's sessions directory for the error the next one gets.
func lockParent(runDir, parent, sessions string) (release func(), err error) {
	parentLocks.Lock()
	defer parentLocks.Unlock()
	release = func() {
		parentLocks.Lock()
		defer parentLocks.Unlock()
		if l := parentLocks.m[parent]; l != nil {
			if l.refs--; l.refs == 0 {
				// Removed while still locked: whoever opened it in
				// between finds, once it has the lock, that the name
				// is no longer that file, and starts over.
				os.Remove(l.f.Name())
				l.f.Close()
				delete(parentLocks.m, parent)
			}
		}
	}
	if l := parentLocks.m[parent]; l != nil {
		if l.sessions != sessions {
			return nil, fmt.Errorf("cgroup parent %s is in use by another daemon, whose sandboxes are in %s: give each daemon its own cgroup parent (cgroup_parent)", parent, l.sessions)
		}
		l.refs++
		return release, nil
	}
	f, err := lockFile(filepath.Join(runDir, "cgroup-parents", url.PathEscape(parent)))
	if err != nil {
		if errors.Is(err, unix.EWOULDBLOCK) {
			holder, _ := os.ReadFile(filepath.Join(runDir, "cgroup-parents", url.PathEscape(parent)))
			return nil, fmt.Errorf("cgroup parent %s is in use by another daemon, whose sandboxes are in %s: give each daemon its own cgroup parent (cgroup_parent)", parent, holder)
		}
		return nil, fmt.Errorf("lock cgroup parent %s: %w", parent, err)
	}
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(sessions), 0) // for the message of a daemon refused; the lock is the claim
	}
	parentLocks.m[parent] = &parentLock{f: f, sessions: sessions, refs: 1}
	return release, nil
}

// statFields splits /proc/pid/stat after "pid (comm)", whose comm may hold
// spaces and parentheses: the first field is the state (field 3).
func statFields(b []byte) []string {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return nil
	}
	return strings.Fields(string(b[i+1:]))
}

// lockFile creates path if need be and takes an exclusive flock on it
// without waiting (EWOULDBLOCK: someone holds it). The holder removes the
// file when it lets go, so a lock taken on a file that has been removed
// since it was opened is let go and taken again on the new one.
func lockFile(path string) (*os.File, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, err
	}
	for {
		f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
		if err != nil {
			return nil, err
		}
		if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
			f.Close()
			return nil, err
		}
		var held, named unix.Stat_t
		if unix.Fstat(int(f.Fd()), &held) == nil && unix.Stat(path, &named) == nil && held.Ino == named.Ino && held.Dev == named.Dev {
			return f, nil
		}
		f.Close()
	}
}
