package store

import (
	"fmt"
	"os"
	"sync"

	"golang.org/x/sys/unix"
)

// reserveBytes is the size of one reserve chunk: a delete appends a few
// 4 KiB pages to the WAL, and opening the database sizes its 32 KiB -shm
// file. It is small so that the little a delete frees is enough to remake
// it.
const reserveBytes = 256 << 10

// reserveChunks is how many chunks the store keeps: a daemon restarted on a
// full disk spends one to open the database and still has one for the
// deletes that free space.
const reserveChunks = 2

// reserve is allocated space the store gives back to the filesystem, a
// chunk at a time, when a write that must not be lost finds the disk full:
// a deletion acknowledged to a client has to reach the database, and on a
// full disk SQLite cannot grow its WAL by a page. Chunks are made again,
// best effort, after a delete or a heartbeat (the readiness probe's write)
// succeeds.
type reserve struct {
	path  string
	mu    sync.Mutex
	whole bool // every chunk is there: fill has nothing to do
}

func (r *reserve) chunk(i int) string { return fmt.Sprintf("%s.%d", r.path, i) }

// fill allocates the missing chunks; on a disk already full they stay
// missing.
func (r *reserve) fill() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.whole {
		return
	}
	for i := range reserveChunks {
		p := r.chunk(i)
		if fi, err := os.Stat(p); err == nil && fi.Size() == reserveBytes {
			continue
		}
		f, err := os.OpenFile(p, os.O_RDWR|os.O_CREATE, 0o600)
		if err != nil {
			return
		}
		// fallocate allocates blocks (a sparse file would hold none).
		err = unix.Fallocate(int(f.Fd()), 0, 0, reserveBytes)
		f.Close()
		if err != nil {
			os.Remove(p)
			return
		}
	}
	r.whole = true
}

// release frees one chunk, reporting whether there was one to free.
func (r *reserve) release() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.whole = false
	for i := reserveChunks - 1; i >= 0; i-- {
		if os.Remove(r.chunk(i)) == nil {
			return true
		}
	}
	return false
}
