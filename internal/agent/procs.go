package agent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/creack/pty"
	"golang.org/x/sys/unix"

	"github.com/warrenhq/warren/internal/agentproto"
	"github.com/warrenhq/warren/internal/errdefs"
)

// Durable processes: commands the agent runs on their own, whose output it
// keeps in a bounded log that clients read by offset. A process keeps running
// and keeps its output whatever happens to the connections that started or
// watch it.
const (
	// procLogBytes is how much output each process keeps: the last MiB.
	procLogBytes = 1 << 20
	// maxProcs bounds the processes a session keeps (running or exited);
	// the oldest exited ones make room.
	maxProcs = 64
	// maxPTYs bounds the running processes on a terminal.
	maxPTYs = 16
)

type proc struct {
	id      string
	command string
	argv    []string
	tty     bool
	pid     int
	started time.Time
	log     *outLog

	// stdinTurn serializes writes to stdin (a token, taken to write):
	// a channel, not a mutex, so that waiting for the turn is bounded.
	stdinTurn chan struct{}
	stdin     *os.File // nil when the process has no stdin
	master    *os.File // the terminal's master side, for TTY processes

	mu     sync.Mutex // guards the fields below
	exited bool
	ws     unix.WaitStatus
	ended  time.Time
	done   chan struct{} // closed when exited and its output drained
}

func (p *proc) info() agentproto.ProcInfo {
	start, total := p.log.bounds()
	p.mu.Lock()
	defer p.mu.Unlock()
	in := agentproto.ProcInfo{
		ID: p.id, Command: p.command, Argv: p.argv, TTY: p.tty, Running: !p.exited,
		Pid: p.pid, StartedAt: p.started.UTC(), OutputBytes: total, OutputStart: start,
	}
	if p.exited {
		in.ExitCode = waitCode(p.ws)
		if p.ws.Signaled() {
			in.Signal = int(p.ws.Signal())
		}
		end := p.ended.UTC()
		in.EndedAt = &end
	}
	return in
}

// procTable holds a session's durable processes.
type procTable struct {
	mu    sync.Mutex // guards the fields below
	procs []*proc    // in start order
	next  int
}

func (t *procTable) get(id string) (*proc, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, p := range t.procs {
		if p.id == id {
			return p, nil
		}
	}
	return nil, errdefs.New(errdefs.ErrNotFound, "process %q not found", id)
}

// reserve makes room for one more process and names it.
func (t *procTable) reserve(tty bool) (string, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	ptys := 0
	for _, p := range t.procs {
		p.mu.Lock()
		if p.tty && !p.exited {
			ptys++
		}
		p.mu.Unlock()
	}
	if tty && ptys >= maxPTYs {
		return "", errdefs.New(errdefs.ErrResourceExhausted, "the session has %d terminals running, the most it may", maxPTYs)
	}
	for len(t.procs) >= maxProcs {
		i := slices.IndexFunc(t.procs, func(p *proc) bool {
			p.mu.Lock()
			defer p.mu.Unlock()
			return p.exited
		})
		if i < 0 {
			return "", errdefs.New(errdefs.ErrResourceExhausted, "the session has %d processes running, the most it may", maxProcs)
		}
		t.procs = slices.Delete(t.procs, i, i+1)
	}
	t.next++
	return "p" + strconv.Itoa(t.next), nil
}

func (t *procTable) add(p *proc) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.procs = append(t.procs, p)
}

func (t *procTable) remove(id string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.procs = slices.DeleteFunc(t.procs, func(p *proc) bool { return p.id == id })
}

func (t *procTable) list() []agentproto.ProcInfo {
	t.mu.Lock()
	procs := slices.Clone(t.procs)
	t.mu.Unlock()
	out := make([]agentproto.ProcInfo, 0, len(procs))
	for _, p := range procs {
		out = append(out, p.info())
	}
	return out
}

