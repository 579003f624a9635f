// Package agentproto is the wire protocol between the daemon and the agent
// that runs as PID 1 inside each sandbox.
//
// One connection (a Unix stream socket) carries many concurrent streams. The
// daemon opens a stream with a Call frame; the agent answers on the same
// stream with any number of Data and Event frames and ends it with exactly
// one Reply or Error frame. Data moving either way is flow-controlled per
// stream with credit (Window frames), so a slow consumer on one stream never
// makes either side buffer without bound and never blocks other streams.
//
// Frame layout (big endian):
//
//	uint32 payload length | uint8 type | uint8 flags | uint32 stream id | payload
//
// Call, Reply, Event and Error payloads are a uint32 JSON length, the JSON
// document, then an optional raw tail (for example a small command's output),
// so bytes never pass through base64. Data frames carry raw bytes; their flags
// byte names the channel (data, stdout, stderr).
//
// The package is imported by the agent, so it must stay small: no net/http,
// no database, nothing that starts goroutines at init.
package agentproto

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"

	"github.com/warrenhq/warren/internal/errdefs"
)

// FrameType says what a frame carries.
type FrameType uint8

// The frame types.
const (
	FrameCall   FrameType = 1 // opens a stream: op in flags, JSON arguments
	FrameData   FrameType = 2 // raw bytes on a channel (flags)
	FrameEOF    FrameType = 3 // the sender will send no more Data on this stream
	FrameReply  FrameType = 4 // final JSON result; ends the stream
	FrameError  FrameType = 5 // final error {code,message}; ends the stream
	FrameWindow FrameType = 6 // 4-byte credit for Data the receiver has consumed
	FrameCancel FrameType = 7 // the caller abandons the stream
	FrameEvent  FrameType = 8 // intermediate JSON event
)

// Channels of Data frames.
const (
	ChanData   byte = 0
	ChanStdout byte = 1
	ChanStderr byte = 2
)

const (
	headerSize = 10
	// MaxPayload bounds one frame; larger frames are a protocol error.
	MaxPayload = 2 << 20
	// MaxTail is the most raw bytes a Call or Reply carries inline.
	MaxTail = 1 << 20
	// Window is the credit each stream starts with in each direction.
	Window = 1 << 20
	// MaxChunk is the largest Data frame a sender produces.
	MaxChunk = 64 << 10
)

// ErrClosed is returned once the connection is gone.
var ErrClosed = errors.New("agent connection closed")

// Handler serves one Call on the agent side. It is called on the connection's
// read loop, in the order the calls arrived, so it must not block: it decodes
// what it needs, takes its place in any queue, and starts a goroutine for the
// work. The work ends the stream with Reply or Fail; ctx ends when the caller
// cancels or the connection drops.
type Handler func(ctx context.Context, s *Stream, op Op, args []byte, tail []byte)

// Conn is one end of a protocol connection.
type Conn struct {
	nc      net.Conn
	handler Handler

	wmu sync.Mutex // guards bw and ordering of frames on the wire
	bw  *bufio.Writer

	mu      sync.Mutex // guards the fields below
	streams map[uint32]*Stream
	nextID  uint32
	err     error

	done chan struct{}
}

// NewConn starts serving a connection. handler is nil on the calling side
// (the daemon) and set on the serving side (the agent).
func NewConn(nc net.Conn, handler Handler) *Conn {
	c := &Conn{
		nc:      nc,
		handler: handler,
		bw:      bufio.NewWriterSize(nc, 64<<10),
		streams: make(map[uint32]*Stream),
		done:    make(chan struct{}),
	}
	go c.readLoop()
	return c
}

// Done is closed when the connection has failed or been closed.
func (c *Conn) Done() <-chan struct{} { return c.done }

// Err returns why the connection ended, once Done is closed.
func (c *Conn) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// Close closes the connection and fails every open stream.
func (c *Conn) Close() error {
	c.fail(ErrClosed)
	return nil
}

func (c *Conn) fail(err error) {
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		return
	}
	c.err = err
	streams := c.streams
	c.streams = map[uint32]*Stream{}
	c.mu.Unlock()
	c.nc.Close()
	// Callers test for ErrClosed; the cause stays visible in the text and
	// in Err.
	serr := err
	if !errors.Is(err, ErrClosed) {
		serr = fmt.Errorf("%w: %w", ErrClosed, err)
	}
	for _, s := range streams {
		s.terminate(serr)
	}
	close(c.done)
}

type frame struct {
	typ     FrameType
	flags   byte
	id      uint32
	payload []byte
	tail    []byte // appended after payload on the wire
}

