package envd

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"path"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"connectrpc.com/connect"

	"github.com/warrenhq/warren/internal/e2b/envd/gen/process"
	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/session"
)

// processService implements process.Process over warren's durable
// processes.
type processService struct{ s *Server }

// keepaliveHeader is how often, in seconds, the client wants a keepalive
// event on an idle stream (E2B's SDKs ask for 50).
const keepaliveHeader = "Keepalive-Ping-Interval"

// keepaliveEvery reads keepaliveHeader, bounded to [1s, 5min].
func keepaliveEvery(h http.Header) time.Duration {
	n, err := strconv.Atoi(h.Get(keepaliveHeader))
	if err != nil || n <= 0 {
		return 50 * time.Second
	}
	return time.Duration(min(n, 300)) * time.Second
}

func (p *processService) Start(ctx context.Context, req *connect.Request[process.StartRequest], stream *connect.ServerStream[process.StartResponse]) error {
	s := p.s
	t, err := target(ctx)
	if err != nil {
		return err
	}
	user, err := userOf(t, req.Header())
	if err != nil {
		return s.rpcErr(ctx, t, err)
	}
	cfg := req.Msg.GetProcess()
	if cfg.GetCmd() == "" {
		return connect.NewError(connect.CodeInvalidArgument, errors.New("process.cmd is required"))
	}
	argv := append([]string{cfg.Cmd}, cfg.Args...)
	env := cfg.Envs
	cwd := cfg.GetCwd()
	if !path.IsAbs(cwd) {
		// E2B runs commands in the user's home, and resolves a relative
		// cwd there.
		home, err := s.home(ctx, t, user)
		if err != nil {
			return s.rpcErr(ctx, t, err)
		}
		cwd = path.Join(home, strings.TrimPrefix(strings.TrimPrefix(cwd, "~"), "/"))
	}
	sreq := &session.StartProcessRequest{Argv: argv, Env: env, Cwd: cwd, Stdin: req.Msg.Stdin == nil || req.Msg.GetStdin()}
	if user != defaultUser(t) {
		// The agent starts the process as that user of the image (root
		// included), its HOME, USER and LOGNAME with it: E2B's
		// commands.run(cmd, {user: 'root'}) works in a sandbox whose own
		// user is "user", as in E2B, with no sudo (which no_new_privs
		// would stop anyway).
		sreq.User = user
	}
	if pty := req.Msg.GetPty(); pty != nil {
		sreq.TTY, sreq.Stdin = true, true
		sreq.Cols, sreq.Rows = int(pty.GetSize().GetCols()), int(pty.GetSize().GetRows())
		if sreq.Cols == 0 || sreq.Rows == 0 {
			sreq.Cols, sreq.Rows = 80, 24
		}
	}
	info, err := s.mgr.StartProcess(ctx, t.Tenant, t.Session, sreq)
	if err != nil {
		return s.rpcErr(ctx, t, err)
	}
	ps := s.state(t).register(info.ID, info.Pid, cfg, req.Msg.GetTag())
	send := func(ev *process.ProcessEvent) error { return stream.Send(&process.StartResponse{Event: ev}) }
	return s.follow(ctx, t, ps, 0, info.TTY, keepaliveEvery(req.Header()), send)
}

func (p *processService) Connect(ctx context.Context, req *connect.Request[process.ConnectRequest], stream *connect.ServerStream[process.ConnectResponse]) error {
	s := p.s
	t, err := target(ctx)
	if err != nil {
		return err
	}
	ps, info, err := s.running(ctx, t, req.Msg.GetProcess())
	if err != nil {
		return s.rpcErr(ctx, t, err)
	}
	send := func(ev *process.ProcessEvent) error { return stream.Send(&process.ConnectResponse{Event: ev}) }
	// As E2B's envd, a connection sees the output from now on.
	return s.follow(ctx, t, ps, info.OutputBytes, info.TTY, keepaliveEvery(req.Header()), send)
}

