package agentproto

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"

	"github.com/warrenhq/warren/internal/errdefs"
)

// timeout bounds every wait in these tests; nothing should take close to it.
const timeout = 20 * time.Second

// A transport makes the two ends of one in-process byte stream.
type transport struct {
	name string
	pair func(t *testing.T) (net.Conn, net.Conn)
}

// transports are the byte streams every end-to-end test runs over: net.Pipe
// is synchronous and unbuffered, a socketpair has kernel buffers like the
// real daemon↔agent socket.
var transports = []transport{
	{"pipe", func(*testing.T) (net.Conn, net.Conn) { return net.Pipe() }},
	{"socketpair", socketPair},
}

func socketPair(t *testing.T) (net.Conn, net.Conn) {
	t.Helper()
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatalf("socketpair: %v", err)
	}
	conn := func(fd int) net.Conn {
		f := os.NewFile(uintptr(fd), "socketpair")
		defer f.Close() // FileConn holds its own duplicate
		c, err := net.FileConn(f)
		if err != nil {
			t.Fatalf("FileConn: %v", err)
		}
		return c
	}
	return conn(fds[0]), conn(fds[1])
}

// forEachTransport runs fn as a subtest over every transport.
func forEachTransport(t *testing.T, fn func(t *testing.T, tr transport)) {
	t.Helper()
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) { fn(t, tr) })
	}
}

// pair is a calling and a serving Conn joined by a transport.
type pair struct {
	caller, server *Conn
	rawCaller      net.Conn // the caller's byte stream
	rawServer      net.Conn // the server's byte stream
}

// connect joins a calling Conn to a serving Conn with handler h. Both are
// closed, and their ends awaited, when the test ends.
func connect(t *testing.T, tr transport, h Handler) *pair {
	t.Helper()
	a, b := tr.pair(t)
	p := &pair{caller: NewConn(a, nil), server: NewConn(b, h), rawCaller: a, rawServer: b}
	t.Cleanup(func() {
		p.caller.Close()
		p.server.Close()
		waitDone(t, p.caller)
		waitDone(t, p.server)
	})
	return p
}

// async returns a Handler that runs fn on its own goroutine for every call,
// as the agent's handlers do.
func async(fn func(ctx context.Context, s *Stream, op Op, args, tail []byte)) Handler {
	return func(ctx context.Context, s *Stream, op Op, args, tail []byte) {
		go fn(ctx, s, op, args, tail)
	}
}

// testContext returns a context that ends when the test does or after d.
func testContext(t *testing.T, d time.Duration) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), d)
	t.Cleanup(cancel)
	return ctx
}

func waitDone(t *testing.T, c *Conn) {
	t.Helper()
	select {
	case <-c.Done():
	case <-time.After(timeout):
		t.Fatalf("connection did not end within %v", timeout)
	}
}

func isDone(c *Conn) bool {
	select {
	case <-c.Done():
		return true
	default:
		return false
	}
}

// wait receives from ch, failing the test after timeout.
func wait[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(timeout):
		t.Fatalf("timed out waiting for %s", what)
		panic("unreachable")
	}
}