func (c *Conn) write(frames ...frame) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	var hdr [headerSize]byte
	for _, f := range frames {
		n := len(f.payload) + len(f.tail)
		if n > MaxPayload {
			return fmt.Errorf("frame of %d bytes exceeds the protocol maximum", n)
		}
		binary.BigEndian.PutUint32(hdr[0:4], uint32(n))
		hdr[4] = byte(f.typ)
		hdr[5] = f.flags
		binary.BigEndian.PutUint32(hdr[6:10], f.id)
		c.bw.Write(hdr[:])
		c.bw.Write(f.payload)
		c.bw.Write(f.tail)
	}
	if err := c.bw.Flush(); err != nil {
		go c.fail(fmt.Errorf("write to agent connection: %w", err))
		return ErrClosed
	}
	return nil
}

func (c *Conn) readLoop() {
	br := bufio.NewReaderSize(c.nc, 64<<10)
	var hdr [headerSize]byte
	for {
		if _, err := io.ReadFull(br, hdr[:]); err != nil {
			c.fail(ErrClosed)
			return
		}
		n := binary.BigEndian.Uint32(hdr[0:4])
		if n > MaxPayload {
			c.fail(fmt.Errorf("protocol error: frame of %d bytes", n))
			return
		}
		payload := make([]byte, n)
		if _, err := io.ReadFull(br, payload); err != nil {
			c.fail(ErrClosed)
			return
		}
		if err := c.dispatch(FrameType(hdr[4]), hdr[5], binary.BigEndian.Uint32(hdr[6:10]), payload); err != nil {
			c.fail(err)
			return
		}
	}
}

func (c *Conn) dispatch(typ FrameType, flags byte, id uint32, payload []byte) error {
	if typ == FrameCall {
		if c.handler == nil {
			return errors.New("protocol error: call sent to the calling side")
		}
		js, tail, err := splitPayload(payload)
		if err != nil {
			return err
		}
		ctx, cancel := context.WithCancel(context.Background())
		s := newStream(c, id)
		s.ctx, s.cancel = ctx, cancel
		c.mu.Lock()
		if c.err != nil {
			c.mu.Unlock()
			cancel()
			return nil
		}
		if _, dup := c.streams[id]; dup {
			c.mu.Unlock()
			cancel()
			return fmt.Errorf("protocol error: stream %d opened twice", id)
		}
		c.streams[id] = s
		c.mu.Unlock()
		c.handler(ctx, s, Op(flags), js, tail)
		return nil
	}
	switch typ {
	case FrameData, FrameEOF, FrameEvent, FrameReply, FrameError, FrameWindow, FrameCancel:
	default:
		return fmt.Errorf("protocol error: unknown frame type %d", typ)
	}
	c.mu.Lock()
	s := c.streams[id]
	if s != nil && (typ == FrameReply || typ == FrameError) {
		delete(c.streams, id)
	}
	c.mu.Unlock()
	if s == nil {
		return nil // a stream that already ended; late frames are dropped
	}
	switch typ {
	case FrameWindow:
		if len(payload) != 4 {
			return errors.New("protocol error: bad window frame")
		}
		s.addCredit(int64(binary.BigEndian.Uint32(payload)))
	case FrameCancel:
		s.stopSending()
		if s.cancel != nil {
			s.cancel()
		}
	default:
		if typ == FrameData && len(payload) == 0 {
			return nil
		}
		// The receiver enforces the window it granted: a peer that
		// ignores it (a compromised agent) cannot make this side buffer
		// without bound.
		if err := s.push(Msg{Type: typ, Chan: flags, Payload: payload}); err != nil {
			return err
		}
		if typ == FrameReply || typ == FrameError {
			// The peer is done: a sender still waiting for credit stops.
			s.stopSending()
		}
	}
	return nil
}

// Call opens a stream for op with JSON arguments args and an optional raw
// tail. The caller reads the answer with Stream.Recv or Stream.Result.
func (c *Conn) Call(op Op, args any, tail []byte) (*Stream, error) {
	js, err := json.Marshal(args)
	if err != nil {
		return nil, err
	}
	if len(tail) > MaxTail {
		return nil, fmt.Errorf("inline tail of %d bytes is too large", len(tail))
	}
	if 4+len(js)+len(tail) > MaxPayload {
		return nil, fmt.Errorf("call of %d bytes exceeds the protocol maximum", 4+len(js)+len(tail))
	}
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		return nil, ErrClosed
	}
	c.nextID++
	s := newStream(c, c.nextID)
	c.streams[s.id] = s
	c.mu.Unlock()
	if err := c.write(frame{typ: FrameCall, flags: byte(op), id: s.id, payload: joinPayload(js), tail: tail}); err != nil {
		c.mu.Lock()
		delete(c.streams, s.id)
		c.mu.Unlock()
		return nil, err
	}
	return s, nil
}

