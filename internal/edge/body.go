package edge

import (
	"errors"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/warrenhq/warren/internal/errdefs"
)

// DefaultBodyIdleTimeout is how long a request body may send nothing
// before the daemon gives up on it.
const DefaultBodyIdleTimeout = time.Minute

// IdleBodies reads every request body of next under an idle deadline
// (bodyReader): REST's, MCP's and Connect's unary calls'. Streaming RPCs
// (gRPC, gRPC-Web, Connect streams: content types application/grpc* and
// application/connect+*) are left alone: a client stream that says nothing
// for a while (an interactive stdin) is not a stalled body.
func IdleBodies(idle time.Duration, next http.Handler) http.Handler {
	if idle <= 0 {
		idle = DefaultBodyIdleTimeout
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ct := r.Header.Get("Content-Type")
		if r.Body != nil && r.Body != http.NoBody && !strings.HasPrefix(ct, "application/grpc") && !strings.HasPrefix(ct, "application/connect+") {
			r.Body = newBodyReader(w, r, idle)
		}
		next.ServeHTTP(w, r)
	})
}

// bodyReader is a request body as the handlers read it.
//
// A body has no overall deadline (an 8 GiB image upload may take as long
// as it takes, and http.Server's ReadTimeout would cut it), but each read
// has one: the connection's read deadline is idle ahead when the handler
// starts and moves idle ahead before every read, so a client that sends its headers and then nothing, or stalls in
// the middle, is cut after idle instead of holding a connection and a
// handler for ever. Once the body ends the deadline is cleared, so the
// server's own watch for the client hanging up is not cut short.
//
// A body that ends before its Content-Length (or its chunked framing) is
// the client's mistake, invalid_argument, like a stalled one; neither is
// a server fault, and the class survives the layers that wrap the error.
type bodyReader struct {
	rc   io.ReadCloser
	ctl  *http.ResponseController
	idle time.Duration
	done bool
}

// newBodyReader starts the idle clock at once: a handler that answers
// without reading the body (a refusal, an unknown route) still has
// net/http read what is left of it before the answer goes out, and that
// read must not wait for ever either.
func newBodyReader(w http.ResponseWriter, r *http.Request, idle time.Duration) *bodyReader {
	b := &bodyReader{rc: r.Body, ctl: http.NewResponseController(w), idle: idle}
	// An error means the connection cannot take deadlines (a test's
	// recorder): the body is then read without one.
	b.ctl.SetReadDeadline(time.Now().Add(idle))
	return b
}

func (b *bodyReader) Read(p []byte) (int, error) {
	if b.done {
		return b.rc.Read(p)
	}
	b.ctl.SetReadDeadline(time.Now().Add(b.idle))
	n, err := b.rc.Read(p)
	if err == nil {
		return n, nil
	}
	b.done = true
	if err == io.EOF {
		b.ctl.SetReadDeadline(time.Time{})
		return n, err
	}
	// The deadline stays in the past: net/http's discarding of what is
	// left of a broken body fails at once and closes the connection
	// after the answer, instead of waiting for bytes that never come.
	b.ctl.SetReadDeadline(time.Now())
	switch {
	case errors.Is(err, io.ErrUnexpectedEOF):
		err = errdefs.New(errdefs.ErrInvalidArgument, "the request body ended early: %w", err)
	case errors.Is(err, os.ErrDeadlineExceeded):
		err = errdefs.New(errdefs.ErrInvalidArgument, "the request body stalled: no data for %v (%w)", b.idle, err)
	}
	return n, err
}

func (b *bodyReader) Close() error { return b.rc.Close() }