// follow sends a process's start event, its output from offset and its
// end, with keepalives while it is quiet. The process outlives the stream:
// a client that goes away leaves it running, as E2B's background commands
// expect; only a deadline the client set (timeoutMs) kills it, as E2B's
// envd does.
func (s *Server) follow(ctx context.Context, t Target, ps *procState, offset int64, tty bool, every time.Duration, send func(*process.ProcessEvent) error) error {
	var mu sync.Mutex
	sendLocked := func(ev *process.ProcessEvent) error {
		mu.Lock()
		defer mu.Unlock()
		return send(ev)
	}
	if err := sendLocked(&process.ProcessEvent{Event: &process.ProcessEvent_Start{Start: &process.ProcessEvent_StartEvent{Pid: ps.pid}}}); err != nil {
		return err
	}
	kctx, stop := context.WithCancel(ctx)
	defer stop()
	go func() {
		tick := time.NewTicker(every)
		defer tick.Stop()
		for {
			select {
			case <-kctx.Done():
				return
			case <-tick.C:
				if sendLocked(&process.ProcessEvent{Event: &process.ProcessEvent_Keepalive{Keepalive: &process.ProcessEvent_KeepAlive{}}}) != nil {
					return
				}
			}
		}
	}()
	info, err := s.mgr.ProcessOutput(ctx, t.Tenant, t.Session, ps.id, offset, true, func(ev session.OutputEvent) error {
		if ev.Kind != "output" || len(ev.Data) == 0 {
			return nil
		}
		d := &process.ProcessEvent_DataEvent{}
		switch {
		case tty:
			d.Output = &process.ProcessEvent_DataEvent_Pty{Pty: ev.Data}
		case ev.Chan == session.ChanStderr:
			d.Output = &process.ProcessEvent_DataEvent_Stderr{Stderr: ev.Data}
		default:
			d.Output = &process.ProcessEvent_DataEvent_Stdout{Stdout: ev.Data}
		}
		return sendLocked(&process.ProcessEvent{Event: &process.ProcessEvent_Data{Data: d}})
	})
	stop()
	if err != nil {
		// The client's deadline (Connect-Timeout-Ms): the request may end
		// by the client's own timer closing the connection a moment
		// before the server's fires, so the clock decides.
		if d, ok := ctx.Deadline(); ok && ctx.Err() != nil && time.Until(d) < 250*time.Millisecond {
			// The command's own timeout: it ends with its stream.
			kctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			_ = s.mgr.SignalProcess(kctx, t.Tenant, t.Session, ps.id, int(syscall.SIGKILL)) // it may have ended meanwhile
			cancel()
			return connect.NewError(connect.CodeDeadlineExceeded, errors.New("the command's timeout passed; it was killed"))
		}
		if ctx.Err() != nil {
			return s.rpcErr(ctx, t, ctx.Err())
		}
		if s.gone(ctx, t) {
			// The sandbox died under the stream. E2B's SDKs tell that from
			// a network failure by a stream cut short followed by /health
			// answering 502, and then say so ("the sandbox was killed");
			// an error at the end of the stream would read as a missing
			// process. Abort the response.
			panic(http.ErrAbortHandler)
		}
		return s.rpcErr(ctx, t, err)
	}
	return sendLocked(&process.ProcessEvent{Event: &process.ProcessEvent_End{End: endEvent(info)}})
}

// endEvent describes how a process ended, in the words of Go's
// os.ProcessState, as E2B's envd reports it.
func endEvent(info *session.ProcessInfo) *process.ProcessEvent_EndEvent {
	if info.Signal != 0 {
		status := "signal: " + syscall.Signal(info.Signal).String()
		return &process.ProcessEvent_EndEvent{ExitCode: -1, Status: status, Error: &status}
	}
	status := fmt.Sprintf("exit status %d", info.ExitCode)
	end := &process.ProcessEvent_EndEvent{ExitCode: int32(info.ExitCode), Exited: true, Status: status}
	if info.ExitCode != 0 {
		end.Error = &status
	}
	return end
}

