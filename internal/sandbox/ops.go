package sandbox

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/warrenhq/warren/internal/agentproto"
	"github.com/warrenhq/warren/internal/errdefs"
)

// ExecResult is the outcome of one command.
type ExecResult struct {
	agentproto.ExecResult
	Stdout, Stderr []byte
	OOMKilled      bool
}

// OutputFunc receives streamed output: ch is agentproto.ChanStdout or
// ChanStderr. Returning an error cancels the command.
type OutputFunc func(ch byte, p []byte) error

// Exec runs a command. With stream set, output goes to stream as it comes
// and the result carries none; otherwise it is gathered into the result.
func (sb *Sandbox) Exec(ctx context.Context, req *agentproto.ExecRequest, stdin []byte, stream OutputFunc) (*ExecResult, error) {
	var tail []byte
	switch {
	case stdin == nil:
		req.Stdin = agentproto.StdinNone
	case len(stdin) <= agentproto.MaxTail:
		req.Stdin, tail = agentproto.StdinInline, stdin
	default:
		req.Stdin = agentproto.StdinStream
	}
	req.Stream = stream != nil
	// The workload's OOM kill counter before and after the call: a kill
	// while it ran is this call's, whichever of its processes it took (a
	// pipeline's first command, a child) and however the call ended; one
	// before it or after it is not. One read of memory.events (v2) or
	// memory.oom_control (v1) each, a few microseconds.
	oomBefore, oomErr := sb.cg.OOMKills()
	s, err := sb.conn.Call(agentproto.OpExec, req, tail)
	if err != nil {
		return nil, sb.callError(ctx, nil, err)
	}
	if req.Stdin == agentproto.StdinStream {
		go func() {
			if s.WriteData(ctx, agentproto.ChanData, stdin) == nil {
				s.CloseWrite()
			}
		}()
	}
	res := &ExecResult{}
	var stdout, stderr bytes.Buffer
	for {
		m, err := s.Recv(ctx)
		if err != nil {
			return nil, sb.callError(ctx, s, err)
		}
		switch m.Type {
		case agentproto.FrameData:
			if stream != nil {
				if err := stream(m.Chan, m.Payload); err != nil {
					s.Cancel()
					return nil, err
				}
			} else if m.Chan == agentproto.ChanStderr {
				stderr.Write(m.Payload)
			} else {
				stdout.Write(m.Payload)
			}
		case agentproto.FrameReply:
			tail, err := agentproto.DecodeReply(m.Payload, &res.ExecResult)
			if err != nil {
				return nil, err
			}
			if res.StdoutLen+res.StderrLen == len(tail) && len(tail) > 0 {
				stdout.Write(tail[:res.StdoutLen])
				stderr.Write(tail[res.StdoutLen:])
			}
			res.Stdout, res.Stderr = stdout.Bytes(), stderr.Bytes()
			if res.Stdout == nil {
				res.Stdout = []byte{}
			}
			if res.Stderr == nil {
				res.Stderr = []byte{}
			}
			if n, err := sb.cg.OOMKills(); err == nil && oomErr == nil {
				res.OOMKilled = n > oomBefore
			}
			return res, nil
		case agentproto.FrameError:
			return nil, agentproto.DecodeError(m.Payload)
		}
	}
}

// Cwd asks the agent for the shell's current directory.
func (sb *Sandbox) Cwd(ctx context.Context) (string, error) {
	s, err := sb.conn.Call(agentproto.OpState, struct{}{}, nil)
	if err != nil {
		return "", sb.callError(ctx, nil, err)
	}
	var rep agentproto.StateReply
	if _, err := sb.result(ctx, s, &rep); err != nil {
		return "", err
	}
	return rep.Cwd, nil
}

func (sb *Sandbox) fileCall(ctx context.Context, op agentproto.Op, req *agentproto.FileRequest) (*agentproto.FileReply, error) {
	s, err := sb.conn.Call(op, req, nil)
	if err != nil {
		return nil, sb.callError(ctx, nil, err)
	}
	var rep agentproto.FileReply
	if _, err := sb.result(ctx, s, &rep); err != nil {
		return nil, err
	}
	return &rep, nil
}

// Stat describes one path.
func (sb *Sandbox) Stat(ctx context.Context, path string) (*agentproto.Entry, error) {
	rep, err := sb.fileCall(ctx, agentproto.OpStat, &agentproto.FileRequest{Path: path})
	if err != nil {
		return nil, err
	}
	return rep.Entry, nil
}

// maxListBytes bounds the JSON of one listing (100,000 entries of long
// names fit).
const maxListBytes = 64 << 20

