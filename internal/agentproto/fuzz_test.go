package agentproto

import (
	"bytes"
	"context"
	"encoding/binary"
	"io"
	"net"
	"sync"
	"testing"
	"time"
)

// fuzzDeadline bounds the handling of one input.
const fuzzDeadline = 10 * time.Second

// FuzzReadLoop feeds arbitrary bytes, as if from a hostile daemon, to a
// serving Conn whose handler behaves like the agent's: it reads the call's
// Data until EOF, sends some output and replies. Whatever the input, the
// Conn must not panic, and must either end (Done closes) or stay healthy:
// when the input ends on a frame boundary, a fresh Call must still be
// answered. Every goroutine ends once the connection is closed.
func FuzzReadLoop(f *testing.F) {
	call := func(op Op, id uint32, js, tail string) []byte {
		return encodeFrame(FrameCall, byte(op), id, jsonPayload(js, tail))
	}
	cat := func(frames ...[]byte) []byte { return bytes.Join(frames, nil) }
	f.Add(call(OpHello, 1, `{"version":1}`, ""))
	f.Add(cat(
		call(OpWriteFile, 1, `{"path":"f"}`, ""),
		encodeFrame(FrameData, ChanData, 1, []byte("hello")),
		encodeFrame(FrameData, ChanData, 1, nil),
		encodeFrame(FrameEOF, 0, 1, nil)))
	f.Add(cat(
		call(OpExec, 1, `{"command":"ls","stream":true}`, "stdin"),
		encodeFrame(FrameWindow, 0, 1, window(1<<20)),
		encodeFrame(FrameCancel, 0, 1, nil)))
	f.Add(cat(
		call(OpExec, 3, `{}`, ""),
		encodeFrame(FrameReply, 0, 3, jsonPayload(`{}`, "")),
		encodeFrame(FrameError, 0, 3, jsonPayload(`{"code":"not_found","message":"x"}`, "")),
		encodeFrame(FrameEvent, 0, 4, jsonPayload(`{}`, ""))))
	f.Add(cat(call(OpStat, 2, `{`, ""), call(OpStat, 2, `{}`, "")))                     // bad JSON, then a duplicate id
	f.Add(cat(call(OpStat, 2, `null`, "\xff\x00"), call(OpList, 0xffffffff, `[]`, ""))) // odd JSON, the last id
	f.Add(encodeFrame(FrameCall, byte(OpExec), 1, []byte{0, 0}))                        // short payload
	f.Add(encodeFrame(FrameCall, byte(OpExec), 1, []byte{0xff, 0xff, 0xff, 0xff, '{'})) // JSON length past the end
	f.Add(call(OpExec, 1, `{}`, "")[:headerSize-3])                                     // truncated header
	f.Add(call(OpExec, 1, `{}`, "")[:headerSize+2])                                     // truncated payload
	f.Add(header(MaxPayload+1, FrameData, 0, 1))                                        // oversized
	f.Add(header(0xffffffff, FrameCall, 1, 1))                                          // huge length
	f.Add(header(MaxPayload, FrameData, 0, 1))                                          // largest, never sent
	f.Add(cat(call(OpExec, 1, `{}`, ""), encodeFrame(FrameWindow, 0, 1, []byte{1})))
	f.Add(cat(call(OpExec, 1, `{}`, ""), encodeFrame(99, 0, 1, nil)))
	f.Add(encodeFrame(0, 0, 0, nil))
	f.Add([]byte{})

	f.Fuzz(func(t *testing.T, data []byte) {
		timer := time.AfterFunc(fuzzDeadline, func() {
			panic("FuzzReadLoop: one input took longer than " + fuzzDeadline.String())
		})
		defer timer.Stop()
		fuzzOne(t, data)
	})
}

func fuzzOne(t *testing.T, data []byte) {
	a, b := net.Pipe()
	var handlers sync.WaitGroup
	c := NewConn(b, func(ctx context.Context, s *Stream, op Op, args, tail []byte) {
		handlers.Go(func() {
			if op == OpHello {
				s.Reply(HelloReply{Version: Version}, nil)
				return
			}
			n, err := io.Copy(io.Discard, NewDataReader(ctx, s))
			if err != nil {
				s.Fail(err)
				return
			}
			s.Event(map[string]int64{"read": n})
			if err := s.WriteData(ctx, ChanStdout, args); err != nil {
				s.Fail(err)
				return
			}
			s.Reply(FileReply{Size: n}, tail)
		})
	})
	// The peer reads everything the Conn sends and watches for the answer
	// to a probe call on a stream id that the input never uses.
	probe := unusedID(data)
	answered := make(chan struct{})
	readerDone := make(chan struct{})
	go func() {
		defer close(readerDone)
		for {
			f, err := readRawFrame(a)
			if err != nil {
				return
			}
			if f.typ > FrameEvent || f.typ == FrameCall || f.typ == FrameCancel {
				t.Errorf("the serving Conn sent a frame of type %d", f.typ)
			}
			if len(f.payload) > MaxPayload || f.typ == FrameData && len(f.payload) > MaxChunk {
				t.Errorf("the serving Conn sent a frame of type %d with %d bytes", f.typ, len(f.payload))
			}
			if f.id == probe && (f.typ == FrameReply || f.typ == FrameError) {
				close(answered)
			}
		}
	}()

	a.SetWriteDeadline(time.Now().Add(fuzzDeadline / 2))
	_, werr := a.Write(data) // fails if the Conn gives up first

	if werr == nil && endsOnFrame(data) {
		a.Write(encodeFrame(FrameCall, byte(OpHello), probe, jsonPayload(`{"version":1}`, "")))
		select {
		case <-c.Done():
		case <-answered:
		case <-time.After(fuzzDeadline / 2):
			t.Errorf("the Conn neither ended nor answered a probe call")
		}
	}

	c.Close()
	a.Close()
	<-c.Done()
	<-readerDone
	handlers.Wait()
}

// endsOnFrame reports whether data is a whole number of frames of allowed
// sizes, so that a frame written after it is read as a frame.
func endsOnFrame(data []byte) bool {
	for len(data) > 0 {
		if len(data) < headerSize {
			return false
		}
		n := binary.BigEndian.Uint32(data)
		if n > MaxPayload || uint64(len(data)-headerSize) < uint64(n) {
			return false
		}
		data = data[headerSize+int(n):]
	}
	return true
}

// unusedID returns a stream id that no frame header in data names.
func unusedID(data []byte) uint32 {
	used := map[uint32]bool{}
	for len(data) >= headerSize {
		used[binary.BigEndian.Uint32(data[6:])] = true
		n := binary.BigEndian.Uint32(data)
		if uint64(len(data)-headerSize) < uint64(n) {
			break
		}
		data = data[headerSize+int(n):]
	}
	id := uint32(1 << 31)
	for used[id] {
		id++
	}
	return id
}