// running finds a running process by selector. A process that has ended is
// not found, as in E2B's envd, though warren keeps its output.
func (s *Server) running(ctx context.Context, t Target, sel *process.ProcessSelector) (*procState, *session.ProcessInfo, error) {
	st := s.state(t)
	ps, err := st.lookup(sel)
	if err != nil {
		// A process started through warren's own API gets its pid here.
		if _, ok := sel.GetSelector().(*process.ProcessSelector_Pid); ok {
			if _, lerr := s.list(ctx, t); lerr != nil {
				return nil, nil, lerr
			}
			ps, err = st.lookup(sel)
		}
		if err != nil {
			return nil, nil, err
		}
	}
	info, err := s.mgr.GetProcess(ctx, t.Tenant, t.Session, ps.id)
	if err != nil {
		if errdefs.Is(err, errdefs.ErrNotFound) {
			st.forget(ps.id)
		}
		return nil, nil, err
	}
	if !info.Running {
		return nil, nil, errdefs.New(errdefs.ErrNotFound, "process with pid %d has ended", ps.pid)
	}
	return ps, info, nil
}

// list registers and returns the session's running processes.
func (s *Server) list(ctx context.Context, t Target) ([]*process.ProcessInfo, error) {
	infos, err := s.mgr.ListProcesses(ctx, t.Tenant, t.Session)
	if err != nil {
		return nil, err
	}
	st := s.state(t)
	seen := map[string]bool{}
	var out []*process.ProcessInfo
	for i := range infos {
		info := &infos[i]
		seen[info.ID] = true
		if !info.Running {
			continue
		}
		ps := st.register(info.ID, info.Pid, nil, "")
		cfg := ps.config
		if cfg == nil {
			// Started through warren's own API: its argv, or its shell
			// command as sh -c runs it.
			cfg = &process.ProcessConfig{Cmd: "/bin/sh", Args: []string{"-c", info.Command}}
			if len(info.Argv) > 0 {
				cfg = &process.ProcessConfig{Cmd: info.Argv[0], Args: info.Argv[1:]}
			}
		}
		pi := &process.ProcessInfo{Config: cfg, Pid: ps.pid}
		if ps.tag != "" {
			pi.Tag = &ps.tag
		}
		out = append(out, pi)
	}
	// Processes warren no longer has are forgotten here too.
	st.mu.Lock()
	var gone []string
	for id := range st.procs {
		if !seen[id] {
			gone = append(gone, id)
		}
	}
	st.mu.Unlock()
	for _, id := range gone {
		st.forget(id)
	}
	return out, nil
}

func (p *processService) List(ctx context.Context, req *connect.Request[process.ListRequest]) (*connect.Response[process.ListResponse], error) {
	t, err := target(ctx)
	if err != nil {
		return nil, err
	}
	procs, err := p.s.list(ctx, t)
	if err != nil {
		return nil, p.s.rpcErr(ctx, t, err)
	}
	return connect.NewResponse(&process.ListResponse{Processes: procs}), nil
}

func (p *processService) Update(ctx context.Context, req *connect.Request[process.UpdateRequest]) (*connect.Response[process.UpdateResponse], error) {
	s := p.s
	t, err := target(ctx)
	if err != nil {
		return nil, err
	}
	ps, info, err := s.running(ctx, t, req.Msg.GetProcess())
	if err != nil {
		return nil, s.rpcErr(ctx, t, err)
	}
	if size := req.Msg.GetPty().GetSize(); size != nil {
		if !info.TTY {
			return nil, connect.NewError(connect.CodeFailedPrecondition, fmt.Errorf("process with pid %d has no PTY", ps.pid))
		}
		if err := s.mgr.ResizeProcess(ctx, t.Tenant, t.Session, ps.id, int(size.GetCols()), int(size.GetRows())); err != nil {
			return nil, s.rpcErr(ctx, t, err)
		}
	}
	return connect.NewResponse(&process.UpdateResponse{}), nil
}

