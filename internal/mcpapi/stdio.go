package mcpapi

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// maxStdioLine bounds one message on stdin, as the SDK's own reader does.
const maxStdioLine = mcp.DefaultMaxLineLength

// StdioTransport is MCP's stdio transport over in and out (newline-delimited
// JSON-RPC), made to survive bad input: the SDK's own ends the connection at
// the first line it cannot decode, so a client's one malformed message
// would end `warren mcp`. Here such a line is answered on out with a
// JSON-RPC error (-32700 for what is not JSON, -32600 for JSON that is not
// a message, or a batch after a 2025-06-18 or later initialize) and the
// next line is read as if nothing happened. out is never closed.
func StdioTransport(in io.Reader, out io.Writer) mcp.Transport {
	w := &lockedWriter{w: out}
	return &mcp.IOTransport{
		Reader: &lineFilter{r: bufio.NewReaderSize(in, 64<<10), w: w},
		Writer: w,
	}
}

// lockedWriter serializes the SDK's messages and the filter's answers, each
// written whole by one Write.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func (l *lockedWriter) Close() error { return nil }

// lineFilter passes on the lines of r that are JSON-RPC messages and
// answers the others on w.
type lineFilter struct {
	r *bufio.Reader
	w *lockedWriter
	// pending is the rest of the line being passed on; err ends the input
	// once it is read.
	pending []byte
	err     error
	// noBatches is set once an initialize asked for a revision that has
	// no batches (2025-06-18 and later), where the SDK would end the
	// connection on one.
	noBatches bool
}

func (f *lineFilter) Read(p []byte) (int, error) {
	for len(f.pending) == 0 {
		if f.err != nil {
			return 0, f.err
		}
		line, err := f.readLine()
		f.err = err
		if errors.Is(err, errLineTooLong) {
			f.err = nil
			f.answer(nil, jsonrpc.CodeInvalidRequest, fmt.Sprintf("invalid request: a message longer than %d bytes", maxStdioLine))
			continue
		}
		if t := bytes.TrimSpace(line); len(t) > 0 && f.check(t) {
			f.pending = append(t, '\n')
		}
	}
	n := copy(p, f.pending)
	f.pending = f.pending[n:]
	return n, nil
}

var errLineTooLong = errors.New("line too long")

// readLine reads one line, at most maxStdioLine bytes of it: a longer one
// is skipped to its end and reported as errLineTooLong.
func (f *lineFilter) readLine() ([]byte, error) {
	var line []byte
	for {
		chunk, err := f.r.ReadSlice('\n')
		if len(line)+len(chunk) > maxStdioLine {
			for errors.Is(err, bufio.ErrBufferFull) {
				_, err = f.r.ReadSlice('\n')
			}
			if err != nil {
				return nil, err
			}
			return nil, errLineTooLong
		}
		line = append(line, chunk...)
		if !errors.Is(err, bufio.ErrBufferFull) {
			return line, err
		}
	}
}

// check reports whether line is a message to pass on, answering it if not.
func (f *lineFilter) check(line []byte) bool {
	if !json.Valid(line) {
		f.answer(nil, jsonrpc.CodeParseError, "parse error: the line is not JSON")
		return false
	}
	if line[0] == '[' {
		var batch []json.RawMessage
		_ = json.Unmarshal(line, &batch) // not an array: an empty batch, refused below
		if len(batch) == 0 || f.noBatches {
			f.answer(nil, jsonrpc.CodeInvalidRequest, "invalid request: batches are not part of the negotiated protocol revision")
			return false
		}
		for _, m := range batch {
			if _, err := jsonrpc.DecodeMessage(m); err != nil {
				f.answer(nil, jsonrpc.CodeInvalidRequest, "invalid request: "+err.Error())
				return false
			}
		}
		return true
	}
	msg, err := jsonrpc.DecodeMessage(line)
	if err != nil {
		var m struct {
			ID json.RawMessage `json:"id"`
		}
		_ = json.Unmarshal(line, &m) // no id found: the answer carries none
		var v any
		if json.Unmarshal(m.ID, &v) != nil {
			v = nil
		}
		if _, idErr := jsonrpc.MakeID(v); idErr != nil || len(m.ID) == 0 {
			m.ID = nil
		}
		f.answer(m.ID, jsonrpc.CodeInvalidRequest, "invalid request: "+err.Error())
		return false
	}
	if req, ok := msg.(*jsonrpc.Request); ok && req.Method == "initialize" {
		var p struct {
			ProtocolVersion string `json:"protocolVersion"`
		}
		_ = json.Unmarshal(req.Params, &p) // no version: the oldest revision's rules
		f.noBatches = p.ProtocolVersion >= "2025-06-18"
	}
	return true
}

// answer writes a JSON-RPC error response; id nil is null.
func (f *lineFilter) answer(id json.RawMessage, code int64, msg string) {
	if id == nil {
		id = json.RawMessage("null")
	}
	b, _ := json.Marshal(struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Error   *jsonrpc.Error  `json:"error"`
	}{"2.0", id, &jsonrpc.Error{Code: code, Message: msg}})
	f.w.Write(append(b, '\n'))
}

// Close leaves stdin to the process.
func (f *lineFilter) Close() error { return nil }
