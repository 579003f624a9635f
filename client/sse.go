package client

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
)

// Limits of one server-sent event. The daemon's chunks are a few KiB; these
// only stop a broken or hostile peer from making the client buffer without
// bound.
const (
	maxSSELine  = 8 << 20
	maxSSEEvent = 8 << 20
)

// sseEvent is one event of a text/event-stream.
type sseEvent struct {
	// name is the event's type: the last "event:" field, or "message".
	name string
	// data is the "data:" fields joined by newlines.
	data string
	// id is the stream's last event id when the event was dispatched: set by
	// an "id:" field of this event or of an earlier one.
	id string
}

// sseReader parses a text/event-stream as the HTML standard's event stream
// interpretation does: lines end in CRLF, LF or CR; a line that starts with
// a colon is a comment; "field: value" loses one space after the colon; an
// empty line dispatches the event, unless it has no data; an event cut off
// by the end of the stream is dropped. Reconnection ("retry:") is the
// caller's business and is ignored here.
type sseReader struct {
	sc     *bufio.Scanner
	lastID string
	first  bool // no line read yet: a leading byte order mark is dropped
}

// newSSEReader returns a reader of the events r yields.
func newSSEReader(r io.Reader) *sseReader {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), maxSSELine)
	sc.Split(scanSSELines)
	return &sseReader{sc: sc, first: true}
}

// next returns the next event. At the end of the stream it returns io.EOF
// (an event that was not terminated by an empty line is dropped).
func (r *sseReader) next() (sseEvent, error) {
	var (
		name    string
		data    strings.Builder
		hasData bool
	)
	for r.sc.Scan() {
		line := r.sc.Bytes()
		if r.first {
			line = bytes.TrimPrefix(line, []byte("\ufeff"))
			r.first = false
		}
		if len(line) == 0 {
			if !hasData {
				name = ""
				continue
			}
			if name == "" {
				name = "message"
			}
			d := data.String()
			return sseEvent{name: name, data: d[:len(d)-1], id: r.lastID}, nil
		}
		if line[0] == ':' {
			continue // a comment, such as a keep-alive
		}
		field, value, found := bytes.Cut(line, []byte(":"))
		if found {
			value = bytes.TrimPrefix(value, []byte(" "))
		}
		switch string(field) {
		case "event":
			name = string(value)
		case "data":
			if data.Len()+len(value)+1 > maxSSEEvent {
				return sseEvent{}, fmt.Errorf("read event stream: an event has more than %d bytes of data", maxSSEEvent)
			}
			data.Write(value)
			data.WriteByte('\n')
			hasData = true
		case "id":
			if bytes.IndexByte(value, 0) < 0 {
				r.lastID = string(value)
			}
		}
	}
	if err := r.sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return sseEvent{}, fmt.Errorf("read event stream: a line is longer than %d bytes", maxSSELine)
		}
		return sseEvent{}, fmt.Errorf("read event stream: %w", err)
	}
	return sseEvent{}, io.EOF
}

// scanSSELines is a bufio.SplitFunc for the lines of an event stream, which
// end in CRLF, LF or a lone CR.
func scanSSELines(data []byte, atEOF bool) (advance int, token []byte, err error) {
	if atEOF && len(data) == 0 {
		return 0, nil, nil
	}
	if i := bytes.IndexAny(data, "\r\n"); i >= 0 {
		if data[i] == '\n' {
			return i + 1, data[:i], nil
		}
		switch {
		case i+1 < len(data) && data[i+1] == '\n':
			return i + 2, data[:i], nil
		case i+1 < len(data) || atEOF:
			return i + 1, data[:i], nil
		}
		return 0, nil, nil // a CR at the end: wait for an LF that may follow
	}
	if atEOF {
		return len(data), data, nil
	}
	return 0, nil, nil
}

// readEvents reads the server-sent events of a POST to path until the event
// named final, whose JSON it decodes into a new T. An "error" event ends the
// call with the daemon's error; every other event goes to on, whose error
// ends the call as is (events it does not know are for newer clients).
func readEvents[T any](body io.Reader, path, final string, on func(sseEvent) error) (*T, error) {
	events := newSSEReader(body)
	for {
		ev, err := events.next()
		if err == io.EOF {
			return nil, fmt.Errorf("POST %s: the stream ended before the %s event: %w", path, final, io.ErrUnexpectedEOF)
		}
		if err != nil {
			return nil, fmt.Errorf("POST %s: %w", path, err)
		}
		switch ev.name {
		case final:
			var v T
			if err := json.Unmarshal([]byte(ev.data), &v); err != nil {
				return nil, fmt.Errorf("POST %s: decode %s event: %w", path, final, err)
			}
			return &v, nil
		case "error":
			return nil, errorFromEvent(ev.data)
		}
		if err := on(ev); err != nil {
			return nil, err
		}
	}
}