// checkGoroutines fails t if goroutines that the test started still run
// once it has ended and its cleanups ran, in the manner of
// goleak.VerifyNone (which the module does not require). Call it first in
// a test, so that its check runs after every other cleanup, and do not run
// such a test in parallel.
func checkGoroutines(t *testing.T) {
	t.Helper()
	before := map[string]bool{}
	for _, g := range goroutines() {
		before[g.id] = true
	}
	t.Cleanup(func() {
		deadline := time.Now().Add(5 * time.Second)
		for {
			var leaked []string
			for _, g := range goroutines()[1:] { // [0] is this one
				if !before[g.id] {
					leaked = append(leaked, g.stack)
				}
			}
			if len(leaked) == 0 {
				return
			}
			if time.Now().After(deadline) {
				t.Errorf("%d goroutines leaked:\n\n%s", len(leaked), strings.Join(leaked, "\n\n"))
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
	})
}

type goroutine struct{ id, stack string }

// goroutines lists every goroutine, the calling one first.
func goroutines() []goroutine {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	var out []goroutine
	for _, g := range strings.Split(string(buf), "\n\n") {
		id, _, _ := strings.Cut(strings.TrimPrefix(g, "goroutine "), " ")
		out = append(out, goroutine{id: id, stack: g})
	}
	return out
}

// pattern returns n bytes that differ with seed and offset.
func pattern(seed uint64, n int) []byte {
	b := make([]byte, n)
	r := rand.New(rand.NewPCG(seed, 0x5eed))
	for i := 0; i < n; i += 8 {
		var w [8]byte
		binary.LittleEndian.PutUint64(w[:], r.Uint64())
		copy(b[i:], w[:])
	}
	return b
}

// firstDiff describes where got and want part, for messages that must not
// print megabytes.
func firstDiff(got, want []byte) string {
	i := 0
	for i < len(got) && i < len(want) && got[i] == want[i] {
		i++
	}
	return fmt.Sprintf("%d bytes, want %d; first difference at offset %d", len(got), len(want), i)
}

type echoArgs struct {
	N    int    `json:"n"`
	Text string `json:"text"`
}

type echoReply struct {
	N    int    `json:"n"`
	Text string `json:"text"`
	Op   Op     `json:"op"`
}

func TestCallReply(t *testing.T) {
	checkGoroutines(t)
	bigTail := pattern(1, MaxTail)
	tests := []struct {
		name      string
		args      echoArgs
		tail      []byte
		replyTail []byte
	}{
		{name: "no tail", args: echoArgs{N: 1, Text: "hello"}},
		{name: "small tails", args: echoArgs{N: 2}, tail: []byte("stdin"), replyTail: []byte("out\x00put\n")},
		{name: "binary tails", args: echoArgs{N: 3, Text: "\x00\u2028\"}\n"}, tail: []byte{0, 1, 0xfe, 0xff}, replyTail: pattern(2, 4096)},
		{name: "largest tails", args: echoArgs{N: 4, Text: strings.Repeat("x", 1000)}, tail: bigTail, replyTail: bigTail},
	}
	forEachTransport(t, func(t *testing.T, tr transport) {
		type received struct {
			op   Op
			args echoArgs
			tail []byte
		}
		got := make(chan received, 1)
		p := connect(t, tr, async(func(ctx context.Context, s *Stream, op Op, args, tail []byte) {
			var a echoArgs
			if err := json.Unmarshal(args, &a); err != nil {
				s.Fail(err)
				return
			}
			got <- received{op, a, tail}
			s.Event(map[string]int{"progress": a.N})
			s.Reply(echoReply{N: a.N, Text: a.Text, Op: op}, tests[a.N-1].replyTail)
		}))
		ctx := testContext(t, timeout)
		for _, tc := range tests {
			t.Run(tc.name, func(t *testing.T) {
				// Result skips the Event and decodes the Reply.
				s, err := p.caller.Call(OpStat, tc.args, tc.tail)
				if err != nil {
					t.Fatalf("Call: %v", err)
				}
				r := wait(t, got, "the handler")
				if r.op != OpStat || r.args != tc.args || !bytes.Equal(r.tail, tc.tail) {
					t.Errorf("handler got op %d, args %+v, tail %s; want op %d, args %+v, tail of %d bytes",
						r.op, r.args, firstDiff(r.tail, tc.tail), OpStat, tc.args, len(tc.tail))
				}
				var reply echoReply
				tail, err := s.Result(ctx, &reply)
				if err != nil {
					t.Fatalf("Result: %v", err)
				}
				if diff := cmp.Diff(echoReply{N: tc.args.N, Text: tc.args.Text, Op: OpStat}, reply); diff != "" {
					t.Errorf("Result reply (-want +got):\n%s", diff)
				}
				if !bytes.Equal(tail, tc.replyTail) {
					t.Errorf("Result tail: %s", firstDiff(tail, tc.replyTail))
				}

				// The same answer frame by frame with Recv.
				s, err = p.caller.Call(OpList, tc.args, tc.tail)
				if err != nil {
					t.Fatalf("Call: %v", err)
				}
				wait(t, got, "the handler")
				m, err := s.Recv(ctx)
				if err != nil || m.Type != FrameEvent {
					t.Fatalf("first Recv = %v, %v; want an Event", m.Type, err)
				}
				var ev map[string]int
				if _, err := DecodeReply(m.Payload, &ev); err != nil || ev["progress"] != tc.args.N {
					t.Errorf("DecodeReply(event) = %v, %v; want progress %d", ev, err, tc.args.N)
				}
				m, err = s.Recv(ctx)
				if err != nil || m.Type != FrameReply {
					t.Fatalf("second Recv = %v, %v; want a Reply", m.Type, err)
				}
				reply = echoReply{}
				tail, err = DecodeReply(m.Payload, &reply)
				if err != nil {
					t.Fatalf("DecodeReply: %v", err)
				}
				if reply.Op != OpList || !bytes.Equal(tail, tc.replyTail) {
					t.Errorf("DecodeReply = op %d, tail %s; want op %d", reply.Op, firstDiff(tail, tc.replyTail), OpList)
				}
				if tail, err := DecodeReply(m.Payload, nil); err != nil || !bytes.Equal(tail, tc.replyTail) {
					t.Errorf("DecodeReply(nil) = tail %s, %v", firstDiff(tail, tc.replyTail), err)
				}
			})
		}
	})
}

func TestCallRefusesBadArguments(t *testing.T) {
	checkGoroutines(t)
	p := connect(t, transports[0], async(func(ctx context.Context, s *Stream, op Op, args, tail []byte) { s.Reply(nil, nil) }))
	tests := []struct {
		name string
		args any
		tail []byte
	}{
		{"args that do not marshal", make(chan int), nil},
		{"tail over MaxTail", nil, make([]byte, MaxTail+1)},
	}
	for _, tc := range tests {
		if s, err := p.caller.Call(OpExec, tc.args, tc.tail); err == nil {
			t.Errorf("%s: Call = %v, nil; want an error", tc.name, s)
		}
	}
	// The connection is still usable.
	s, err := p.caller.Call(OpHello, Hello{Version: Version}, nil)
	if err != nil {
		t.Fatalf("Call: %v", err)
	}
	if _, err := s.Result(testContext(t, timeout), nil); err != nil {
		t.Errorf("Result: %v", err)
	}
}

func TestErrorCarriesClass(t *testing.T) {
	checkGoroutines(t)
	tests := []struct {
		name      string
		err       error
		wantClass *errdefs.Class
	}{
		{"invalid argument", errdefs.New(errdefs.ErrInvalidArgument, "bad path %q", "a\x00b"), errdefs.ErrInvalidArgument},
		{"unauthenticated", errdefs.New(errdefs.ErrUnauthenticated, "who"), errdefs.ErrUnauthenticated},
		{"permission denied", errdefs.New(errdefs.ErrPermissionDenied, "open /root: permission denied"), errdefs.ErrPermissionDenied},
		{"not found", errdefs.New(errdefs.ErrNotFound, "stat /nope: no such file"), errdefs.ErrNotFound},
		{"conflict", errdefs.New(errdefs.ErrConflict, "exists"), errdefs.ErrConflict},
		{"too large", errdefs.New(errdefs.ErrTooLarge, "file over %d bytes", 1<<20), errdefs.ErrTooLarge},
		{"resource exhausted", errdefs.New(errdefs.ErrResourceExhausted, "no pids"), errdefs.ErrResourceExhausted},
		{"unavailable", errdefs.New(errdefs.ErrUnavailable, "shell restarting"), errdefs.ErrUnavailable},
		{"internal", errdefs.New(errdefs.ErrInternal, "oops"), errdefs.ErrInternal},
		{"wrapped", fmt.Errorf("read file: %w", errdefs.New(errdefs.ErrNotFound, "gone")), errdefs.ErrNotFound},
		{"with retry", errdefs.WithRetryAfter(errdefs.ErrResourceExhausted, time.Second, "busy"), errdefs.ErrResourceExhausted},
		{"unclassified", errors.New("plain failure"), errdefs.ErrInternal},
		{"unicode message", errdefs.New(errdefs.ErrConflict, "ünïcødé \"quoted\" \n newline"), errdefs.ErrConflict},
	}
	forEachTransport(t, func(t *testing.T, tr transport) {
		p := connect(t, tr, async(func(ctx context.Context, s *Stream, op Op, args, tail []byte) {
			var i int
			json.Unmarshal(args, &i)
			if op == OpReadFile {
				s.WriteData(ctx, ChanData, []byte("partial"))
			}
			s.Fail(tests[i].err)
			// A second end of the same stream is ignored.
			s.Reply("too late", nil)
			s.Fail(errors.New("later still"))
		}))
		ctx := testContext(t, timeout)
		for i, tc := range tests {
			t.Run(tc.name, func(t *testing.T) {
				s, err := p.caller.Call(OpStat, i, nil)
				if err != nil {
					t.Fatalf("Call: %v", err)
				}
				_, err = s.Result(ctx, nil)
				checkWireError(t, "Result", err, tc.err, tc.wantClass)

				// Through a DataReader, after some data.
				s, err = p.caller.Call(OpReadFile, i, nil)
				if err != nil {
					t.Fatalf("Call: %v", err)
				}
				r := NewDataReader(ctx, s)
				data, err := io.ReadAll(r)
				if string(data) != "partial" {
					t.Errorf("ReadAll data = %q, want %q", data, "partial")
				}
				checkWireError(t, "ReadAll", err, tc.err, tc.wantClass)
				checkWireError(t, "DataReader.Reply", r.Reply(nil), tc.err, tc.wantClass)

				// Nothing follows the Error.
				if _, err := s.Recv(testContext(t, 50*time.Millisecond)); !errors.Is(err, context.DeadlineExceeded) {
					t.Errorf("Recv after the Error = %v, want nothing before the deadline", err)
				}
			})
		}
	})
}

func checkWireError(t *testing.T, call string, got, sent error, want *errdefs.Class) {
	t.Helper()
	if got == nil {
		t.Errorf("%s = nil, want an error of class %v", call, want)
		return
	}
	if c := errdefs.ClassOf(got); c != want {
		t.Errorf("%s: ClassOf(%v) = %v, want %v", call, got, c, want)
	}
	if got.Error() != sent.Error() {
		t.Errorf("%s error = %q, want %q", call, got.Error(), sent.Error())
	}
}

func TestHandlerSeesCallsInOrder(t *testing.T) {
	checkGoroutines(t)
	const calls = 1000
	forEachTransport(t, func(t *testing.T, tr transport) {
		var mu sync.Mutex
		var order []int
		p := connect(t, tr, func(ctx context.Context, s *Stream, op Op, args, tail []byte) {
			var n int
			if err := json.Unmarshal(args, &n); err != nil {
				n = -1
			}
			mu.Lock()
			order = append(order, n)
			mu.Unlock()
			// Replies finish in any order.
			go func() {
				if n%3 == 0 {
					time.Sleep(time.Millisecond)
				}
				s.Reply(n, nil)
			}()
		})
		streams := make([]*Stream, calls)
		for i := range calls {
			s, err := p.caller.Call(OpExec, i, nil)
			if err != nil {
				t.Fatalf("Call %d: %v", i, err)
			}
			streams[i] = s
		}
		ctx := testContext(t, timeout)
		for i, s := range streams {
			var n int
			if _, err := s.Result(ctx, &n); err != nil || n != i {
				t.Fatalf("call %d: Result = %d, %v", i, n, err)
			}
		}
		want := make([]int, calls)
		for i := range want {
			want[i] = i
		}
		mu.Lock()
		defer mu.Unlock()
		if diff := cmp.Diff(want, order); diff != "" {
			t.Errorf("order of calls at the handler (-want +got):\n%s", diff)
		}
	})
}

func TestConcurrentCalls(t *testing.T) {
	checkGoroutines(t)
	const callers = 100
	forEachTransport(t, func(t *testing.T, tr transport) {
		p := connect(t, tr, async(func(ctx context.Context, s *Stream, op Op, args, tail []byte) {
			var a echoArgs
			if err := json.Unmarshal(args, &a); err != nil {
				s.Fail(err)
				return
			}
			time.Sleep(time.Duration(rand.IntN(2000)) * time.Microsecond)
			// Some answers stream their tail back as Data first.
			if a.N%2 == 0 {
				if err := s.WriteData(ctx, ChanStdout, tail); err != nil {
					return
				}
			}
			out := slices.Clone(tail)
			slices.Reverse(out)
			s.Reply(echoReply{N: a.N, Text: a.Text, Op: op}, out)
		}))
		ctx := testContext(t, timeout)
		var wg sync.WaitGroup
		errs := make(chan error, callers)
		for i := range callers {
			wg.Go(func() {
				for round := range 5 {
					args := echoArgs{N: i, Text: fmt.Sprintf("caller %d round %d", i, round)}
					in := pattern(uint64(i*100+round), rand.IntN(MaxChunk*3))
					s, err := p.caller.Call(Op(i%11+1), args, in)
					if err != nil {
						errs <- fmt.Errorf("caller %d: Call: %v", i, err)
						return
					}
					r := NewDataReader(ctx, s)
					streamed, err := io.ReadAll(r)
					if err != nil {
						errs <- fmt.Errorf("caller %d: ReadAll: %v", i, err)
						return
					}
					var reply echoReply
					if err := r.Reply(&reply); err != nil {
						errs <- fmt.Errorf("caller %d: Reply: %v", i, err)
						return
					}
					if want := (echoReply{N: i, Text: args.Text, Op: Op(i%11 + 1)}); reply != want {
						errs <- fmt.Errorf("caller %d: reply %+v, want %+v", i, reply, want)
					}
					if i%2 == 0 && !bytes.Equal(streamed, in) {
						errs <- fmt.Errorf("caller %d: streamed %s", i, firstDiff(streamed, in))
					}
					if i%2 == 1 && len(streamed) != 0 {
						errs <- fmt.Errorf("caller %d: streamed %d bytes, want none", i, len(streamed))
					}
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
	})
}

func TestCallTail(t *testing.T) {
	// The tail of each concurrent call arrives whole and unmixed; checked
	// separately from TestConcurrentCalls with a reply tail per caller.
	checkGoroutines(t)
	p := connect(t, transports[1], async(func(ctx context.Context, s *Stream, op Op, args, tail []byte) {
		s.Reply(len(tail), tail)
	}))
	ctx := testContext(t, timeout)
	var wg sync.WaitGroup
	for i := range 50 {
		wg.Go(func() {
			in := pattern(uint64(i), 1000+i*997)
			s, err := p.caller.Call(OpWriteFile, nil, in)
			if err != nil {
				t.Errorf("Call: %v", err)
				return
			}
			var n int
			out, err := s.Result(ctx, &n)
			if err != nil || n != len(in) || !bytes.Equal(out, in) {
				t.Errorf("caller %d: Result = %d, %s, %v", i, n, firstDiff(out, in), err)
			}
		})
	}
	wg.Wait()
}

func TestStreamingOutput(t *testing.T) {
	checkGoroutines(t)
	const size = 10 << 20
	want := map[byte][]byte{ChanStdout: pattern(1, size), ChanStderr: pattern(2, size)}
	forEachTransport(t, func(t *testing.T, tr transport) {
		p := connect(t, tr, async(func(ctx context.Context, s *Stream, op Op, args, tail []byte) {
			// One writer, alternating channels at random, with writes of
			// every size, most larger than a chunk. (Two concurrent writers,
			// as the agent's collectors are, can stall today: one Window
			// frame wakes only one of the writers waiting for credit. Use
			// two writers here once WriteData passes the wakeup on.)
			left := map[byte][]byte{ChanStdout: want[ChanStdout], ChanStderr: want[ChanStderr]}
			r := rand.New(rand.NewPCG(1, 1))
			for len(left[ChanStdout])+len(left[ChanStderr]) > 0 {
				ch := ChanStdout + byte(r.IntN(2))
				data := left[ch]
				n := min(len(data), 1+r.IntN(3*MaxChunk))
				if err := s.WriteData(ctx, ch, data[:n]); err != nil {
					s.Fail(err)
					return
				}
				left[ch] = data[n:]
			}
			s.Reply(ExecResult{ExitCode: 3}, nil)
		}))
		s, err := p.caller.Call(OpExec, ExecRequest{Command: "yes", Stream: true}, nil)
		if err != nil {
			t.Fatalf("Call: %v", err)
		}
		ctx := testContext(t, timeout)
		got := map[byte][]byte{}
		frames := 0
		for {
			m, err := s.Recv(ctx)
			if err != nil {
				t.Fatalf("Recv after %d frames: %v", frames, err)
			}
			frames++
			if m.Type == FrameReply {
				var res ExecResult
				if _, err := DecodeReply(m.Payload, &res); err != nil || res.ExitCode != 3 {
					t.Errorf("DecodeReply = %+v, %v; want exit code 3", res, err)
				}
				break
			}
			if m.Type != FrameData {
				t.Fatalf("Recv frame type %d, want Data or Reply", m.Type)
			}
			if len(m.Payload) == 0 || len(m.Payload) > MaxChunk {
				t.Errorf("Data frame of %d bytes, want 1..%d", len(m.Payload), MaxChunk)
			}
			if m.Chan != ChanStdout && m.Chan != ChanStderr {
				t.Fatalf("Data frame on channel %d", m.Chan)
			}
			got[m.Chan] = append(got[m.Chan], m.Payload...)
		}
		for ch := range want {
			if !bytes.Equal(got[ch], want[ch]) {
				t.Errorf("channel %d: %s", ch, firstDiff(got[ch], want[ch]))
			}
		}
		if frames < 2*size/MaxChunk {
			t.Errorf("%d frames carried %d bytes; Data frames exceed MaxChunk", frames, 2*size)
		}
	})
}

// TestFlowControl checks that a stream nobody reads holds its sender to the
// window, and that other streams on the connection go on meanwhile.
func TestFlowControl(t *testing.T) {
	checkGoroutines(t)
	const (
		size  = 64 << 20
		chunk = 48 << 10 // does not divide Window
	)
	want := pattern(7, size)
	forEachTransport(t, func(t *testing.T, tr transport) {
		var sent atomic.Int64
		p := connect(t, tr, async(func(ctx context.Context, s *Stream, op Op, args, tail []byte) {
			if op == OpHello {
				s.Reply(HelloReply{Version: Version, Shell: "/bin/sh"}, nil)
				return
			}
			for off := 0; off < size; off += chunk {
				end := min(off+chunk, size)
				if err := s.WriteData(ctx, ChanStdout, want[off:end]); err != nil {
					s.Fail(err)
					return
				}
				sent.Add(int64(end - off))
			}
			s.Reply(ExecResult{}, nil)
		}))
		s, err := p.caller.Call(OpExec, ExecRequest{Command: "cat /dev/zero", Stream: true}, nil)
		if err != nil {
			t.Fatalf("Call: %v", err)
		}
		deadline := time.Now().Add(timeout)
		for sent.Load() < Window-chunk && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond)
		}
		time.Sleep(100 * time.Millisecond) // room to overrun, if it would
		if n := sent.Load(); n < Window-chunk || n > Window+chunk {
			t.Errorf("the sender sent %d bytes before anyone read, want Window (%d) ± one chunk", n, Window)
		}
		if n := queuedData(s); n != Window {
			t.Errorf("%d bytes wait at the caller, want exactly Window (%d)", n, Window)
		}

		// The stuck stream blocks neither connection nor read loop.
		ctx := testContext(t, timeout)
		for range 3 {
			hs, err := p.caller.Call(OpHello, Hello{Version: Version}, nil)
			if err != nil {
				t.Fatalf("Call(Hello): %v", err)
			}
			var hello HelloReply
			if _, err := hs.Result(ctx, &hello); err != nil || hello.Version != Version {
				t.Fatalf("Hello while a stream is stuck = %+v, %v", hello, err)
			}
		}
		if n := sent.Load(); n > Window+chunk {
			t.Errorf("the sender sent %d bytes, more than the window, before anyone read", n)
		}

		r := NewDataReader(testContext(t, 2*timeout), s)
		got := make([]byte, 0, size)
		buf := make([]byte, 100_000)
		for {
			n, err := r.Read(buf)
			got = append(got, buf[:n]...)
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatalf("Read after %d bytes: %v", len(got), err)
			}
		}
		if !bytes.Equal(got, want) {
			t.Errorf("drained stream: %s", firstDiff(got, want))
		}
		if err := r.Reply(&ExecResult{}); err != nil {
			t.Errorf("Reply: %v", err)
		}
	})
}

// TestWindowHoldsPerStream checks that the window is per stream: two
// unread streams each get a full window.
func TestWindowHoldsPerStream(t *testing.T) {
	checkGoroutines(t)
	var sent [2]atomic.Int64
	p := connect(t, transports[1], async(func(ctx context.Context, s *Stream, op Op, args, tail []byte) {
		var i int
		json.Unmarshal(args, &i)
		buf := make([]byte, 3000) // does not divide Window
		for {
			if err := s.WriteData(ctx, ChanStdout, buf); err != nil {
				return
			}
			sent[i].Add(int64(len(buf)))
		}
	}))
	var streams []*Stream
	for i := range 2 {
		s, err := p.caller.Call(OpExec, i, nil)
		if err != nil {
			t.Fatalf("Call: %v", err)
		}
		streams = append(streams, s)
	}
	deadline := time.Now().Add(timeout)
	for (sent[0].Load() < Window-3000 || sent[1].Load() < Window-3000) && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	time.Sleep(50 * time.Millisecond)
	for i := range sent {
		if n := sent[i].Load(); n < Window-3000 || n > Window {
			t.Errorf("stream %d sent %d bytes unread, want Window (%d) less part of a write", i, n, Window)
		}
		if n := queuedData(streams[i]); n != Window {
			t.Errorf("stream %d: %d bytes wait at the caller, want exactly Window (%d)", i, n, Window)
		}
	}
	for _, s := range streams {
		s.Cancel()
	}
}

// queuedData returns how many Data bytes wait unread on s.
func queuedData(s *Stream) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, m := range s.queue {
		if m.Type == FrameData {
			n += len(m.Payload)
		}
	}
	return n
}

type uploadReply struct {
	Size int64  `json:"size"`
	Sum  []byte `json:"sum"`
}

func TestUpload(t *testing.T) {
	checkGoroutines(t)
	const size = 5<<20 + 17
	data := pattern(3, size)
	sum := sha256.Sum256(data)
	forEachTransport(t, func(t *testing.T, tr transport) {
		p := connect(t, tr, async(func(ctx context.Context, s *Stream, op Op, args, tail []byte) {
			h := sha256.New()
			n, err := io.Copy(h, NewDataReader(ctx, s))
			if err != nil {
				s.Fail(err)
				return
			}
			s.Reply(uploadReply{Size: n, Sum: h.Sum(nil)}, nil)
		}))
		ctx := testContext(t, timeout)
		tests := []struct {
			name  string
			write func(s *Stream) error
		}{
			{"WriteData", func(s *Stream) error { return s.WriteData(ctx, ChanData, data) }},
			{"DataWriter", func(s *Stream) error {
				_, err := io.CopyBuffer(NewDataWriter(ctx, s, ChanData), bytes.NewReader(data), make([]byte, 12345))
				return err
			}},
			{"nothing", nil},
		}
		for _, tc := range tests {
			t.Run(tc.name, func(t *testing.T) {
				s, err := p.caller.Call(OpWriteFile, FileRequest{Path: "f"}, nil)
				if err != nil {
					t.Fatalf("Call: %v", err)
				}
				want := uploadReply{Size: size, Sum: sum[:]}
				if tc.write == nil {
					empty := sha256.Sum256(nil)
					want = uploadReply{Size: 0, Sum: empty[:]}
				} else if err := tc.write(s); err != nil {
					t.Fatalf("write: %v", err)
				}
				if err := s.CloseWrite(); err != nil {
					t.Fatalf("CloseWrite: %v", err)
				}
				var got uploadReply
				if _, err := s.Result(ctx, &got); err != nil {
					t.Fatalf("Result: %v", err)
				}
				if diff := cmp.Diff(want, got); diff != "" {
					t.Errorf("upload (-want +got):\n%s", diff)
				}
			})
		}
	})
}

// TestUploadPeerDone checks that a caller writing to a stream that the agent
// has already ended learns so, instead of waiting for credit forever.
func TestUploadPeerDone(t *testing.T) {
	checkGoroutines(t)
	tests := []struct {
		name      string
		readFirst int64 // bytes the handler reads before it ends the call
		fail      bool
	}{
		{"fails after reading a little", 10 << 10, true},
		{"fails after reading a window", Window, true},
		{"replies without reading", 0, false},
		{"fails without reading", 0, true},
	}
	forEachTransport(t, func(t *testing.T, tr transport) {
		for _, tc := range tests {
			t.Run(tc.name, func(t *testing.T) {
				p := connect(t, tr, async(func(ctx context.Context, s *Stream, op Op, args, tail []byte) {
					if op == OpHello {
						s.Reply(nil, nil)
						return
					}
					n, err := io.Copy(io.Discard, io.LimitReader(NewDataReader(ctx, s), tc.readFirst))
					if err != nil || n != tc.readFirst {
						s.Fail(fmt.Errorf("read %d bytes: %v", n, err))
						return
					}
					if tc.fail {
						s.Fail(errdefs.New(errdefs.ErrTooLarge, "file over %d bytes", tc.readFirst))
						return
					}
					s.Reply(FileReply{Size: n}, nil)
				}))
				s, err := p.caller.Call(OpWriteFile, FileRequest{Path: "big"}, nil)
				if err != nil {
					t.Fatalf("Call: %v", err)
				}
				ctx := testContext(t, timeout)
				// Far more than the window, in one call and then in pieces.
				err = s.WriteData(ctx, ChanData, make([]byte, 64<<20))
				if !errors.Is(err, ErrPeerDone) {
					t.Fatalf("WriteData = %v, want ErrPeerDone", err)
				}
				if err := s.WriteData(ctx, ChanData, []byte("more")); !errors.Is(err, ErrPeerDone) {
					t.Errorf("second WriteData = %v, want ErrPeerDone", err)
				}
				s.CloseWrite() // harmless: the stream is gone at the agent
				var reply FileReply
				_, err = s.Result(ctx, &reply)
				if tc.fail {
					if !errdefs.Is(err, errdefs.ErrTooLarge) {
						t.Errorf("Result = %v, want a too_large error", err)
					}
				} else if err != nil || reply.Size != 0 {
					t.Errorf("Result = %+v, %v; want size 0", reply, err)
				}
				// The data in flight is dropped without harm.
				checkHealthy(t, p)
			})
		}
	})
}

// checkHealthy fails t unless a Hello still round-trips on p.
func checkHealthy(t *testing.T, p *pair) {
	t.Helper()
	if isDone(p.caller) || isDone(p.server) {
		t.Fatalf("connection ended: caller %v, server %v", p.caller.Err(), p.server.Err())
	}
	s, err := p.caller.Call(OpHello, Hello{Version: Version}, nil)
	if err != nil {
		t.Fatalf("Call(Hello): %v", err)
	}
	if _, err := s.Result(testContext(t, timeout), nil); err != nil {
		t.Fatalf("Hello: %v", err)
	}
}

func TestCancel(t *testing.T) {
	checkGoroutines(t)
	tests := []struct {
		name string
		// block is what the handler does until the caller cancels.
		block func(ctx context.Context, s *Stream) error
	}{
		{"handler waiting", func(ctx context.Context, s *Stream) error {
			<-ctx.Done()
			return ctx.Err()
		}},
		{"handler blocked on credit", func(ctx context.Context, s *Stream) error {
			return s.WriteData(ctx, ChanStdout, make([]byte, 4*Window))
		}},
		{"handler reading input", func(ctx context.Context, s *Stream) error {
			_, err := io.Copy(io.Discard, NewDataReader(ctx, s))
			return err
		}},
	}
	forEachTransport(t, func(t *testing.T, tr transport) {
		for _, tc := range tests {
			t.Run(tc.name, func(t *testing.T) {
				started := make(chan struct{})
				blockErr := make(chan error, 1)
				lateSent := make(chan error, 1)
				p := connect(t, tr, async(func(ctx context.Context, s *Stream, op Op, args, tail []byte) {
					if op == OpHello {
						s.Reply(nil, nil)
						return
					}
					close(started)
					blockErr <- tc.block(ctx, s)
					// Late frames for the cancelled stream.
					// WriteData may send (there is credit left) or see the
					// cancel (there is none).
					werr := s.WriteData(ctx, ChanStdout, []byte("late data"))
					if errors.Is(werr, context.Canceled) || errors.Is(werr, ErrPeerDone) {
						werr = nil
					}
					err := errors.Join(
						s.Event("late"),
						werr,
						s.CloseWrite(),
						s.Reply("late reply", []byte("tail")))
					lateSent <- err
				}))
				s, err := p.caller.Call(OpExec, ExecRequest{Command: "sleep 1000"}, nil)
				if err != nil {
					t.Fatalf("Call: %v", err)
				}
				wait(t, started, "the handler to start")
				s.Cancel()
				// A writer blocked on credit learns it from the cancel frame
				// (ErrPeerDone) or its context, whichever comes first.
				if err := wait(t, blockErr, "the handler to see the cancel"); !errors.Is(err, context.Canceled) && !errors.Is(err, ErrPeerDone) {
					t.Errorf("handler's wait ended with %v, want context.Canceled or ErrPeerDone", err)
				}
				if err := wait(t, lateSent, "the late frames"); err != nil {
					t.Errorf("sending late frames: %v", err)
				}
				// The late frames are dropped, the connection lives on, and
				// the cancelled stream reports its cancellation after any
				// Data that had arrived before it.
				checkHealthy(t, p)
				for {
					m, err := s.Recv(testContext(t, timeout))
					if err == nil && m.Type == FrameData {
						continue
					}
					if !errors.Is(err, context.Canceled) {
						t.Errorf("Recv on the cancelled stream = %v, %v; want context.Canceled", m.Type, err)
					}
					break
				}
				if _, err := s.Result(testContext(t, timeout), nil); !errors.Is(err, context.Canceled) {
					t.Errorf("Result on the cancelled stream = %v, want context.Canceled", err)
				}
				s.Cancel() // twice is harmless
				checkHealthy(t, p)
			})
		}
	})
}

func TestCancelAfterReply(t *testing.T) {
	checkGoroutines(t)
	p := connect(t, transports[0], async(func(ctx context.Context, s *Stream, op Op, args, tail []byte) {
		s.Reply(7, nil)
	}))
	s, err := p.caller.Call(OpState, nil, nil)
	if err != nil {
		t.Fatalf("Call: %v", err)
	}
	m, err := s.Recv(testContext(t, timeout))
	if err != nil || m.Type != FrameReply {
		t.Fatalf("Recv = %v, %v", m.Type, err)
	}
	s.Cancel()
	checkHealthy(t, p)
}

func TestRecvContext(t *testing.T) {
	checkGoroutines(t)
	release := make(chan struct{})
	p := connect(t, transports[0], async(func(ctx context.Context, s *Stream, op Op, args, tail []byte) {
		<-release
		s.Reply("done", nil)
	}))
	s, err := p.caller.Call(OpExec, nil, nil)
	if err != nil {
		t.Fatalf("Call: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if _, err := s.Recv(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Recv = %v, want DeadlineExceeded", err)
	}
	// The stream survives its reader's deadline.
	close(release)
	var got string
	if _, err := s.Result(testContext(t, timeout), &got); err != nil || got != "done" {
		t.Errorf("Result = %q, %v", got, err)
	}
}

// TestClose checks that the end of a connection, from either side, reaches
// everything that waits on it.
func TestClose(t *testing.T) {
	checkGoroutines(t)
	tests := []struct {
		name  string
		close func(p *pair)
	}{
		{"caller closes", func(p *pair) { p.caller.Close() }},
		{"server closes", func(p *pair) { p.server.Close() }},
		{"caller's transport breaks", func(p *pair) { p.rawCaller.Close() }},
		{"server's transport breaks", func(p *pair) { p.rawServer.Close() }},
	}
	forEachTransport(t, func(t *testing.T, tr transport) {
		for _, tc := range tests {
			t.Run(tc.name, func(t *testing.T) {
				const pending = 4
				started := make(chan struct{}, pending)
				serverErrs := make(chan error, pending)
				p := connect(t, tr, async(func(ctx context.Context, s *Stream, op Op, args, tail []byte) {
					started <- struct{}{}
					switch op {
					case OpExec: // writes until the connection ends
						buf := make([]byte, MaxChunk)
						for {
							if err := s.WriteData(context.Background(), ChanStdout, buf); err != nil {
								serverErrs <- err
								return
							}
						}
					default: // OpWriteFile reads no input

						<-ctx.Done()
						serverErrs <- ctx.Err()
					}
				}))
				ctx := testContext(t, timeout)
				var streams []*Stream
				for _, op := range []Op{OpExec, OpWriteFile, OpStat, OpList} {
					s, err := p.caller.Call(op, nil, nil)
					if err != nil {
						t.Fatalf("Call: %v", err)
					}
					streams = append(streams, s)
					wait(t, started, "the handler")
				}
				callerErrs := make(chan error, pending)
				go func() { // discards the data while it waits
					_, err := streams[0].Result(ctx, nil)
					callerErrs <- err
				}()
				go func() { // blocked on credit
					callerErrs <- streams[1].WriteData(ctx, ChanData, make([]byte, 2*Window))
				}()
				go func() {
					_, err := streams[2].Recv(ctx)
					callerErrs <- err
				}()
				go func() {
					_, err := io.ReadAll(NewDataReader(ctx, streams[3]))
					callerErrs <- err
				}()
				time.Sleep(20 * time.Millisecond) // let them block

				tc.close(p)
				for range pending {
					if err := wait(t, callerErrs, "a caller to fail"); err == nil {
						t.Errorf("pending caller operation = nil, want an error")
					}
				}
				for range pending {
					if err := wait(t, serverErrs, "a handler to fail"); err == nil {
						t.Errorf("pending handler operation = nil, want an error")
					}
				}
				waitDone(t, p.caller)
				waitDone(t, p.server)
				for side, c := range map[string]*Conn{"caller": p.caller, "server": p.server} {
					if c.Err() == nil {
						t.Errorf("%s Err() = nil after Done", side)
					}
				}
				if s, err := p.caller.Call(OpHello, nil, nil); !errors.Is(err, ErrClosed) {
					t.Errorf("Call after close = %v, %v; want ErrClosed", s, err)
				}
				if _, err := streams[2].Result(ctx, nil); err == nil {
					t.Errorf("Result after close = nil error")
				}
				if err := streams[1].WriteData(ctx, ChanData, []byte("x")); err == nil {
					t.Errorf("WriteData after close = nil error")
				}
				if err := p.caller.Close(); err != nil {
					t.Errorf("second Close = %v", err)
				}
			})
		}
	})
}

// rawPeer speaks the wire format by hand to one Conn.
type rawPeer struct {
	nc     net.Conn
	frames chan rawFrame // frames the Conn sent, until it ends
}

type rawFrame struct {
	typ     FrameType
	flags   byte
	id      uint32
	payload []byte
}

// newRawPeer connects a Conn with handler h (nil: the calling side) to a
// peer that the test drives by hand.
func newRawPeer(t *testing.T, h Handler) (*Conn, *rawPeer) {
	t.Helper()
	a, b := net.Pipe()
	c := NewConn(a, h)
	p := &rawPeer{nc: b, frames: make(chan rawFrame, 1024)}
	go func() {
		defer close(p.frames)
		for {
			f, err := readRawFrame(b)
			if err != nil {
				return
			}
			p.frames <- f
		}
	}()
	t.Cleanup(func() {
		c.Close()
		b.Close()
		waitDone(t, c)
	})
	return c, p
}

func readRawFrame(r io.Reader) (rawFrame, error) {
	var hdr [headerSize]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return rawFrame{}, err
	}
	f := rawFrame{typ: FrameType(hdr[4]), flags: hdr[5], id: binary.BigEndian.Uint32(hdr[6:])}
	f.payload = make([]byte, binary.BigEndian.Uint32(hdr[:4]))
	_, err := io.ReadFull(r, f.payload)
	return f, err
}

// encodeFrame returns the wire form of a frame.
func encodeFrame(typ FrameType, flags byte, id uint32, payload []byte) []byte {
	b := make([]byte, headerSize, headerSize+len(payload))
	binary.BigEndian.PutUint32(b, uint32(len(payload)))
	b[4], b[5] = byte(typ), flags
	binary.BigEndian.PutUint32(b[6:], id)
	return append(b, payload...)
}

// jsonPayload returns a Call, Reply, Event or Error payload.
func jsonPayload(js, tail string) []byte {
	return append(joinPayload([]byte(js)), tail...)
}

func (p *rawPeer) send(t *testing.T, b []byte) {
	t.Helper()
	p.nc.SetWriteDeadline(time.Now().Add(timeout))
	if _, err := p.nc.Write(b); err != nil {
		t.Fatalf("raw write: %v", err)
	}
}

// next returns the next frame the Conn sent.
func (p *rawPeer) next(t *testing.T) rawFrame {
	t.Helper()
	var f rawFrame
	var ok bool
	select {
	case f, ok = <-p.frames:
	case <-time.After(timeout):
		t.Fatal("timed out waiting for a frame")
	}
	if !ok {
		t.Fatal("the connection ended instead of sending a frame")
	}
	return f
}

// header returns a frame header that announces n payload bytes.
func header(n uint32, typ FrameType, flags byte, id uint32) []byte {
	b := encodeFrame(typ, flags, id, nil)
	binary.BigEndian.PutUint32(b, n)
	return b
}

func window(n uint32) []byte { return binary.BigEndian.AppendUint32(nil, n) }

func TestProtocolErrors(t *testing.T) {
	checkGoroutines(t)
	call := func(id uint32) []byte { return encodeFrame(FrameCall, byte(OpExec), id, jsonPayload(`{}`, "")) }
	tests := []struct {
		name    string
		serving bool
		// calls are opened by the calling Conn before the frames are sent;
		// their streams are 1, 2, ....
		calls  int
		frames [][]byte
	}{
		{name: "oversized frame to the server", serving: true,
			frames: [][]byte{header(MaxPayload+1, FrameCall, byte(OpExec), 1)}},
		{name: "oversized data frame to the server on an open stream", serving: true,
			frames: [][]byte{call(1), header(MaxPayload+1, FrameData, ChanData, 1)}},
		{name: "oversized frame to the caller", calls: 1,
			frames: [][]byte{header(MaxPayload+1, FrameData, ChanStdout, 1)}},
		{name: "largest length", serving: true,
			frames: [][]byte{header(0xffffffff, FrameCall, byte(OpExec), 1)}},
		{name: "unknown frame type on an open stream at the server", serving: true,
			frames: [][]byte{call(1), encodeFrame(42, 0, 1, []byte("?"))}},
		{name: "frame type 0 on an open stream at the server", serving: true,
			frames: [][]byte{call(1), encodeFrame(0, 0, 1, nil)}},
		{name: "unknown frame type on an open stream at the caller", calls: 1,
			frames: [][]byte{encodeFrame(200, 0, 1, nil)}},
		{name: "call sent to the calling side",
			frames: [][]byte{call(1)}},
		{name: "call sent to the calling side on its own stream", calls: 1,
			frames: [][]byte{call(1)}},
		{name: "call with a short payload", serving: true,
			frames: [][]byte{encodeFrame(FrameCall, byte(OpExec), 1, []byte{0, 0})}},
		{name: "call with an empty payload", serving: true,
			frames: [][]byte{encodeFrame(FrameCall, byte(OpExec), 1, nil)}},
		{name: "call whose JSON length passes its payload", serving: true,
			frames: [][]byte{encodeFrame(FrameCall, byte(OpExec), 1, []byte{0, 0, 0, 3, '{', '}'})}},
		{name: "call whose JSON length is huge", serving: true,
			frames: [][]byte{encodeFrame(FrameCall, byte(OpExec), 1, []byte{0xff, 0xff, 0xff, 0xff, '{', '}'})}},
		{name: "stream opened twice", serving: true,
			frames: [][]byte{call(5), call(5)}},
		{name: "short window frame at the server", serving: true,
			frames: [][]byte{call(1), encodeFrame(FrameWindow, 0, 1, []byte{0, 1, 0})}},
		{name: "long window frame at the caller", calls: 1,
			frames: [][]byte{encodeFrame(FrameWindow, 0, 1, []byte{0, 0, 1, 0, 0})}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var h Handler
			if tc.serving {
				h = async(func(ctx context.Context, s *Stream, op Op, args, tail []byte) { <-ctx.Done() })
			}
			c, peer := newRawPeer(t, h)
			for range tc.calls {
				if _, err := c.Call(OpExec, nil, nil); err != nil {
					t.Fatalf("Call: %v", err)
				}
				if f := peer.next(t); f.typ != FrameCall {
					t.Fatalf("the Conn sent a frame of type %d, want a Call", f.typ)
				}
			}
			for _, f := range tc.frames {
				peer.nc.SetWriteDeadline(time.Now().Add(timeout))
				peer.nc.Write(f) // fails once the Conn gave up
			}
			waitDone(t, c)
			if err := c.Err(); err == nil || errors.Is(err, ErrClosed) {
				t.Errorf("Err() = %v, want a protocol error", err)
			}
			if _, err := c.Call(OpHello, nil, nil); !errors.Is(err, ErrClosed) {
				t.Errorf("Call after a protocol error = %v, want ErrClosed", err)
			}
		})
	}
}