func joinPayload(js []byte) []byte {
	p := make([]byte, 4+len(js))
	binary.BigEndian.PutUint32(p, uint32(len(js)))
	copy(p[4:], js)
	return p
}

func splitPayload(p []byte) (js, tail []byte, err error) {
	if len(p) < 4 {
		return nil, nil, errors.New("protocol error: short payload")
	}
	n := binary.BigEndian.Uint32(p)
	if uint64(n) > uint64(len(p)-4) {
		return nil, nil, errors.New("protocol error: payload length")
	}
	return p[4 : 4+n], p[4+n:], nil
}

// Msg is one frame received on a stream.
type Msg struct {
	Type    FrameType
	Chan    byte
	Payload []byte
}

// Stream is one call in flight.
type Stream struct {
	c  *Conn
	id uint32

	ctx    context.Context // serving side only
	cancel context.CancelFunc

	mu       sync.Mutex // guards the fields below
	queue    []Msg
	err      error // terminal: connection gone
	sendWin  int64 // bytes we may still send
	recvWin  int64 // bytes the peer may still send us
	events   int   // non-Data messages queued
	consumed int64 // Data bytes consumed since the last Window frame
	finished bool  // serving side sent Reply or Error
	peerDone bool  // calling side: the Reply or Error arrived
	// credit is closed and replaced whenever sendWin grows or sending
	// ends, waking every writer of the stream (stdout and stderr share
	// it).
	credit chan struct{}

	notify chan struct{} // cap 1: queue grew or err set (one reader)
}

// maxQueuedEvents bounds the non-Data messages a stream holds unread.
const maxQueuedEvents = 64

func newStream(c *Conn, id uint32) *Stream {
	return &Stream{c: c, id: id, sendWin: Window, recvWin: Window, notify: make(chan struct{}, 1), credit: make(chan struct{})}
}

func (s *Stream) push(m Msg) error {
	s.mu.Lock()
	if m.Type == FrameData {
		s.recvWin -= int64(len(m.Payload))
		if s.recvWin < 0 {
			s.mu.Unlock()
			return fmt.Errorf("protocol error: stream %d sent past its window", s.id)
		}
	} else {
		s.events++
		if s.events > maxQueuedEvents {
			s.mu.Unlock()
			return fmt.Errorf("protocol error: stream %d floods events", s.id)
		}
	}
	s.queue = append(s.queue, m)
	s.mu.Unlock()
	select {
	case s.notify <- struct{}{}:
	default:
	}
	return nil
}

// wakeWritersLocked wakes every writer waiting for credit.
//
// Preconditions: s.mu is held.
func (s *Stream) wakeWritersLocked() {
	close(s.credit)
	s.credit = make(chan struct{})
}

func (s *Stream) addCredit(n int64) {
	s.mu.Lock()
	s.sendWin += n
	s.wakeWritersLocked()
	s.mu.Unlock()
}

// ErrPeerDone is returned by WriteData once the other side ended the stream
// (a Reply or Error arrived, or the caller cancelled); the calling side reads
// the stream's result to learn why.
var ErrPeerDone = errors.New("the other side ended the call")

func (s *Stream) stopSending() {
	s.mu.Lock()
	s.peerDone = true
	s.wakeWritersLocked()
	s.mu.Unlock()
}

func (s *Stream) terminate(err error) {
	s.mu.Lock()
	if s.err == nil {
		s.err = err
	}
	s.wakeWritersLocked()
	s.mu.Unlock()
	if s.cancel != nil {
		s.cancel()
	}
	select {
	case s.notify <- struct{}{}:
	default:
	}
}

// Recv returns the next frame of the stream. Data frames are credited back to
// the sender as they are consumed.
func (s *Stream) Recv(ctx context.Context) (Msg, error) {
	for {
		s.mu.Lock()
		if len(s.queue) > 0 {
			m := s.queue[0]
			s.queue[0] = Msg{}
			s.queue = s.queue[1:]
			var credit int64
			if m.Type == FrameData {
				s.consumed += int64(len(m.Payload))
				if s.consumed >= Window/2 {
					credit, s.consumed = s.consumed, 0
					s.recvWin += credit
				}
			} else {
				s.events--
			}
			s.mu.Unlock()
			if credit > 0 {
				var p [4]byte
				binary.BigEndian.PutUint32(p[:], uint32(credit))
				s.c.write(frame{typ: FrameWindow, id: s.id, payload: p[:]})
			}
			return m, nil
		}
		err := s.err
		s.mu.Unlock()
		if err != nil {
			return Msg{}, err
		}
		select {
		case <-s.notify:
		case <-ctx.Done():
			return Msg{}, ctx.Err()
		}
	}
}