// List describes a directory's entries.
func (sb *Sandbox) List(ctx context.Context, path string) ([]agentproto.Entry, error) {
	s, err := sb.conn.Call(agentproto.OpList, &agentproto.FileRequest{Path: path}, nil)
	if err != nil {
		return nil, sb.callError(ctx, nil, err)
	}
	// A large listing arrives as Data before the Reply.
	r := agentproto.NewDataReader(ctx, s)
	data, err := io.ReadAll(io.LimitReader(r, maxListBytes+1))
	if err != nil {
		return nil, sb.callError(ctx, s, err)
	}
	var rep agentproto.FileReply
	if err := r.Reply(&rep); err != nil {
		return nil, sb.callError(ctx, s, err)
	}
	if rep.EntriesStreamed {
		if len(data) > maxListBytes {
			s.Cancel()
			return nil, errdefs.New(errdefs.ErrTooLarge, "the listing of %s is larger than %d bytes", path, maxListBytes)
		}
		if err := json.Unmarshal(data, &rep.Entries); err != nil {
			return nil, fmt.Errorf("decode listing: %w", err)
		}
	}
	if rep.Entries == nil {
		rep.Entries = []agentproto.Entry{}
	}
	return rep.Entries, nil
}

// Mkdir creates a directory and its parents.
func (sb *Sandbox) Mkdir(ctx context.Context, path string) error {
	_, err := sb.fileCall(ctx, agentproto.OpMkdir, &agentproto.FileRequest{Path: path})
	return err
}

// Remove removes a file or an empty directory, or a tree if recursive.
func (sb *Sandbox) Remove(ctx context.Context, path string, recursive bool) error {
	_, err := sb.fileCall(ctx, agentproto.OpRemove, &agentproto.FileRequest{Path: path, Recursive: recursive})
	return err
}

// Download is a file or tar coming out of the sandbox.
type Download struct {
	r *agentproto.DataReader
	s *agentproto.Stream
}

func (d *Download) Read(p []byte) (int, error) { return d.r.Read(p) }

// Close abandons the download if it was not read to the end.
func (d *Download) Close() error {
	d.s.Cancel()
	return nil
}

// Err returns how the transfer ended once Read returned io.EOF: nil if the
// agent confirmed it.
func (d *Download) Err() error { return d.r.Reply(nil) }

// open starts a download and waits for its first frame, so that an error
// such as "not found" arrives before the caller commits to a response.
func (sb *Sandbox) open(ctx context.Context, op agentproto.Op, req *agentproto.FileRequest) (*Download, []byte, error) {
	s, err := sb.conn.Call(op, req, nil)
	if err != nil {
		return nil, nil, sb.callError(ctx, nil, err)
	}
	r := agentproto.NewDataReader(ctx, s)
	first := make([]byte, agentproto.MaxChunk)
	n, err := r.Read(first)
	if err != nil && err != io.EOF {
		s.Cancel()
		return nil, nil, sb.callError(ctx, s, err)
	}
	if err == io.EOF {
		if err := r.Reply(nil); err != nil {
			return nil, nil, err
		}
	}
	return &Download{r: r, s: s}, first[:n], nil
}

// ReadFile starts reading a file of at most max bytes. The first bytes are
// returned with the download; the rest follow from it.
func (sb *Sandbox) ReadFile(ctx context.Context, path string, max int64) (*Download, []byte, error) {
	return sb.open(ctx, agentproto.OpReadFile, &agentproto.FileRequest{Path: path, MaxBytes: max})
}

// TarGet starts a tar download of a directory.
func (sb *Sandbox) TarGet(ctx context.Context, path string, max int64) (*Download, []byte, error) {
	return sb.open(ctx, agentproto.OpTarGet, &agentproto.FileRequest{Path: path, MaxBytes: max})
}

// upload streams r to the agent for op.
func (sb *Sandbox) upload(ctx context.Context, op agentproto.Op, req *agentproto.FileRequest, r io.Reader) (int64, error) {
	s, err := sb.conn.Call(op, req, nil)
	if err != nil {
		return 0, sb.callError(ctx, nil, err)
	}
	w := agentproto.NewDataWriter(ctx, s, agentproto.ChanData)
	_, copyErr := io.CopyBuffer(w, r, make([]byte, agentproto.MaxChunk))
	if copyErr == nil {
		s.CloseWrite()
	} else if !errors.Is(copyErr, agentproto.ErrPeerDone) {
		// The body failed (too large, client gone): abandon the call.
		s.Cancel()
		return 0, copyErr
	}
	var rep agentproto.FileReply
	if _, err := sb.result(ctx, s, &rep); err != nil {
		return 0, err
	}
	return rep.Size, nil
}

// WriteFile writes r to path (parents created) with mode (0: keep or 0644).
func (sb *Sandbox) WriteFile(ctx context.Context, path string, mode uint32, max int64, r io.Reader) (int64, error) {
	return sb.upload(ctx, agentproto.OpWriteFile, &agentproto.FileRequest{Path: path, Mode: mode, MaxBytes: max}, r)
}

// TarPut extracts the tar in r into the directory path.
func (sb *Sandbox) TarPut(ctx context.Context, path string, max int64, r io.Reader) (int64, error) {
	return sb.upload(ctx, agentproto.OpTarPut, &agentproto.FileRequest{Path: path, MaxBytes: max}, r)
}