// TestTruncatedFrame checks that a peer that stops mid-frame ends the
// connection cleanly.
func TestTruncatedFrame(t *testing.T) {
	checkGoroutines(t)
	full := encodeFrame(FrameCall, byte(OpExec), 1, jsonPayload(`{"command":"true"}`, "tail"))
	for _, n := range []int{1, headerSize - 1, headerSize, len(full) - 1} {
		t.Run(strconv.Itoa(n), func(t *testing.T) {
			c, peer := newRawPeer(t, async(func(ctx context.Context, s *Stream, op Op, args, tail []byte) {
				t.Errorf("handler called for a truncated frame")
			}))
			peer.send(t, full[:n])
			peer.nc.Close()
			waitDone(t, c)
			if err := c.Err(); !errors.Is(err, ErrClosed) {
				t.Errorf("Err() = %v, want ErrClosed", err)
			}
		})
	}
}

// TestStrayFrames checks that frames for streams that do not exist (ended,
// cancelled, or never opened) are dropped and harm nothing.
func TestStrayFrames(t *testing.T) {
	checkGoroutines(t)
	stray := [][]byte{
		encodeFrame(FrameData, ChanStdout, 99, []byte("late")),
		encodeFrame(FrameData, ChanStdout, 99, nil),
		encodeFrame(FrameEOF, 0, 99, nil),
		encodeFrame(FrameEvent, 0, 99, jsonPayload(`{}`, "")),
		encodeFrame(FrameReply, 0, 99, jsonPayload(`{}`, "")),
		encodeFrame(FrameError, 0, 99, jsonPayload(`{"code":"not_found"}`, "")),
		encodeFrame(FrameWindow, 0, 99, window(1<<30)),
		encodeFrame(FrameCancel, 0, 99, nil),
		encodeFrame(FrameReply, 0, 0, []byte("not even a payload")),
	}
	t.Run("at the caller", func(t *testing.T) {
		c, peer := newRawPeer(t, nil)
		for _, f := range stray {
			peer.send(t, f)
		}
		s, err := c.Call(OpStat, FileRequest{Path: "/"}, nil)
		if err != nil {
			t.Fatalf("Call: %v", err)
		}
		f := peer.next(t)
		if f.typ != FrameCall || f.flags != byte(OpStat) || f.id != 1 {
			t.Fatalf("the Conn sent %+v, want a Stat Call on stream 1", f)
		}
		js, _, err := splitPayload(f.payload)
		if err != nil || string(js) != `{"path":"/"}` {
			t.Errorf("Call JSON = %q, %v", js, err)
		}
		peer.send(t, encodeFrame(FrameReply, 0, 1, jsonPayload(`{"size":5}`, "")))
		var r FileReply
		if _, err := s.Result(testContext(t, timeout), &r); err != nil || r.Size != 5 {
			t.Errorf("Result = %+v, %v", r, err)
		}
	})
	t.Run("at the server", func(t *testing.T) {
		c, peer := newRawPeer(t, async(func(ctx context.Context, s *Stream, op Op, args, tail []byte) {
			s.Reply(map[string]string{"tail": string(tail)}, nil)
		}))
		for _, f := range stray {
			peer.send(t, f)
		}
		peer.send(t, encodeFrame(FrameCall, byte(OpHello), 7, jsonPayload(`{"version":1}`, "abc")))
		f := peer.next(t)
		if f.typ != FrameReply || f.id != 7 {
			t.Fatalf("the Conn sent %+v, want a Reply on stream 7", f)
		}
		var got map[string]string
		if _, err := DecodeReply(f.payload, &got); err != nil || got["tail"] != "abc" {
			t.Errorf("Reply = %v, %v", got, err)
		}
		if isDone(c) {
			t.Errorf("connection ended: %v", c.Err())
		}
	})
}

