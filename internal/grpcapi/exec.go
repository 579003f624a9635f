package grpcapi

import (
	"context"

	"connectrpc.com/connect"

	warrenv1 "github.com/warrenhq/warren/api/gen/warren/v1"
	"github.com/warrenhq/warren/internal/session"
	"github.com/warrenhq/warren/internal/wire"
)

// execs serves warren.v1.ExecService.
type execs struct{ s *Server }

func (h execs) Exec(ctx context.Context, req *connect.Request[warrenv1.ExecRequest]) (*connect.Response[warrenv1.ExecResult], error) {
	ereq := toExecRequest(req.Msg, stdinOf(req.Msg.GetInput()))
	res, err := h.s.m.Exec(ctx, tenant(ctx), req.Msg.GetSessionId(), ereq, nil)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(toExecResult(res)), nil
}

// ExecStream sends stdout and stderr as they are produced, then exit, as
// REST's server-sent events do.
func (h execs) ExecStream(ctx context.Context, req *connect.Request[warrenv1.ExecStreamRequest], stream *connect.ServerStream[warrenv1.ExecStreamResponse]) error {
	ereq := toExecRequest(req.Msg, stdinOf(req.Msg.GetInput()))
	var chunkers [3]wire.Chunker
	send := func(ch byte, text string, raw []byte) error {
		if text == "" && len(raw) == 0 {
			return nil
		}
		c := &warrenv1.OutputChunk{Text: text, Base64: raw}
		if ch == session.ChanStderr {
			return stream.Send(&warrenv1.ExecStreamResponse{Event: &warrenv1.ExecStreamResponse_Stderr{Stderr: c}})
		}
		return stream.Send(&warrenv1.ExecStreamResponse{Event: &warrenv1.ExecStreamResponse_Stdout{Stdout: c}})
	}
	res, err := h.s.m.Exec(ctx, tenant(ctx), req.Msg.GetSessionId(), ereq, func(ch byte, p []byte) error {
		if ch != session.ChanStdout && ch != session.ChanStderr {
			return nil
		}
		text, raw := chunkers[ch].Next(p)
		return send(ch, text, raw)
	})
	if err != nil {
		return err
	}
	for _, ch := range []byte{session.ChanStdout, session.ChanStderr} {
		if err := send(ch, "", chunkers[ch].Flush()); err != nil {
			return err
		}
	}
	return stream.Send(&warrenv1.ExecStreamResponse{Event: &warrenv1.ExecStreamResponse_Exit{Exit: toExecResult(res)}})
}

func (h execs) Run(ctx context.Context, req *connect.Request[warrenv1.RunRequest]) (*connect.Response[warrenv1.ExecResult], error) {
	m := req.Msg
	res, err := h.s.m.Run(ctx, tenant(ctx), &session.RunRequest{
		Image:        m.GetImage(),
		Limits:       toLimits(m.GetLimits()),
		Exec:         *toExecRequest(m, stdinOf(m.GetInput())),
		Network:      m.GetNetwork(),
		NetworkAllow: m.GetNetworkAllow(),
		NetworkDeny:  m.GetNetworkDeny(),
	})
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(toExecResult(res)), nil
}