// Cancel abandons the stream from the calling side: the agent stops the work
// and later frames are dropped.
func (s *Stream) Cancel() {
	s.c.mu.Lock()
	_, open := s.c.streams[s.id]
	delete(s.c.streams, s.id)
	s.c.mu.Unlock()
	if open {
		s.c.write(frame{typ: FrameCancel, id: s.id})
	}
	s.terminate(context.Canceled)
}

// WriteData sends p on channel ch, waiting for credit as needed.
func (s *Stream) WriteData(ctx context.Context, ch byte, p []byte) error {
	for len(p) > 0 {
		s.mu.Lock()
		for s.sendWin <= 0 && s.err == nil && !s.peerDone {
			wait := s.credit
			s.mu.Unlock()
			select {
			case <-wait:
			case <-ctx.Done():
				return ctx.Err()
			}
			s.mu.Lock()
		}
		if s.err != nil {
			err := s.err
			s.mu.Unlock()
			return err
		}
		if s.peerDone {
			s.mu.Unlock()
			return ErrPeerDone
		}
		n := int64(len(p))
		n = min(n, s.sendWin, MaxChunk)
		s.sendWin -= n
		s.mu.Unlock()
		if err := s.c.write(frame{typ: FrameData, flags: ch, id: s.id, payload: p[:n]}); err != nil {
			return err
		}
		p = p[n:]
	}
	return nil
}

// CloseWrite tells the peer no more Data follows.
func (s *Stream) CloseWrite() error {
	return s.c.write(frame{typ: FrameEOF, id: s.id})
}

// Event sends an intermediate JSON event (serving side).
func (s *Stream) Event(v any) error {
	js, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return s.c.write(frame{typ: FrameEvent, id: s.id, payload: joinPayload(js)})
}

// Reply ends the stream with a JSON result and an optional raw tail.
func (s *Stream) Reply(v any, tail []byte) error {
	js, err := json.Marshal(v)
	if err != nil {
		return s.Fail(fmt.Errorf("encode reply: %w", err))
	}
	if 4+len(js)+len(tail) > MaxPayload {
		err := errdefs.New(errdefs.ErrTooLarge, "reply of %d bytes exceeds the protocol maximum", 4+len(js)+len(tail))
		s.Fail(err)
		return err
	}
	if !s.finish() {
		return nil
	}
	return s.c.write(frame{typ: FrameReply, id: s.id, payload: joinPayload(js), tail: tail})
}

// Fail ends the stream with an error; its class travels with it.
func (s *Stream) Fail(err error) error {
	if !s.finish() {
		return nil
	}
	js, _ := json.Marshal(WireError{Code: errdefs.ClassOf(err).String(), Message: err.Error()})
	return s.c.write(frame{typ: FrameError, id: s.id, payload: joinPayload(js)})
}

func (s *Stream) finish() bool {
	s.mu.Lock()
	done := s.finished
	s.finished = true
	s.mu.Unlock()
	if done {
		return false
	}
	s.c.mu.Lock()
	delete(s.c.streams, s.id)
	s.c.mu.Unlock()
	if s.cancel != nil {
		s.cancel()
	}
	return true
}

// WireError is the payload of an Error frame.
type WireError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// Decode turns an Error frame payload back into a classified error.
func decodeError(payload []byte) error {
	js, _, err := splitPayload(payload)
	if err != nil {
		return err
	}
	var we WireError
	if err := json.Unmarshal(js, &we); err != nil {
		return fmt.Errorf("decode agent error: %w", err)
	}
	return errdefs.New(errdefs.FromCode(we.Code), "%s", we.Message)
}

// Result waits for the end of a stream that carries no Data: it decodes the
// Reply into v and returns its tail, or returns the Error.
func (s *Stream) Result(ctx context.Context, v any) ([]byte, error) {
	for {
		m, err := s.Recv(ctx)
		if err != nil {
			return nil, err
		}
		switch m.Type {
		case FrameReply:
			return DecodeReply(m.Payload, v)
		case FrameError:
			return nil, decodeError(m.Payload)
		}
	}
}

// DecodeReply decodes a Reply or Event payload into v and returns its tail.
func DecodeReply(payload []byte, v any) ([]byte, error) {
	js, tail, err := splitPayload(payload)
	if err != nil {
		return nil, err
	}
	if v != nil {
		if err := json.Unmarshal(js, v); err != nil {
			return nil, fmt.Errorf("decode agent reply: %w", err)
		}
	}
	return tail, nil
}

// DecodeError decodes an Error frame payload.
func DecodeError(payload []byte) error { return decodeError(payload) }
