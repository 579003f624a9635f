package grpcapi

import (
	"bytes"
	"context"
	"io"

	"connectrpc.com/connect"

	warrenv1 "github.com/warrenhq/warren/api/gen/warren/v1"
	"github.com/warrenhq/warren/internal/errdefs"
)

// files serves warren.v1.FileService.
type files struct{ s *Server }

// readChunk is the most a ReadFile message carries.
const readChunk = 256 << 10

func (h files) ReadFile(ctx context.Context, req *connect.Request[warrenv1.ReadFileRequest], stream *connect.ServerStream[warrenv1.ReadFileResponse]) error {
	p := req.Msg.GetPath()
	if err := checkPath(p); err != nil {
		return err
	}
	d, err := h.s.m.ReadFile(ctx, tenant(ctx), req.Msg.GetSessionId(), p)
	if err != nil {
		return err
	}
	defer d.Close()
	if len(d.First) > 0 {
		if err := stream.Send(&warrenv1.ReadFileResponse{Data: d.First}); err != nil {
			return err
		}
	}
	buf := make([]byte, readChunk)
	for {
		n, err := io.ReadFull(d, buf)
		if n > 0 {
			if err := stream.Send(&warrenv1.ReadFileResponse{Data: buf[:n]}); err != nil {
				return err
			}
		}
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			break
		}
		if err != nil {
			return err
		}
	}
	// The agent confirms the whole file went, or says why not.
	return d.Err()
}

// tooLarge is REST's answer to an upload over the file limit.
func tooLarge(n, max int64) error {
	return errdefs.New(errdefs.ErrTooLarge, "the body of %d bytes exceeds the limit of %d bytes", n, max)
}

func (h files) WriteFile(ctx context.Context, req *connect.Request[warrenv1.WriteFileRequest]) (*connect.Response[warrenv1.WriteFileResponse], error) {
	m := req.Msg
	if err := checkPath(m.GetPath()); err != nil {
		return nil, err
	}
	mode, err := parseMode(m.GetMode())
	if err != nil {
		return nil, err
	}
	if n, max := int64(len(m.GetData())), h.s.m.MaxFileBytes(); n > max {
		return nil, tooLarge(n, max)
	}
	n, err := h.s.m.WriteFile(ctx, tenant(ctx), m.GetSessionId(), m.GetPath(), mode, bytes.NewReader(m.GetData()))
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&warrenv1.WriteFileResponse{Path: m.GetPath(), Size: n}), nil
}

// WriteFileStream writes the data of a stream of messages; the first names
// the file.
func (h files) WriteFileStream(ctx context.Context, stream *connect.ClientStream[warrenv1.WriteFileStreamRequest]) (*connect.Response[warrenv1.WriteFileStreamResponse], error) {
	if !stream.Receive() {
		if err := stream.Err(); err != nil {
			return nil, err
		}
		return nil, errdefs.New(errdefs.ErrInvalidArgument, "the stream ended before its first message")
	}
	first := stream.Msg()
	if err := checkPath(first.GetPath()); err != nil {
		return nil, err
	}
	mode, err := parseMode(first.GetMode())
	if err != nil {
		return nil, err
	}
	body := &uploadReader{stream: stream, buf: first.GetData(), max: h.s.m.MaxFileBytes()}
	n, err := h.s.m.WriteFile(ctx, tenant(ctx), first.GetSessionId(), first.GetPath(), mode, body)
	if body.err != nil {
		err = body.err // why the upload stopped, whatever the manager made of it
	}
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&warrenv1.WriteFileStreamResponse{Path: first.GetPath(), Size: n}), nil
}

// uploadReader reads the data of a WriteFileStream's messages, capped at
// the file limit as REST caps a body.
type uploadReader struct {
	stream *connect.ClientStream[warrenv1.WriteFileStreamRequest]
	buf    []byte
	n, max int64
	// err is why reading stopped early: the stream broke, it misused a
	// field or it went over the limit.
	err error
}

func (u *uploadReader) Read(p []byte) (int, error) {
	for len(u.buf) == 0 {
		if u.err != nil {
			return 0, u.err
		}
		if !u.stream.Receive() {
			if u.err = u.stream.Err(); u.err != nil {
				return 0, u.err
			}
			return 0, io.EOF
		}
		m := u.stream.Msg()
		if m.GetSessionId() != "" || m.GetPath() != "" || m.GetMode() != "" {
			u.err = errdefs.New(errdefs.ErrInvalidArgument, "only the first message of WriteFileStream may set session_id, path and mode")
			return 0, u.err
		}
		u.buf = m.GetData()
	}
	n := copy(p, u.buf)
	u.buf = u.buf[n:]
	u.n += int64(n)
	if u.n > u.max {
		u.err = tooLarge(u.n, u.max)
		return 0, u.err
	}
	return n, nil
}

func (h files) ListFiles(ctx context.Context, req *connect.Request[warrenv1.ListFilesRequest]) (*connect.Response[warrenv1.ListFilesResponse], error) {
	p := req.Msg.GetPath()
	if err := checkPath(p); err != nil {
		return nil, err
	}
	entries, err := h.s.m.ListFiles(ctx, tenant(ctx), req.Msg.GetSessionId(), p)
	if err != nil {
		return nil, err
	}
	out := &warrenv1.ListFilesResponse{Entries: make([]*warrenv1.FileEntry, 0, len(entries))}
	for i := range entries {
		out.Entries = append(out.Entries, toEntry(&entries[i]))
	}
	return connect.NewResponse(out), nil
}

func (h files) StatFile(ctx context.Context, req *connect.Request[warrenv1.StatFileRequest]) (*connect.Response[warrenv1.StatFileResponse], error) {
	p := req.Msg.GetPath()
	if err := checkPath(p); err != nil {
		return nil, err
	}
	e, err := h.s.m.Stat(ctx, tenant(ctx), req.Msg.GetSessionId(), p)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&warrenv1.StatFileResponse{Entry: toEntry(e)}), nil
}

func (h files) Mkdir(ctx context.Context, req *connect.Request[warrenv1.MkdirRequest]) (*connect.Response[warrenv1.MkdirResponse], error) {
	p := req.Msg.GetPath()
	if err := checkPath(p); err != nil {
		return nil, err
	}
	e, err := h.s.m.Mkdir(ctx, tenant(ctx), req.Msg.GetSessionId(), p)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&warrenv1.MkdirResponse{Entry: toEntry(e)}), nil
}

func (h files) DeleteFile(ctx context.Context, req *connect.Request[warrenv1.DeleteFileRequest]) (*connect.Response[warrenv1.DeleteFileResponse], error) {
	p := req.Msg.GetPath()
	if err := checkPath(p); err != nil {
		return nil, err
	}
	if err := h.s.m.Remove(ctx, tenant(ctx), req.Msg.GetSessionId(), p, req.Msg.GetRecursive()); err != nil {
		return nil, err
	}
	return connect.NewResponse(&warrenv1.DeleteFileResponse{}), nil
}
