package agent

import (
	"sync"
)

// outLog keeps the last bytes of a durable process's output, with the
// channel (stdout or stderr) of every byte and a running offset, so that a
// client can read from any offset still kept, follow new output, and learn
// exactly which bytes it missed. The process never waits for a reader: old
// bytes are overwritten.
type outLog struct {
	mu     sync.Mutex // guards the fields below
	buf    []byte     // ring; the byte at offset o is at buf[o%len(buf)]
	total  int64      // bytes ever written: the next offset
	segs   []segment  // where the channel changes, oldest first
	closed bool       // the process exited and its output was drained
	wake   chan struct{}
}

// segment says that bytes from off on are on channel ch (until the next
// segment).
type segment struct {
	off int64
	ch  byte
}

func newOutLog(size int) *outLog {
	return &outLog{buf: make([]byte, size), wake: make(chan struct{})}
}

// start is the oldest offset kept.
//
// Preconditions: l.mu is held.
func (l *outLog) startLocked() int64 {
	return max(0, l.total-int64(len(l.buf)))
}

func (l *outLog) broadcastLocked() {
	close(l.wake)
	l.wake = make(chan struct{})
}

func (l *outLog) write(ch byte, p []byte) {
	if len(p) == 0 {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if n := len(l.segs); n == 0 || l.segs[n-1].ch != ch {
		l.segs = append(l.segs, segment{off: l.total, ch: ch})
	}
	size := len(l.buf)
	if len(p) > size {
		// Only the tail fits; the rest is dropped at once.
		skip := len(p) - size
		l.total += int64(skip)
		p = p[skip:]
	}
	for len(p) > 0 {
		i := int(l.total % int64(size))
		n := copy(l.buf[i:], p)
		p = p[n:]
		l.total += int64(n)
	}
	// Forget segments that fell out of the ring, keeping the one that
	// covers the oldest byte.
	start := l.startLocked()
	k := 0
	for k+1 < len(l.segs) && l.segs[k+1].off <= start {
		k++
	}
	l.segs = l.segs[k:]
	l.broadcastLocked()
}

func (l *outLog) close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.closed {
		l.closed = true
		l.broadcastLocked()
	}
}

// chunk is a run of output on one channel.
type chunk struct {
	off  int64
	ch   byte
	data []byte
}

// read returns the output from offset from on, at most max bytes, split by
// channel. If from is older than what is kept, it reads from the oldest kept
// byte and gapTo says where that is. wake is closed when more output arrives
// or the log closes.
func (l *outLog) read(from int64, max int) (chunks []chunk, gapTo int64, closed bool, wake <-chan struct{}) {
	l.mu.Lock()
	defer l.mu.Unlock()
	start := l.startLocked()
	if from < start {
		gapTo = start
		from = start
	}
	if from > l.total {
		from = l.total
	}
	size := int64(len(l.buf))
	for from < l.total && max > 0 {
		// The channel and the end of the segment holding from.
		ch, end := byte(1), l.total
		for i, s := range l.segs {
			if s.off <= from {
				ch = s.ch
				if i+1 < len(l.segs) {
					end = l.segs[i+1].off
				} else {
					end = l.total
				}
			}
		}
		n := min(end-from, int64(max))
		// Copy out of the ring, possibly in two parts.
		data := make([]byte, 0, n)
		for k := from; k < from+n; {
			i := k % size
			m := min(size-i, from+n-k)
			data = append(data, l.buf[i:i+m]...)
			k += m
		}
		chunks = append(chunks, chunk{off: from, ch: ch, data: data})
		from += n
		max -= int(n)
	}
	return chunks, gapTo, l.closed, l.wake
}

// bounds returns the oldest kept offset and the next offset.
func (l *outLog) bounds() (start, total int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.startLocked(), l.total
}
