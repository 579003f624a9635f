package grpcapi

import (
	"bytes"
	"context"

	"connectrpc.com/connect"

	warrenv1 "github.com/warrenhq/warren/api/gen/warren/v1"
	"github.com/warrenhq/warren/internal/session"
	"github.com/warrenhq/warren/internal/wire"
)

// processes serves warren.v1.ProcessService.
type processes struct{ s *Server }

func (h processes) StartProcess(ctx context.Context, req *connect.Request[warrenv1.StartProcessRequest]) (*connect.Response[warrenv1.StartProcessResponse], error) {
	m := req.Msg
	info, err := h.s.m.StartProcess(ctx, tenant(ctx), m.GetSessionId(), &session.StartProcessRequest{
		Command: m.GetCommand(), Argv: m.GetArgv(), Env: m.GetEnv(), Cwd: m.GetCwd(),
		TTY: m.GetTty(), Cols: int(m.GetCols()), Rows: int(m.GetRows()), Stdin: m.GetStdin(),
	})
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&warrenv1.StartProcessResponse{Process: toProcess(info)}), nil
}

func (h processes) ListProcesses(ctx context.Context, req *connect.Request[warrenv1.ListProcessesRequest]) (*connect.Response[warrenv1.ListProcessesResponse], error) {
	list, err := h.s.m.ListProcesses(ctx, tenant(ctx), req.Msg.GetSessionId())
	if err != nil {
		return nil, err
	}
	out := &warrenv1.ListProcessesResponse{Processes: make([]*warrenv1.Process, 0, len(list))}
	for i := range list {
		out.Processes = append(out.Processes, toProcess(&list[i]))
	}
	return connect.NewResponse(out), nil
}

func (h processes) GetProcess(ctx context.Context, req *connect.Request[warrenv1.GetProcessRequest]) (*connect.Response[warrenv1.GetProcessResponse], error) {
	info, err := h.s.m.GetProcess(ctx, tenant(ctx), req.Msg.GetSessionId(), req.Msg.GetProcessId())
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&warrenv1.GetProcessResponse{Process: toProcess(info)}), nil
}

// ProcessOutput streams output, gaps and the exit as REST's server-sent
// events do. Offsets are exact, so a chunk goes as it came: text when it is
// valid UTF-8, else raw bytes.
func (h processes) ProcessOutput(ctx context.Context, req *connect.Request[warrenv1.ProcessOutputRequest], stream *connect.ServerStream[warrenv1.ProcessOutputResponse]) error {
	m := req.Msg
	_, err := h.s.m.ProcessOutput(ctx, tenant(ctx), m.GetSessionId(), m.GetProcessId(), m.GetOffset(), m.GetFollow(), func(ev session.OutputEvent) error {
		switch ev.Kind {
		case "gap":
			return stream.Send(&warrenv1.ProcessOutputResponse{Event: &warrenv1.ProcessOutputResponse_Gap{
				Gap: &warrenv1.OutputGap{From: ev.From, To: ev.To}}})
		case "exit":
			ex := &warrenv1.ProcessExit{ExitCode: int32(ev.ExitCode)}
			if ev.Signal > 0 {
				ex.Signal = wire.SignalName(ev.Signal)
			}
			return stream.Send(&warrenv1.ProcessOutputResponse{Event: &warrenv1.ProcessOutputResponse_Exit{Exit: ex}})
		}
		offset := ev.Offset
		chunk := &warrenv1.OutputChunk{Offset: &offset, Stream: "stdout"}
		if ev.Chan == session.ChanStderr {
			chunk.Stream = "stderr"
		}
		chunk.Text, chunk.Base64 = wire.Text(ev.Data)
		if chunk.Base64 != nil {
			chunk.Text = ""
		}
		return stream.Send(&warrenv1.ProcessOutputResponse{Event: &warrenv1.ProcessOutputResponse_Output{Output: chunk}})
	})
	return err
}

func (h processes) WriteStdin(ctx context.Context, req *connect.Request[warrenv1.WriteStdinRequest]) (*connect.Response[warrenv1.WriteStdinResponse], error) {
	m := req.Msg
	n, err := h.s.m.WriteStdin(ctx, tenant(ctx), m.GetSessionId(), m.GetProcessId(), bytes.NewReader(m.GetData()), m.GetEof())
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&warrenv1.WriteStdinResponse{Written: n}), nil
}

func (h processes) SignalProcess(ctx context.Context, req *connect.Request[warrenv1.SignalProcessRequest]) (*connect.Response[warrenv1.SignalProcessResponse], error) {
	m := req.Msg
	sig, err := wire.ParseSignal(m.GetSignal())
	if err == nil {
		err = h.s.m.SignalProcess(ctx, tenant(ctx), m.GetSessionId(), m.GetProcessId(), sig)
	}
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&warrenv1.SignalProcessResponse{}), nil
}

func (h processes) ResizeProcess(ctx context.Context, req *connect.Request[warrenv1.ResizeProcessRequest]) (*connect.Response[warrenv1.ResizeProcessResponse], error) {
	m := req.Msg
	if err := h.s.m.ResizeProcess(ctx, tenant(ctx), m.GetSessionId(), m.GetProcessId(), int(m.GetCols()), int(m.GetRows())); err != nil {
		return nil, err
	}
	return connect.NewResponse(&warrenv1.ResizeProcessResponse{}), nil
}

func (h processes) KillProcess(ctx context.Context, req *connect.Request[warrenv1.KillProcessRequest]) (*connect.Response[warrenv1.KillProcessResponse], error) {
	if err := h.s.m.KillProcess(ctx, tenant(ctx), req.Msg.GetSessionId(), req.Msg.GetProcessId()); err != nil {
		return nil, err
	}
	return connect.NewResponse(&warrenv1.KillProcessResponse{}), nil
}
