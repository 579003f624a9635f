package agentproto

import (
	"context"
	"errors"
	"net"
	"sync/atomic"
	"testing"
	"time"
)

// Regression: a Reply that cannot be sent (frame over MaxPayload) marks the stream
// finished first, so nothing ends the stream: the caller waits forever.
func TestRegressionOversizedReplyStrandsCaller(t *testing.T) {
	replyErr := make(chan error, 1)
	p := connect(t, transports[0], async(func(ctx context.Context, s *Stream, op Op, args, tail []byte) {
		replyErr <- s.Reply(nil, make([]byte, MaxPayload))
	}))
	s, err := p.caller.Call(OpExec, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := wait(t, replyErr, "Reply"); err == nil {
		t.Fatal("Reply of an oversized tail = nil")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if _, err := s.Result(ctx, nil); errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Result = %v: the call never ends after its Reply failed to send", err)
	}
}

// failWriter is a net.Conn whose writes fail on demand.
type failWriter struct {
	net.Conn
	fail atomic.Bool
}

func (f *failWriter) Write(p []byte) (int, error) {
	if f.fail.Load() {
		return 0, errors.New("broken pipe")
	}
	return f.Conn.Write(p)
}

// Regression: when the connection fails on a write (or a protocol error), the
// pending streams fail with that error, which is not ErrClosed, so the
// daemon's sandbox.callError does not classify it as unavailable.
func TestRegressionPendingErrorNotErrClosed(t *testing.T) {
	a, b := net.Pipe()
	fw := &failWriter{Conn: a}
	caller := NewConn(fw, nil)
	server := NewConn(b, async(func(ctx context.Context, s *Stream, op Op, args, tail []byte) { <-ctx.Done() }))
	defer server.Close()
	defer caller.Close()
	s, err := caller.Call(OpExec, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	fw.fail.Store(true)
	if _, err := caller.Call(OpStat, nil, nil); !errors.Is(err, ErrClosed) {
		t.Fatalf("Call with a broken transport = %v", err)
	}
	_, err = s.Result(testContext(t, timeout), nil)
	if !errors.Is(err, ErrClosed) {
		t.Errorf("pending Result after the connection failed = %v, want an error matching ErrClosed", err)
	}
}

// Regression: the receiver trusts the sender to respect the window. A peer that
// ignores credit (a compromised agent) makes the daemon queue without bound.
func TestRegressionReceiveWindowNotEnforced(t *testing.T) {
	c, peer := newRawPeer(t, nil)
	if _, err := c.Call(OpExec, nil, nil); err != nil {
		t.Fatal(err)
	}
	peer.next(t)
	chunk := make([]byte, MaxChunk)
	for range 4 * Window / MaxChunk {
		peer.nc.SetWriteDeadline(time.Now().Add(time.Second))
		if _, err := peer.nc.Write(encodeFrame(FrameData, ChanStdout, 1, chunk)); err != nil {
			break
		}
	}
	select {
	case <-c.Done():
	case <-time.After(time.Second):
		t.Errorf("the Conn accepted 4×Window of Data without credit; want a protocol error")
	}
}

// Bug 4 (minor): an unknown frame type fails the connection only when it
// names an open stream; on any other stream id it is silently dropped.
func TestRegressionUnknownTypeOnUnknownStream(t *testing.T) {
	c, peer := newRawPeer(t, nil)
	peer.send(t, encodeFrame(42, 0, 99, nil))
	select {
	case <-c.Done():
	case <-time.After(time.Second):
		t.Errorf("frame type 42 on stream 99 was accepted; want a protocol error")
	}
}

// Bug 5 (minor): a Call whose frame cannot be written stays registered.
func TestRegressionFailedCallStaysRegistered(t *testing.T) {
	c, _ := newRawPeer(t, nil)
	if _, err := c.Call(OpExec, string(make([]byte, MaxPayload)), nil); err == nil {
		t.Fatal("Call with oversized args = nil error")
	}
	c.mu.Lock()
	n := len(c.streams)
	c.mu.Unlock()
	if n != 0 {
		t.Errorf("%d streams registered after a Call that failed, want 0", n)
	}
}

// Note 6: after the caller's Cancel, a server-side WriteData that waits for
// credit under any context but the handler's waits forever: Cancel does not
// stop the stream's sending as a Reply/Error from the peer does.
func TestRegressionCancelDoesNotStopServerWrites(t *testing.T) {
	res := make(chan error, 1)
	started := make(chan struct{})
	p := connect(t, transports[0], async(func(ctx context.Context, s *Stream, op Op, args, tail []byte) {
		close(started)
		wctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		res <- s.WriteData(wctx, ChanStdout, make([]byte, 4*Window))
	}))
	s, err := p.caller.Call(OpExec, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	<-started
	time.Sleep(50 * time.Millisecond)
	s.Cancel()
	if err := wait(t, res, "WriteData"); errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("server WriteData after Cancel = %v; want ErrPeerDone promptly", err)
	}
}

// Regression: WriteData loses wakeups when two goroutines write on one stream
// (the agent's stdout and stderr collectors do). One credit frame wakes one
// waiter; if that waiter finishes with credit left over, the other waits
// forever, though the window is open, since the reader sends no more credit.
func TestRegressionConcurrentWritersLoseCredit(t *testing.T) {
	waiting := make(chan struct{})
	done := make(chan error, 2)
	p := connect(t, transports[0], async(func(ctx context.Context, s *Stream, op Op, args, tail []byte) {
		// Use up the window in full frames, one a byte short and the last a
		// byte long, so that the reader's one credit (sent once it consumed
		// half the window) is not followed by a second.
		sizes := make([]int, Window/MaxChunk)
		for i := range sizes {
			sizes[i] = MaxChunk
		}
		sizes[1]--
		sizes[len(sizes)-1]++
		for _, n := range sizes {
			s.WriteData(ctx, ChanStdout, make([]byte, n))
		}
		go func() { done <- s.WriteData(ctx, ChanStdout, []byte("1")) }() // first in line
		time.Sleep(50 * time.Millisecond)
		go func() { done <- s.WriteData(ctx, ChanStderr, make([]byte, 1000)) }()
		time.Sleep(50 * time.Millisecond)
		close(waiting)
	}))
	s, err := p.caller.Call(OpExec, ExecRequest{Stream: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	<-waiting
	ctx := testContext(t, timeout)
	got := 0
	for got < Window+1+1000 {
		rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		m, err := s.Recv(rctx)
		cancel()
		if err != nil {
			t.Fatalf("after %d of %d bytes: Recv = %v: a writer is stuck with credit available", got, Window+1001, err)
		}
		got += len(m.Payload)
	}
}