// TestWindowFramesReturnCredit checks what a reader sends back: credit for
// the bytes it consumed, in Window frames, and nothing before it consumes.
func TestWindowFramesReturnCredit(t *testing.T) {
	checkGoroutines(t)
	c, peer := newRawPeer(t, nil)
	s, err := c.Call(OpReadFile, nil, nil)
	if err != nil {
		t.Fatalf("Call: %v", err)
	}
	peer.next(t) // the Call
	for range Window / MaxChunk {
		peer.send(t, encodeFrame(FrameData, ChanData, 1, make([]byte, MaxChunk)))
	}
	select {
	case f := <-peer.frames:
		t.Fatalf("the Conn sent %+v before anything was read", f)
	case <-time.After(20 * time.Millisecond):
	}
	ctx := testContext(t, timeout)
	var credit uint32
	for range Window / MaxChunk {
		if _, err := s.Recv(ctx); err != nil {
			t.Fatalf("Recv: %v", err)
		}
	}
	for credit < Window {
		f := peer.next(t)
		if f.typ != FrameWindow || f.id != 1 || len(f.payload) != 4 {
			t.Fatalf("the Conn sent %+v, want a Window frame", f)
		}
		credit += binary.BigEndian.Uint32(f.payload)
	}
	if credit != Window {
		t.Errorf("credit returned = %d, want %d", credit, Window)
	}
}

