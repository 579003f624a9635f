package agentproto

import (
	"context"
	"io"
)

// DataReader reads the Data frames of a stream as one byte stream. On the
// serving side it ends at the peer's EOF frame; on the calling side it ends at
// the Reply (kept for Reply()) or returns the Error.
type DataReader struct {
	ctx   context.Context
	s     *Stream
	buf   []byte
	err   error
	reply []byte // payload of the Reply that ended the data
}

// NewDataReader returns a reader over s's Data frames.
func NewDataReader(ctx context.Context, s *Stream) *DataReader {
	return &DataReader{ctx: ctx, s: s}
}

func (r *DataReader) Read(p []byte) (int, error) {
	for len(r.buf) == 0 {
		if r.err != nil {
			return 0, r.err
		}
		m, err := r.s.Recv(r.ctx)
		if err != nil {
			r.err = err
			return 0, err
		}
		switch m.Type {
		case FrameData:
			r.buf = m.Payload
		case FrameEOF:
			r.err = io.EOF
		case FrameReply:
			r.reply = m.Payload
			r.err = io.EOF
		case FrameError:
			r.err = decodeError(m.Payload)
		}
	}
	n := copy(p, r.buf)
	r.buf = r.buf[n:]
	return n, nil
}

// Reply decodes the Reply that ended the data into v. It returns the stream's
// error if the data ended with one.
func (r *DataReader) Reply(v any) error {
	if r.reply == nil {
		if r.err != nil && r.err != io.EOF {
			return r.err
		}
		// Data ended with EOF; the Reply is still to come.
		_, err := r.s.Result(r.ctx, v)
		return err
	}
	_, err := DecodeReply(r.reply, v)
	return err
}

// DataWriter writes Data frames on one channel of a stream.
type DataWriter struct {
	ctx context.Context
	s   *Stream
	ch  byte
}

// NewDataWriter returns a writer of Data frames on channel ch.
func NewDataWriter(ctx context.Context, s *Stream, ch byte) *DataWriter {
	return &DataWriter{ctx: ctx, s: s, ch: ch}
}

func (w *DataWriter) Write(p []byte) (int, error) {
	if err := w.s.WriteData(w.ctx, w.ch, p); err != nil {
		return 0, err
	}
	return len(p), nil
}