// input writes one ProcessInput to a process.
func (s *Server) input(ctx context.Context, t Target, ps *procState, info *session.ProcessInfo, in *process.ProcessInput) error {
	var data []byte
	switch v := in.GetInput().(type) {
	case *process.ProcessInput_Stdin:
		data = v.Stdin
	case *process.ProcessInput_Pty:
		if !info.TTY {
			return errdefs.New(errdefs.ErrInvalidArgument, "process with pid %d has no PTY", ps.pid)
		}
		data = v.Pty
	default:
		return errdefs.New(errdefs.ErrInvalidArgument, "input (stdin or pty) is required")
	}
	if len(data) == 0 {
		return nil
	}
	_, err := s.mgr.WriteStdin(ctx, t.Tenant, t.Session, ps.id, bytes.NewReader(data), false)
	return err
}

func (p *processService) SendInput(ctx context.Context, req *connect.Request[process.SendInputRequest]) (*connect.Response[process.SendInputResponse], error) {
	s := p.s
	t, err := target(ctx)
	if err != nil {
		return nil, err
	}
	ps, info, err := s.running(ctx, t, req.Msg.GetProcess())
	if err == nil {
		err = s.input(ctx, t, ps, info, req.Msg.GetInput())
	}
	if err != nil {
		return nil, s.rpcErr(ctx, t, err)
	}
	return connect.NewResponse(&process.SendInputResponse{}), nil
}

func (p *processService) StreamInput(ctx context.Context, stream *connect.ClientStream[process.StreamInputRequest]) (*connect.Response[process.StreamInputResponse], error) {
	s := p.s
	t, err := target(ctx)
	if err != nil {
		return nil, err
	}
	var ps *procState
	var info *session.ProcessInfo
	for stream.Receive() {
		switch ev := stream.Msg().GetEvent().(type) {
		case *process.StreamInputRequest_Start:
			if ps, info, err = s.running(ctx, t, ev.Start.GetProcess()); err != nil {
				return nil, s.rpcErr(ctx, t, err)
			}
		case *process.StreamInputRequest_Data:
			if ps == nil {
				return nil, connect.NewError(connect.CodeInvalidArgument, errors.New("the stream must start with a start event naming the process"))
			}
			if err := s.input(ctx, t, ps, info, ev.Data.GetInput()); err != nil {
				return nil, s.rpcErr(ctx, t, err)
			}
		}
	}
	if err := stream.Err(); err != nil {
		return nil, s.rpcErr(ctx, t, err)
	}
	return connect.NewResponse(&process.StreamInputResponse{}), nil
}

func (p *processService) SendSignal(ctx context.Context, req *connect.Request[process.SendSignalRequest]) (*connect.Response[process.SendSignalResponse], error) {
	s := p.s
	t, err := target(ctx)
	if err != nil {
		return nil, err
	}
	sig := syscall.Signal(req.Msg.GetSignal())
	if sig != syscall.SIGKILL && sig != syscall.SIGTERM {
		return nil, connect.NewError(connect.CodeInvalidArgument, errors.New("signal must be SIGNAL_SIGKILL or SIGNAL_SIGTERM"))
	}
	ps, _, err := s.running(ctx, t, req.Msg.GetProcess())
	if err == nil {
		err = s.mgr.SignalProcess(ctx, t.Tenant, t.Session, ps.id, int(sig))
	}
	if err != nil {
		return nil, s.rpcErr(ctx, t, err)
	}
	return connect.NewResponse(&process.SendSignalResponse{}), nil
}

func (p *processService) CloseStdin(ctx context.Context, req *connect.Request[process.CloseStdinRequest]) (*connect.Response[process.CloseStdinResponse], error) {
	s := p.s
	t, err := target(ctx)
	if err != nil {
		return nil, err
	}
	ps, info, err := s.running(ctx, t, req.Msg.GetProcess())
	if err == nil && info.TTY {
		err = errdefs.New(errdefs.ErrInvalidArgument, "process with pid %d has a PTY: send Ctrl-D (0x04) instead of closing stdin", ps.pid)
	}
	if err == nil {
		_, err = s.mgr.WriteStdin(ctx, t.Tenant, t.Session, ps.id, bytes.NewReader(nil), true)
	}
	if err != nil {
		return nil, s.rpcErr(ctx, t, err)
	}
	return connect.NewResponse(&process.CloseStdinResponse{}), nil
}