func TestDecodeMalformed(t *testing.T) {
	tests := []struct {
		name    string
		payload []byte
	}{
		{"nil", nil},
		{"short", []byte{0, 0, 1}},
		{"length past the end", []byte{0, 0, 0, 9, '{', '}'}},
		{"huge length", []byte{0xff, 0xff, 0xff, 0xff}},
		{"bad JSON", jsonPayload(`{"code":`, "")},
		{"JSON of the wrong shape", jsonPayload(`[1,2,3]`, "")},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var v struct{ Code string }
			if _, err := DecodeReply(tc.payload, &v); err == nil {
				t.Errorf("DecodeReply(%q) = nil error", tc.payload)
			}
			if err := DecodeError(tc.payload); err == nil {
				t.Errorf("DecodeError(%q) = nil", tc.payload)
			}
		})
	}
	// An unknown class decodes as internal; an empty JSON length is valid.
	err := DecodeError(jsonPayload(`{"code":"no_such_class","message":"m"}`, ""))
	if errdefs.ClassOf(err) != errdefs.ErrInternal || err.Error() != "m" {
		t.Errorf("DecodeError(unknown code) = %v (class %v)", err, errdefs.ClassOf(err))
	}
	if tail, err := DecodeReply([]byte{0, 0, 0, 0, 'x'}, nil); err != nil || string(tail) != "x" {
		t.Errorf("DecodeReply(no JSON, nil) = %q, %v", tail, err)
	}
}

