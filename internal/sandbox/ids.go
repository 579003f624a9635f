package sandbox

import (
	"errors"
	"fmt"
	"sync"

	"github.com/warrenhq/warren/internal/spec"
)

// Each sandbox gets its own block of host ids: with a user namespace, its
// root is the block's first id, so a process that escapes lands as a host
// user that owns nothing but that sandbox's own writable layer, and no two
// sandboxes share a uid.
const (
	// DefaultIDBase is the first host id handed to sandboxes. It sits far
	// above the ranges /etc/subuid gives users (from 100000 up).
	DefaultIDBase = 1_000_000_000
	// IDsPerSandbox is the size of each block: a full 16-bit id space, so
	// images' users and groups all map.
	IDsPerSandbox = 65536
)

// idAllocator hands out blocks of host ids.
type idAllocator struct {
	base uint32

	mu   sync.Mutex // guards used
	used map[uint32]bool
}

func newIDAllocator(base uint32) *idAllocator {
	return &idAllocator{base: base, used: map[uint32]bool{}}
}

func (a *idAllocator) get() (spec.IDRange, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	max := (uint64(1)<<32 - 2 - uint64(a.base)) / IDsPerSandbox
	for i := uint32(0); uint64(i) < max; i++ {
		if !a.used[i] {
			a.used[i] = true
			return spec.IDRange{HostID: a.base + i*IDsPerSandbox, Size: IDsPerSandbox}, nil
		}
	}
	return spec.IDRange{}, errors.New("no free id range for another sandbox")
}

func (a *idAllocator) put(r spec.IDRange) {
	a.mu.Lock()
	defer a.mu.Unlock()
	delete(a.used, (r.HostID-a.base)/IDsPerSandbox)
}

// claim marks a block used that a sandbox of an earlier daemon holds.
func (a *idAllocator) claim(r spec.IDRange) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if r.HostID < a.base || (r.HostID-a.base)%IDsPerSandbox != 0 || r.Size != IDsPerSandbox {
		return fmt.Errorf("id block %d+%d is not one this runtime hands out", r.HostID, r.Size)
	}
	i := (r.HostID - a.base) / IDsPerSandbox
	if a.used[i] {
		return fmt.Errorf("id block %d is already in use", r.HostID)
	}
	a.used[i] = true
	return nil
}
