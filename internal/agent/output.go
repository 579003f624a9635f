package agent

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/warrenhq/warren/internal/agentproto"
)

// output receives a command's stdout and stderr. It enforces the per-stream
// cap (bytes past it are read and dropped, never buffered) and either keeps
// the bytes for the reply or streams them to the caller as Data frames.
type output struct {
	max    int64
	stream *agentproto.Stream // nil: gather for the reply
	ctx    context.Context

	mu        sync.Mutex
	bufs      [3]bytes.Buffer // by channel: 1 stdout, 2 stderr
	counts    [3]int64
	truncated bool
}

func (o *output) write(ch byte, p []byte) {
	o.mu.Lock()
	room := o.max - o.counts[ch]
	if room <= 0 {
		o.truncated = true
		o.mu.Unlock()
		return
	}
	if int64(len(p)) > room {
		p = p[:room]
		o.truncated = true
	}
	o.counts[ch] += int64(len(p))
	if o.stream == nil {
		o.bufs[ch].Write(p)
		o.mu.Unlock()
		return
	}
	o.mu.Unlock()
	// Blocks while the caller has no credit: the pipe fills and the
	// producer waits, so nothing piles up here.
	o.stream.WriteData(o.ctx, ch, p)
}

// collector copies one pipe or FIFO into an output until the command is done.
type collector struct {
	f    *os.File
	ch   byte
	out  *output
	done chan struct{}
	err  error
}

func collect(f *os.File, ch byte, out *output) *collector {
	c := &collector{f: f, ch: ch, out: out, done: make(chan struct{})}
	go c.run()
	return c
}

func (c *collector) run() {
	defer close(c.done)
	buf := make([]byte, 32<<10)
	for {
		n, err := c.f.Read(buf)
		if n > 0 {
			c.out.write(c.ch, buf[:n])
		}
		if err != nil {
			c.err = err
			return
		}
	}
}

// finish is called once the command is over, so every byte it wrote is in
// the pipe already. It stops the reader, takes what is left without waiting,
// and reports whether some writer still holds the pipe open (a background
// process the command started). Such a pipe must not be reused for the next
// command, or that process's output would land in it.
func (c *collector) finish() (held bool) {
	c.f.SetReadDeadline(time.Now())
	<-c.done
	// The FIFO may serve the next command: no deadline may stay behind.
	c.f.SetReadDeadline(time.Time{})
	if errors.Is(c.err, io.EOF) {
		return false
	}
	rc, err := c.f.SyscallConn()
	if err != nil {
		return true
	}
	eof := false
	buf := make([]byte, 32<<10)
	rc.Read(func(fd uintptr) bool {
		for {
			n, err := unix.Read(int(fd), buf)
			switch {
			case n > 0:
				c.out.write(c.ch, buf[:n])
			case n == 0 && err == nil:
				eof = true
				return true
			case errors.Is(err, unix.EINTR):
			default:
				return true // EAGAIN: a writer remains
			}
		}
	})
	return !eof
}

// ring is the session's bounded log of output written by background
// processes after their command returned. Old bytes are overwritten.
type ring struct {
	mu   sync.Mutex
	buf  []byte
	size int
	w    int   // next write position
	n    int64 // total bytes ever written
}

func newRing(size int) *ring {
	if size <= 0 {
		size = 64 << 10
	}
	return &ring{size: size}
}

func (r *ring) Write(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.buf == nil {
		r.buf = make([]byte, r.size)
	}
	n := len(p)
	r.n += int64(n)
	if len(p) > r.size {
		p = p[len(p)-r.size:]
	}
	for len(p) > 0 {
		k := copy(r.buf[r.w:], p)
		p = p[k:]
		r.w = (r.w + k) % r.size
	}
	return n, nil
}

// Bytes returns the retained tail of the log.
func (r *ring) Bytes() []byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.buf == nil {
		return nil
	}
	if r.n < int64(r.size) {
		return bytes.Clone(r.buf[:r.w])
	}
	return append(bytes.Clone(r.buf[r.w:]), r.buf[:r.w]...)
}

// drain copies f into the log until every writer is gone, so background
// processes never block on a full pipe or die of SIGPIPE.
func (r *ring) drain(f *os.File) {
	defer f.Close()
	io.Copy(r, f)
}