// TestDataReaderEOFThenReply covers a stream whose data ends with an EOF
// frame before its Reply, and the writer's and Event's errors.
func TestDataReaderEOFThenReply(t *testing.T) {
	checkGoroutines(t)
	p := connect(t, transports[0], async(func(ctx context.Context, s *Stream, op Op, args, tail []byte) {
		w := NewDataWriter(ctx, s, ChanStdout)
		io.WriteString(w, "first ")
		io.WriteString(w, "second")
		s.CloseWrite()
		if err := s.Event(make(chan int)); err == nil {
			s.Fail(errors.New("Event of a channel = nil error"))
			return
		}
		s.Reply(FileReply{Size: 12}, nil)
	}))
	ctx := testContext(t, timeout)
	s, err := p.caller.Call(OpTarGet, FileRequest{Path: "/"}, nil)
	if err != nil {
		t.Fatalf("Call: %v", err)
	}
	r := NewDataReader(ctx, s)
	data, err := io.ReadAll(r)
	if err != nil || string(data) != "first second" {
		t.Errorf("ReadAll = %q, %v", data, err)
	}
	var reply FileReply
	if err := r.Reply(&reply); err != nil || reply.Size != 12 {
		t.Errorf("Reply = %+v, %v", reply, err)
	}

	// A writer whose peer has ended the call reports it.
	s, err = p.caller.Call(OpExec, nil, nil)
	if err != nil {
		t.Fatalf("Call: %v", err)
	}
	if _, err := s.Result(ctx, nil); err != nil {
		t.Fatalf("Result: %v", err)
	}
	if _, err := NewDataWriter(ctx, s, ChanData).Write([]byte("x")); !errors.Is(err, ErrPeerDone) {
		t.Errorf("DataWriter.Write after the Reply = %v, want ErrPeerDone", err)
	}
	// A reply that does not encode fails the call instead.
	p2 := connect(t, transports[0], async(func(ctx context.Context, s *Stream, op Op, args, tail []byte) {
		s.Reply(func() {}, nil)
	}))
	s, err = p2.caller.Call(OpState, nil, nil)
	if err != nil {
		t.Fatalf("Call: %v", err)
	}
	if _, err := s.Result(ctx, nil); errdefs.ClassOf(err) != errdefs.ErrInternal {
		t.Errorf("Result of an unencodable reply = %v, want an internal error", err)
	}
}
