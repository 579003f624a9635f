package client

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"

	"github.com/warrenhq/warren/api"
)

// OutputOffsetHeader is the header of a raw process output answer that
// gives the offset of its first byte.
const OutputOffsetHeader = "Warren-Output-Offset"

// processPath returns the escaped path of a process of a session, plus
// suffix.
func processPath(id, pid, suffix string) string {
	return sessionPath(id, "/processes/"+url.PathEscape(pid)+suffix)
}

// StartProcess starts a process in the session id: a command that runs on
// its own, whether or not a client is connected, with its output kept for
// clients that come and go. A session that holds as many processes (or
// PTYs) as it may answers resource_exhausted.
func (c *Client) StartProcess(ctx context.Context, id string, req *api.StartProcessRequest) (*api.Process, error) {
	var p api.Process
	if _, err := c.doJSON(ctx, http.MethodPost, sessionPath(id, "/processes"), nil, req, &p); err != nil {
		return nil, err
	}
	return &p, nil
}

// ListProcesses lists the processes of the session id, running and exited.
func (c *Client) ListProcesses(ctx context.Context, id string) ([]api.Process, error) {
	var l api.ProcessList
	if _, err := c.doJSON(ctx, http.MethodGet, sessionPath(id, "/processes"), nil, nil, &l); err != nil {
		return nil, err
	}
	return l.Processes, nil
}

// GetProcess describes the process pid (such as "p1") of the session id.
func (c *Client) GetProcess(ctx context.Context, id, pid string) (*api.Process, error) {
	var p api.Process
	if _, err := c.doJSON(ctx, http.MethodGet, processPath(id, pid, ""), nil, nil, &p); err != nil {
		return nil, err
	}
	return &p, nil
}

// SignalProcess sends signal to the process pid of the session id: a name
// with or without "SIG" ("TERM", "SIGINT") or a number ("9").
func (c *Client) SignalProcess(ctx context.Context, id, pid, signal string) error {
	_, err := c.doJSON(ctx, http.MethodPost, processPath(id, pid, "/signal"), nil, &api.SignalRequest{Signal: signal}, nil)
	return err
}

// ResizeProcess sets the terminal size of the TTY process pid of the
// session id.
func (c *Client) ResizeProcess(ctx context.Context, id, pid string, cols, rows int) error {
	_, err := c.doJSON(ctx, http.MethodPost, processPath(id, pid, "/resize"), nil, &api.ResizeRequest{Cols: cols, Rows: rows}, nil)
	return err
}

// KillProcess kills the process pid of the session id and its process
// group, and removes it from the session's list.
func (c *Client) KillProcess(ctx context.Context, id, pid string) error {
	_, err := c.doJSON(ctx, http.MethodDelete, processPath(id, pid, ""), nil, nil, nil)
	return err
}

// WriteStdin sends what r yields to the stdin of the process pid of the
// session id, streaming it, and returns how many bytes the process's stdin
// took. With eof the process's stdin is closed after them. The process must
// have been started with Stdin or TTY.
func (c *Client) WriteStdin(ctx context.Context, id, pid string, r io.Reader, eof bool) (int64, error) {
	if r == nil {
		r = http.NoBody
	}
	path := processPath(id, pid, "/stdin")
	var q url.Values
	if eof {
		q = url.Values{"eof": {"true"}}
	}
	resp, err := c.send(ctx, &request{
		method: http.MethodPost, path: path, query: q, body: r,
		contentType: octetStream, accept: "application/json",
	})
	if err != nil {
		return 0, err
	}
	defer closeBody(resp.Body)
	var w api.StdinWritten
	if err := json.NewDecoder(resp.Body).Decode(&w); err != nil {
		return 0, fmt.Errorf("POST %s: decode response: %w", path, err)
	}
	return w.Written, nil
}

// outputQuery is the query of a process output request.
func outputQuery(offset int64, follow bool) url.Values {
	return url.Values{
		"offset": {strconv.FormatInt(offset, 10)},
		"follow": {strconv.FormatBool(follow)},
	}
}

// ReadProcessOutput opens the raw output of the process pid of the session
// id (stdout and stderr merged, as the process wrote them) from offset.
// With follow the reader yields output as the process writes it, until the
// process has exited and everything was read; without, it ends after the
// output produced so far.
//
// start is the offset of the first byte the reader yields: greater than
// offset when the bytes before it were already dropped from the daemon's
// bounded buffer. The caller must close the reader.
func (c *Client) ReadProcessOutput(ctx context.Context, id, pid string, offset int64, follow bool) (rc io.ReadCloser, start int64, err error) {
	path := processPath(id, pid, "/output")
	resp, err := c.send(ctx, &request{
		method: http.MethodGet, path: path, query: outputQuery(offset, follow), accept: octetStream,
	})
	if err != nil {
		return nil, 0, err
	}
	start = offset
	if h := resp.Header.Get(OutputOffsetHeader); h != "" {
		if start, err = strconv.ParseInt(h, 10, 64); err != nil || start < 0 {
			resp.Body.Close()
			return nil, 0, fmt.Errorf("GET %s: bad %s header %q", path, OutputOffsetHeader, h)
		}
	}
	return resp.Body, start, nil
}

