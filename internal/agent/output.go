package agent

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"strings"
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
	f      *os.File
	ch     byte
	out    *output
	done   chan struct{}
	err    error
	filter *nameFilter // nil: bytes go through as read
}

func collect(f *os.File, ch byte, out *output) *collector {
	c := &collector{f: f, ch: ch, out: out, done: make(chan struct{})}
	go c.run()
	return c
}

// emit hands bytes read to the output, through the filter if any.
func (c *collector) emit(p []byte) {
	if c.filter != nil {
		p = c.filter.filter(p)
	}
	if len(p) > 0 {
		c.out.write(c.ch, p)
	}
}

func (c *collector) run() {
	defer close(c.done)
	buf := make([]byte, 32<<10)
	for {
		n, err := c.f.Read(buf)
		if n > 0 {
			c.emit(buf[:n])
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
	if c.filter != nil {
		defer func() {
			if p := c.filter.flush(); len(p) > 0 {
				c.out.write(c.ch, p)
			}
		}()
	}
	if errors.Is(c.err, io.EOF) {
		return false
	}
	rc, err := c.f.SyscallConn()
	if err != nil {
		return true
	}
	eof := false
	buf := make([]byte, 32<<10)
	if rerr := rc.Read(func(fd uintptr) bool {
		for {
			n, err := unix.Read(int(fd), buf)
			switch {
			case n > 0:
				c.emit(buf[:n])
			case n == 0 && err == nil:
				eof = true
				return true
			case errors.Is(err, unix.EINTR):
			default:
				return true // EAGAIN: a writer remains
			}
		}
	}); rerr != nil {
		return true // the descriptor is closed: nothing more to read
	}
	return !eof
}

// nameFilter rewrites the session shell's file name in a command's stderr.
// The driver sources the command from cmdPath, so bash prefixes its own
// errors with "/run/warren/cmd: line 1: "; a user expects what `bash -c`
// prints, "bash: ". Only a prefix at the start of a line is rewritten
// (bash and busybox: "<file>: line N: " becomes "<shell>: "; dash: "<file>: "
// becomes "<shell>: ", keeping its "N: "). A line start that may still
// become the prefix waits for the next read, at most len(prefix) bytes.
type nameFilter struct {
	repl    string // "bash: " or "sh: "
	pending []byte
	mid     bool // inside a line
}

const driverPrefix = cmdPath + ": "

func (f *nameFilter) filter(p []byte) []byte {
	data := p
	if len(f.pending) > 0 {
		data = append(f.pending, p...)
		f.pending = nil
	}
	out := make([]byte, 0, len(data))
	for i := 0; i < len(data); {
		if !f.mid {
			rest := data[i:]
			if len(rest) < len(driverPrefix) && strings.HasPrefix(driverPrefix, string(rest)) {
				f.pending = bytes.Clone(rest)
				return out
			}
			if bytes.HasPrefix(rest, []byte(driverPrefix)) {
				k := matchLineNo(rest[len(driverPrefix):])
				if k < 0 {
					f.pending = bytes.Clone(rest)
					return out
				}
				out = append(out, f.repl...)
				i += len(driverPrefix) + k
				f.mid = true
				continue
			}
		}
		nl := bytes.IndexByte(data[i:], '\n')
		if nl < 0 {
			out = append(out, data[i:]...)
			f.mid = true
			return out
		}
		out = append(out, data[i:i+nl+1]...)
		i += nl + 1
		f.mid = false
	}
	return out
}

// flush returns what is held back when the stream ends.
func (f *nameFilter) flush() []byte {
	p := f.pending
	f.pending = nil
	if bytes.HasPrefix(p, []byte(driverPrefix)) {
		return append([]byte(f.repl), p[len(driverPrefix):]...)
	}
	return p
}

// matchLineNo returns the length of "line N: " at the start of b, 0 if b
// does not start with it, and -1 if b is too short to tell.
func matchLineNo(b []byte) int {
	const w = "line "
	if n := min(len(b), len(w)); string(b[:n]) != w[:n] {
		return 0
	}
	if len(b) < len(w) {
		return -1
	}
	d := len(w)
	for d < len(b) && b[d] >= '0' && b[d] <= '9' {
		d++
	}
	switch {
	case d == len(b):
		return -1
	case d == len(w) || b[d] != ':':
		return 0
	case d+1 == len(b):
		return -1
	case b[d+1] != ' ':
		return 0
	}
	return d + 2
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
	_, _ = io.Copy(r, f) // ends when every writer is gone, or the pipe fails: either way, the end
}