// startProc starts a durable process in the shell's current cwd and
// exported environment.
func (a *Agent) startProc(req *agentproto.ProcStartRequest) (*proc, error) {
	hasCmd, hasArgv := req.Command != "", len(req.Argv) > 0
	if hasCmd == hasArgv && !req.Login {
		return nil, errdefs.New(errdefs.ErrInvalidArgument, "give either command or argv")
	}
	id, err := a.procs.reserve(req.TTY)
	if err != nil {
		return nil, err
	}
	cwd, env := a.shell.snapshot()
	if req.Cwd != "" {
		cwd = req.Cwd
		// Checked here so that a missing directory is the caller's
		// mistake, named, rather than the spawn's ENOENT.
		if fi, err := os.Stat(cwd); err != nil || !fi.IsDir() {
			return nil, errdefs.New(errdefs.ErrInvalidArgument, "cwd %q is not a directory in the session", cwd)
		}
	}
	owner := a.owner
	var cred *syscall.Credential
	if req.User != "" {
		acct, err := a.processAccount(req.User)
		if err != nil {
			return nil, err
		}
		cred, owner = acct.credential(), acct
		env = acct.env(env)
	}
	env = mergeEnv(env, req.Env)
	if req.TTY {
		env = mergeEnv(env, map[string]string{"TERM": "xterm-256color"})
	}
	var argv []string
	switch {
	case req.Login:
		argv = []string{a.shell.path, "-l"}
	case hasCmd:
		argv = []string{a.shell.path, "-c", req.Command}
	default:
		path, err := lookPath(req.Argv[0], env, cwd)
		if err != nil {
			return nil, errdefs.New(errdefs.ErrInvalidArgument, "%v", err)
		}
		argv = append([]string{path}, req.Argv[1:]...)
	}
	p := &proc{id: id, command: req.Command, argv: req.Argv, tty: req.TTY, log: newOutLog(procLogBytes), done: make(chan struct{}),
		stdinTurn: make(chan struct{}, 1)}
	if req.Login {
		p.command = argv[0] + " -l"
	}
	sreq := &spawnReq{argv: argv, env: env, dir: cwd, setsid: true, cred: cred}
	var readers []*os.File
	var closeAfter []*os.File
	if req.TTY {
		master, slave, err := pty.Open()
		if err != nil {
			return nil, fmt.Errorf("open a terminal: %w", err)
		}
		cols, rows := req.Cols, req.Rows
		if cols <= 0 || rows <= 0 {
			cols, rows = 80, 24
		}
		// A terminal whose size could not be set keeps the kernel's
		// default; a resize can set it later.
		_ = pty.Setsize(master, &pty.Winsize{Cols: uint16(cols), Rows: uint16(rows)})
		if master, err = pollable(master); err != nil {
			slave.Close()
			return nil, fmt.Errorf("open a terminal: %w", err)
		}
		sreq.files = []uintptr{slave.Fd(), slave.Fd(), slave.Fd()}
		sreq.setctty = true
		p.master, p.stdin = master, master
		readers = []*os.File{master}
		closeAfter = []*os.File{slave}
		if owner != nil {
			// Best effort: the process runs on the terminal either way.
			_ = os.Chown(slave.Name(), int(owner.uid), int(owner.gid))
		}
	} else {
		outR, outW, err := os.Pipe()
		if err != nil {
			return nil, err
		}
		errR, errW, err := os.Pipe()
		if err != nil {
			outR.Close()
			outW.Close()
			return nil, err
		}
		var in *os.File
		if req.Stdin {
			var inW *os.File
			in, inW, err = os.Pipe()
			if err == nil {
				p.stdin = inW
			}
		} else {
			in, err = os.Open(os.DevNull)
		}
		if err != nil {
			outR.Close()
			outW.Close()
			errR.Close()
			errW.Close()
			return nil, err
		}
		sreq.files = []uintptr{in.Fd(), outW.Fd(), errW.Fd()}
		readers = []*os.File{outR, errR}
		closeAfter = []*os.File{in, outW, errW}
	}
	pid, exit, err := a.spawner.start(sreq)
	for _, f := range closeAfter {
		f.Close()
	}
	if err != nil {
		for _, f := range readers {
			f.Close()
		}
		if p.stdin != nil && p.stdin != p.master {
			p.stdin.Close()
		}
		if isEAGAIN(err) {
			return nil, errdefs.New(errdefs.ErrResourceExhausted, "%v", err)
		}
		if errors.Is(err, unix.E2BIG) {
			return nil, errdefs.New(errdefs.ErrTooLarge, "%v", err)
		}
		return nil, err
	}
	p.pid, p.started = pid, time.Now()
	a.procs.add(p)
	// Output goes into the log as it comes, never waiting for a reader.
	var wg sync.WaitGroup
	for i, r := range readers {
		ch := agentproto.ChanStdout
		if i == 1 {
			ch = agentproto.ChanStderr
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]byte, 32<<10)
			for {
				n, err := r.Read(buf)
				p.log.write(ch, buf[:n])
				if err != nil {
					// EIO on a terminal whose every slave is closed.
					r.Close()
					return
				}
			}
		}()
	}
	go func() {
		ws := <-exit
		p.mu.Lock()
		p.exited, p.ws, p.ended = true, ws, time.Now()
		p.mu.Unlock()
		// Output still in the pipes arrives before the log closes; a
		// descendant holding them open may write on afterwards.
		drained := make(chan struct{})
		go func() { wg.Wait(); close(drained) }()
		select {
		case <-drained:
		case <-time.After(100 * time.Millisecond):
		}
		p.log.close()
		close(p.done)
	}()
	return p, nil
}