// ProcessEventKind says what a ProcessEvent carries.
type ProcessEventKind string

// The kinds of process events, named as the server-sent events are.
const (
	// ProcessEventOutput carries bytes the process wrote.
	ProcessEventOutput ProcessEventKind = "output"
	// ProcessEventGap says that bytes were dropped from the daemon's
	// bounded buffer before this client read them.
	ProcessEventGap ProcessEventKind = "gap"
	// ProcessEventExit says that the process has exited and all its kept
	// output was delivered. It is the last event.
	ProcessEventExit ProcessEventKind = "exit"
)

// ProcessEvent is one event of a process's output stream.
type ProcessEvent struct {
	Kind ProcessEventKind
	// Offset is the position in the process's output of the first byte of
	// Data (output) or of the first dropped byte (gap); for exit, the end
	// of the output.
	Offset int64
	// Next is the offset that follows this event: where a new call to
	// ProcessOutput resumes without loss or repetition.
	Next int64
	// Stream is "stdout" or "stderr" (output; a TTY process writes only
	// "stdout").
	Stream string
	// Data is the exact bytes of an output event.
	Data []byte
	// Gap is the dropped range [From, To) of a gap event.
	Gap *api.OutputGap
	// Exit is how the process ended, for an exit event.
	Exit *api.ProcessExit
}

// ProcessOutput streams the output of the process pid of the session id
// from offset, calling onEvent for each event in order. Without follow it
// returns after the output available now (with a last exit event if the
// process has exited). With follow it waits for more output and returns
// after the exit event; a stream that ends before it is an error wrapping
// io.ErrUnexpectedEOF, after which the caller may call again from the last
// event's Next.
//
// An error that onEvent returns ends the call and is returned as is. A nil
// onEvent discards the events.
func (c *Client) ProcessOutput(ctx context.Context, id, pid string, offset int64, follow bool, onEvent func(ev ProcessEvent) error) error {
	if onEvent == nil {
		onEvent = func(ProcessEvent) error { return nil }
	}
	path := processPath(id, pid, "/output")
	resp, err := c.send(ctx, &request{
		method: http.MethodGet, path: path, query: outputQuery(offset, follow), accept: eventStream,
	})
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if mt := mediaType(resp); mt != eventStream {
		return fmt.Errorf("GET %s: answer of type %q, want %s", path, mt, eventStream)
	}

	events := newSSEReader(resp.Body)
	pos := offset // the offset after the last event
	for {
		ev, err := events.next()
		if err == io.EOF {
			if follow {
				return fmt.Errorf("GET %s: the stream ended before the exit event: %w", path, io.ErrUnexpectedEOF)
			}
			return nil
		}
		if err != nil {
			return fmt.Errorf("GET %s: %w", path, err)
		}
		var pe ProcessEvent
		switch ev.name {
		case "output":
			chunk, p, err := decodeChunk(ev.data)
			if err != nil {
				return fmt.Errorf("GET %s: output event: %w", path, err)
			}
			start := pos
			if chunk.Offset != nil {
				start = *chunk.Offset
			} else if id, err := strconv.ParseInt(ev.id, 10, 64); err == nil && id >= int64(len(p)) {
				start = id - int64(len(p)) // the event's id is the offset after it
			}
			pos = start + int64(len(p))
			pe = ProcessEvent{Kind: ProcessEventOutput, Offset: start, Next: pos, Stream: chunk.Stream, Data: p}
		case "gap":
			var g api.OutputGap
			if err := json.Unmarshal([]byte(ev.data), &g); err != nil {
				return fmt.Errorf("GET %s: decode gap event: %w", path, err)
			}
			pos = max(pos, g.To)
			pe = ProcessEvent{Kind: ProcessEventGap, Offset: g.From, Next: pos, Gap: &g}
		case "exit":
			var x api.ProcessExit
			if err := json.Unmarshal([]byte(ev.data), &x); err != nil {
				return fmt.Errorf("GET %s: decode exit event: %w", path, err)
			}
			return onEvent(ProcessEvent{Kind: ProcessEventExit, Offset: pos, Next: pos, Exit: &x})
		case "error":
			return errorFromEvent(ev.data)
		default:
			continue // for newer clients
		}
		if err := onEvent(pe); err != nil {
			return err
		}
	}
}
