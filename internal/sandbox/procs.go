package sandbox

import (
	"context"
	"io"

	"github.com/warrenhq/warren/internal/agentproto"
)

// StartProcess starts a durable process in the sandbox.
func (sb *Sandbox) StartProcess(ctx context.Context, req *agentproto.ProcStartRequest) (*agentproto.ProcInfo, error) {
	s, err := sb.conn.Call(agentproto.OpProcStart, req, nil)
	if err != nil {
		return nil, sb.callError(ctx, nil, err)
	}
	var info agentproto.ProcInfo
	if _, err := sb.result(ctx, s, &info); err != nil {
		return nil, err
	}
	return &info, nil
}

func (sb *Sandbox) procCall(ctx context.Context, op agentproto.Op, req *agentproto.ProcRequest) (*agentproto.ProcInfo, error) {
	s, err := sb.conn.Call(op, req, nil)
	if err != nil {
		return nil, sb.callError(ctx, nil, err)
	}
	var info agentproto.ProcInfo
	if _, err := sb.result(ctx, s, &info); err != nil {
		return nil, err
	}
	return &info, nil
}

// ListProcesses lists the sandbox's durable processes.
func (sb *Sandbox) ListProcesses(ctx context.Context) ([]agentproto.ProcInfo, error) {
	s, err := sb.conn.Call(agentproto.OpProcList, &agentproto.ProcRequest{}, nil)
	if err != nil {
		return nil, sb.callError(ctx, nil, err)
	}
	var list agentproto.ProcList
	if _, err := sb.result(ctx, s, &list); err != nil {
		return nil, err
	}
	return list.Processes, nil
}

// GetProcess describes one durable process.
func (sb *Sandbox) GetProcess(ctx context.Context, id string) (*agentproto.ProcInfo, error) {
	return sb.procCall(ctx, agentproto.OpProcGet, &agentproto.ProcRequest{ID: id})
}

// SignalProcess sends a signal to a process's group.
func (sb *Sandbox) SignalProcess(ctx context.Context, id string, sig int) error {
	_, err := sb.procCall(ctx, agentproto.OpProcSignal, &agentproto.ProcRequest{ID: id, Signal: sig})
	return err
}

// ResizeProcess sets the terminal size of a TTY process.
func (sb *Sandbox) ResizeProcess(ctx context.Context, id string, cols, rows int) error {
	_, err := sb.procCall(ctx, agentproto.OpProcResize, &agentproto.ProcRequest{ID: id, Cols: cols, Rows: rows})
	return err
}

// KillProcess kills a process and its group and forgets it.
func (sb *Sandbox) KillProcess(ctx context.Context, id string) error {
	_, err := sb.procCall(ctx, agentproto.OpProcKill, &agentproto.ProcRequest{ID: id})
	return err
}

// WriteStdin sends r to a process's stdin, and closes it after if eof.
func (sb *Sandbox) WriteStdin(ctx context.Context, id string, r io.Reader, eof bool) (int64, error) {
	s, err := sb.conn.Call(agentproto.OpProcStdin, &agentproto.ProcRequest{ID: id, EOF: eof}, nil)
	if err != nil {
		return 0, sb.callError(ctx, nil, err)
	}
	w := agentproto.NewDataWriter(ctx, s, agentproto.ChanData)
	if _, err := io.CopyBuffer(w, r, make([]byte, agentproto.MaxChunk)); err == nil {
		s.CloseWrite()
	} else if err != agentproto.ErrPeerDone {
		s.Cancel()
		return 0, err
	}
	var rep agentproto.StdinReply
	if _, err := sb.result(ctx, s, &rep); err != nil {
		return 0, err
	}
	return rep.Written, nil
}

// OutputEvent is one event of a process's output: Kind "output" (Data on
// channel Chan at Offset), "gap" (bytes [From, To) were dropped) or "exit".
type OutputEvent struct {
	Kind             string
	Offset           int64
	Chan             byte
	Data             []byte
	From, To         int64
	ExitCode, Signal int
}

// ProcessOutput streams a process's output from offset to fn, following new
// output until the process exits if follow is set. It returns the process's
// state at the end.
func (sb *Sandbox) ProcessOutput(ctx context.Context, id string, offset int64, follow bool, fn func(OutputEvent) error) (*agentproto.ProcInfo, error) {
	s, err := sb.conn.Call(agentproto.OpProcOutput, &agentproto.ProcRequest{ID: id, Offset: offset, Follow: follow}, nil)
	if err != nil {
		return nil, sb.callError(ctx, nil, err)
	}
	var off int64
	for {
		m, err := s.Recv(ctx)
		if err != nil {
			return nil, sb.callError(ctx, s, err)
		}
		switch m.Type {
		case agentproto.FrameEvent:
			var ev agentproto.ProcOutputEvent
			if _, err := agentproto.DecodeReply(m.Payload, &ev); err != nil {
				s.Cancel()
				return nil, err
			}
			switch ev.Kind {
			case "start":
				off = ev.Offset
			case "gap":
				off = ev.To
				if err := fn(OutputEvent{Kind: "gap", From: ev.From, To: ev.To}); err != nil {
					s.Cancel()
					return nil, err
				}
			case "exit":
				if err := fn(OutputEvent{Kind: "exit", ExitCode: ev.ExitCode, Signal: ev.Signal}); err != nil {
					s.Cancel()
					return nil, err
				}
			}
		case agentproto.FrameData:
			if err := fn(OutputEvent{Kind: "output", Offset: off, Chan: m.Chan, Data: m.Payload}); err != nil {
				s.Cancel()
				return nil, err
			}
			off += int64(len(m.Payload))
		case agentproto.FrameReply:
			var info agentproto.ProcInfo
			if _, err := agentproto.DecodeReply(m.Payload, &info); err != nil {
				return nil, err
			}
			return &info, nil
		case agentproto.FrameError:
			return nil, agentproto.DecodeError(m.Payload)
		}
	}
}