// streamOutput sends a process's output from offset on: Event "start", Data
// on the output's channels, "gap" events for bytes dropped before they could
// be sent, and "exit" once the process ended and everything kept was sent.
func (a *Agent) streamOutput(ctx context.Context, s *agentproto.Stream, p *proc, req *agentproto.ProcRequest) error {
	off := req.Offset
	if off < 0 {
		_, total := p.log.bounds()
		off = max(0, total+off) // negative: that many bytes back from the end
	}
	started := false
	for {
		chunks, gapTo, closed, wake := p.log.read(off, 256<<10)
		if !started {
			if err := s.Event(agentproto.ProcOutputEvent{Kind: "start", Offset: off}); err != nil {
				return err
			}
			started = true
		}
		if gapTo > 0 {
			if err := s.Event(agentproto.ProcOutputEvent{Kind: "gap", From: off, To: gapTo}); err != nil {
				return err
			}
		}
		if gapTo > 0 {
			off = gapTo
		}
		for _, c := range chunks {
			if err := s.WriteData(ctx, c.ch, c.data); err != nil {
				return err
			}
			off = c.off + int64(len(c.data))
		}
		if len(chunks) > 0 {
			continue // more may be there already
		}
		if closed {
			info := p.info()
			return s.Event(agentproto.ProcOutputEvent{Kind: "exit", ExitCode: info.ExitCode, Signal: info.Signal})
		}
		if !req.Follow {
			return nil
		}
		select {
		case <-wake:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// pollable returns f's descriptor as a non-blocking file in the runtime's
// poller, so reads and writes take deadlines (pty.Open hands back a
// blocking one: it calls Fd). f is closed. Such a file must never have Fd
// called on it, which would make it blocking again: see setSize.
func pollable(f *os.File) (*os.File, error) {
	fd, err := unix.FcntlInt(f.Fd(), unix.F_DUPFD_CLOEXEC, 0)
	f.Close()
	if err != nil {
		return nil, err
	}
	if err := unix.SetNonblock(fd, true); err != nil {
		unix.Close(fd)
		return nil, err
	}
	return os.NewFile(uintptr(fd), f.Name()), nil
}

// setSize sets the window size of the terminal whose master is f, without
// f.Fd() (see pollable).
func setSize(f *os.File, cols, rows int) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var ierr error
	if err := rc.Control(func(fd uintptr) {
		ierr = unix.IoctlSetWinsize(int(fd), unix.TIOCSWINSZ, &unix.Winsize{Col: uint16(cols), Row: uint16(rows)})
	}); err != nil {
		return err
	}
	return ierr
}

// stdinStall is how long a write to a process's stdin may wait for the
// process to read.
const stdinStall = 10 * time.Second

// stallWriter gives every write stdinStall to go through.
type stallWriter struct{ f *os.File }

func (w stallWriter) Write(b []byte) (int, error) {
	w.f.SetWriteDeadline(time.Now().Add(stdinStall))
	return w.f.Write(b)
}

// writeStdin copies the stream's data to the process's stdin.
func (p *proc) writeStdin(ctx context.Context, s *agentproto.Stream, eof bool) (int64, error) {
	if p.stdin == nil {
		return 0, errdefs.New(errdefs.ErrInvalidArgument, "process %s has no stdin; start it with stdin or tty", p.id)
	}
	// Behind a write that is waiting for a process that does not read,
	// the wait for the turn is bounded like the write itself, or a
	// queue of callers would wait a stall each.
	turn := time.NewTimer(stdinStall)
	select {
	case p.stdinTurn <- struct{}{}:
		turn.Stop()
	case <-turn.C:
		return 0, errdefs.New(errdefs.ErrConflict, "another write to the stdin of process %s has waited %v for the process to read; try again later", p.id, stdinStall)
	case <-ctx.Done():
		turn.Stop()
		return 0, ctx.Err()
	}
	defer func() { <-p.stdinTurn }()
	// A process that stopped reading (a full terminal input queue or
	// pipe) would hold this call, and every later one, for good: each
	// write gets stdinStall to make progress, and a caller that leaves
	// ends the wait at once. Both descriptors (the terminal's master and
	// the pipe) are in the runtime's poller, so deadlines work on them.
	stop := context.AfterFunc(ctx, func() { p.stdin.SetWriteDeadline(time.Unix(1, 0)) })
	n, err := io.Copy(stallWriter{p.stdin}, agentproto.NewDataReader(ctx, s))
	stop()
	p.stdin.SetWriteDeadline(time.Time{})
	if errors.Is(err, os.ErrDeadlineExceeded) {
		if ctx.Err() != nil {
			return n, ctx.Err()
		}
		return n, errdefs.New(errdefs.ErrConflict, "process %s has not read its stdin for %v (%d bytes were written); the rest was not sent", p.id, stdinStall, n)
	}
	if err != nil {
		return n, errdefs.New(errdefs.ErrConflict, "write to the stdin of process %s: %v", p.id, err)
	}
	if eof {
		if p.tty {
			// A terminal has no close: send the EOF character.
			_, err = p.stdin.Write([]byte{4})
		} else {
			err = p.stdin.Close()
		}
		// A second EOF, or one after the process ended: the caller's
		// race with its own earlier call or the process, not a fault.
		if errors.Is(err, os.ErrClosed) {
			return n, errdefs.New(errdefs.ErrConflict, "the stdin of process %s is already closed", p.id)
		}
		if err != nil {
			return n, errdefs.New(errdefs.ErrConflict, "close the stdin of process %s: %v", p.id, err)
		}
	}
	return n, nil
}

// kill ends the process and its group, and what it started since.
func (a *Agent) killProc(p *proc) {
	unix.Kill(-p.pid, unix.SIGKILL)
	killStarted(a.reaper, p.pid, p.pid, true)
	select {
	case <-p.done:
	case <-time.After(5 * time.Second):
	}
	if p.stdin != nil {
		p.stdin.Close()
	}
}

// procOp serves the durable-process operations.
func (a *Agent) procOp(ctx context.Context, s *agentproto.Stream, op agentproto.Op, req *agentproto.ProcRequest) {
	if op == agentproto.OpProcList {
		s.Reply(agentproto.ProcList{Processes: a.procs.list()}, nil)
		return
	}
	p, err := a.procs.get(req.ID)
	if err != nil {
		s.Fail(err)
		return
	}
	switch op {
	case agentproto.OpProcGet:
		s.Reply(p.info(), nil)
	case agentproto.OpProcOutput:
		if err := a.streamOutput(ctx, s, p, req); err != nil {
			s.Fail(err)
			return
		}
		s.Reply(p.info(), nil)
	case agentproto.OpProcStdin:
		n, err := p.writeStdin(ctx, s, req.EOF)
		if err != nil {
			s.Fail(err)
			return
		}
		s.Reply(agentproto.StdinReply{Written: n}, nil)
	case agentproto.OpProcSignal:
		if req.Signal <= 0 || req.Signal > 64 {
			s.Fail(errdefs.New(errdefs.ErrInvalidArgument, "signal %d is not a signal", req.Signal))
			return
		}
		if err := unix.Kill(-p.pid, unix.Signal(req.Signal)); err != nil && err != unix.ESRCH {
			s.Fail(err)
			return
		}
		s.Reply(p.info(), nil)
	case agentproto.OpProcResize:
		if p.master == nil {
			s.Fail(errdefs.New(errdefs.ErrInvalidArgument, "process %s has no terminal", p.id))
			return
		}
		if req.Cols <= 0 || req.Rows <= 0 || req.Cols > 10000 || req.Rows > 10000 {
			s.Fail(errdefs.New(errdefs.ErrInvalidArgument, "a terminal size must be between 1x1 and 10000x10000"))
			return
		}
		if err := setSize(p.master, req.Cols, req.Rows); err != nil {
			// The terminal closes once the process has exited and
			// its output drained: resizing it then is the caller's
			// race, not a fault.
			if errors.Is(err, os.ErrClosed) || !p.info().Running {
				err = errdefs.New(errdefs.ErrConflict, "process %s has exited; its terminal is gone", p.id)
			}
			s.Fail(err)
			return
		}
		s.Reply(p.info(), nil)
	case agentproto.OpProcKill:
		a.killProc(p)
		a.procs.remove(p.id)
		s.Reply(p.info(), nil)
	}
}
