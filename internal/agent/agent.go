// Package agent is warren's PID 1 inside every sandbox (`warren agent`). It
// reaps every process, keeps the session's persistent shell, runs commands,
// serves file operations inside the sandbox's own mount namespace (so paths
// and symlinks resolve in the sandbox and can never reach the host), and
// answers the daemon over the control socket the daemon bound on the host
// side. Sandboxed code cannot reach that socket: the agent is not dumpable and
// marks every inherited descriptor close-on-exec.
//
// The agent runs with the sandbox's reduced privileges. It must stay small:
// no net/http, no database, no goroutines at package init.
package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/warrenhq/warren/internal/agentproto"
	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/spec"
)

// Agent is the state of one sandbox's PID 1.
type Agent struct {
	spec    *spec.Sandbox
	reaper  *reaper
	spawner *spawner
	shell   *shell
	bg      *ring
	// owner, when sandboxed code is not root, gets the files the agent
	// writes on the file API's behalf.
	owner *account
	// startErr fails the daemon's hello: the sandbox cannot serve.
	startErr error
	procs    procTable

	startOnce sync.Once
}

// Main runs the agent. It returns only on a fatal error.
func Main() {
	// Not dumpable: no sandboxed process may open /proc/1/fd, /proc/1/mem
	// or ptrace the agent, even with the same uid.
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		fmt.Fprintf(os.Stderr, "warren agent: make the agent undumpable: %v\n", err)
		os.Exit(1)
	}
	//lint:ignore SA4023 run returns only when the agent cannot go on, always with the reason.
	if err := run(); err != nil {
		fmt.Fprintf(os.Stderr, "warren agent: %v\n", err)
		os.Exit(1)
	}
}

func run() error {
	s, err := spec.Read()
	if err != nil {
		return err
	}
	// The spec names host paths; once read it goes, so nothing (not even
	// the file API, which runs as this process) can read it back.
	unix.Close(spec.FDSpec)
	// Nothing inherited may reach a sandboxed process: the binary's own
	// descriptor (a dynamically linked agent) goes, and everything else
	// becomes close-on-exec.
	unix.Close(spec.FDExe)
	if err := unix.CloseRange(spec.FDSpec, ^uint(0), unix.CLOSE_RANGE_CLOEXEC); err != nil {
		for fd := spec.FDSpec; fd <= s.LastFD(); fd++ {
			_, _ = unix.FcntlInt(uintptr(fd), unix.F_SETFD, unix.FD_CLOEXEC)
		}
		// Kept open: the daemon rewrites the sandbox's /proc/meminfo and
		// /proc/stat through them (see spec.FDMeminfo).
		_, _ = unix.FcntlInt(spec.FDMeminfo, unix.F_SETFD, unix.FD_CLOEXEC)
		_, _ = unix.FcntlInt(spec.FDStat, unix.F_SETFD, unix.FD_CLOEXEC)
	}
	ignoreSignals()
	if err := catchFatalDefaults(); err != nil {
		return fmt.Errorf("catch signals: %w", err)
	}
	if err := filterQueuedFaults(); err != nil {
		return fmt.Errorf("filter queued fault signals: %w", err)
	}
	a := &Agent{spec: s, reaper: newReaper(), bg: newRing(s.BackgroundLogBytes)}
	env := s.Env
	var runAs *syscall.Credential
	if s.RunAs != nil {
		runAs = &syscall.Credential{Uid: s.RunAs.HostID, Gid: s.RunAs.HostID, Groups: []uint32{}}
		a.owner = &account{uid: s.RunAs.HostID, gid: s.RunAs.HostID}
	}
	if s.User != "" {
		// A bad user fails the hello, so the create reports it.
		acct, err := lookupUser(s.User)
		if err != nil {
			a.startErr = err
		} else if acct != nil {
			runAs, a.owner = acct.credential(), acct
			env = acct.env(env)
			// The session's base directory belongs to its user.
			if fi, err := os.Stat(s.BaseDir); err == nil && fi.IsDir() {
				// A directory left to root shows at the user's first
				// write there, with the kernel's reason.
				_ = os.Chown(s.BaseDir, int(acct.uid), int(acct.gid))
			}
		}
	}
	a.spawner, err = newSpawner(a.reaper, s.Cgroup, runAs)
	if err != nil {
		return err
	}
	a.shell = newShell(a, pickShell(s.Shell), env, s.BaseDir)
	lf := os.NewFile(spec.FDListener, "listener")
	ln, err := net.FileListener(lf)
	if err != nil {
		return fmt.Errorf("control socket: %w", err)
	}
	lf.Close()
	var conn *agentproto.Conn
	for {
		c, err := ln.Accept()
		if err != nil {
			if ne, ok := err.(net.Error); ok && ne.Timeout() {
				continue
			}
			return fmt.Errorf("accept: %w", err)
		}
		if !trustedPeer(c, s.UserNS != nil) {
			c.Close()
			continue
		}
		// A new daemon connection replaces the old one (a restarted daemon
		// reconnecting).
		if conn != nil {
			conn.Close()
		}
		conn = agentproto.NewConn(c, a.handle)
	}
}

// trustedPeer admits only the daemon. The socket's path is reachable only
// from the host side; on top of that the peer must be outside the sandbox's
// PID namespace (the kernel then reports its pid as 0) and, without a user
// namespace, be the host's root. (Inside a user namespace the host's root
// shows as the overflow uid, so the uid says nothing there.)
func trustedPeer(c net.Conn, userns bool) bool {
	uc, ok := c.(*net.UnixConn)
	if !ok {
		return false
	}
	raw, err := uc.SyscallConn()
	if err != nil {
		return false
	}
	var cred *unix.Ucred
	if cerr := raw.Control(func(fd uintptr) {
		cred, err = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); cerr != nil {
		return false // the function never ran: cred is unknown
	}
	if err != nil || cred.Pid != 0 {
		return false
	}
	return userns || cred.Uid == 0
}

// ignoreSignals catches every signal a sandboxed process could send to PID 1
// that the Go runtime would otherwise act on (exit, or dump and crash). The
// kernel already drops SIGKILL and SIGSTOP sent to a namespace's init from
// inside. Caught, not ignored: an ignored disposition would be inherited by
// every program the agent starts.
func ignoreSignals() {
	ch := make(chan os.Signal, 16)
	signal.Notify(ch, unix.SIGHUP, unix.SIGINT, unix.SIGQUIT, unix.SIGILL, unix.SIGTRAP, unix.SIGABRT,
		unix.SIGBUS, unix.SIGFPE, unix.SIGUSR1, unix.SIGSEGV, unix.SIGUSR2, unix.SIGPIPE, unix.SIGALRM,
		unix.SIGTERM, unix.SIGSTKFLT, unix.SIGXCPU, unix.SIGXFSZ, unix.SIGVTALRM, unix.SIGWINCH,
		unix.SIGIO, unix.SIGPWR, unix.SIGSYS)
	go func() {
		for range ch {
		}
	}()
}

// userEnv adds what the session's user implies (HOME, USER, ...) to env.
func (a *Agent) userEnv(env []string) []string {
	if a.spec.User != "" && a.owner != nil {
		return a.owner.env(env)
	}
	return env
}

func pickShell(want string) string {
	if want != "" {
		return want
	}
	for _, p := range []string{"/bin/bash", "/usr/bin/bash", "/bin/sh", "/usr/bin/sh"} {
		if isExecutable(p) {
			return p
		}
	}
	return "/bin/sh"
}

// handle dispatches a call. It runs on the connection's read loop: it only
// decodes and queues, and does the work in a goroutine.
func (a *Agent) handle(ctx context.Context, s *agentproto.Stream, op agentproto.Op, args, tail []byte) {
	switch op {
	case agentproto.OpHello:
		var h agentproto.Hello
		if err := json.Unmarshal(args, &h); err != nil || h.Version != agentproto.Version {
			s.Fail(errdefs.New(errdefs.ErrInvalidArgument, "agent speaks protocol %d, not %d", agentproto.Version, h.Version))
			return
		}
		if a.startErr != nil {
			s.Fail(a.startErr)
			return
		}
		if h.Defer {
			s.Reply(agentproto.HelloReply{Version: agentproto.Version, Shell: a.shell.path}, nil)
			return
		}
		// The first hello starts the shell: by then the daemon has put the
		// workload's limits in place. The reply does not wait for it; the
		// start holds the shell's first turn, so the first command queues
		// behind it.
		t := a.shell.enqueue()
		if h.Env != nil {
			// Applied in the hello's turn, before the shell's first start
			// (which queues behind it): a warm sandbox becoming a session.
			go func(t *turn, env []string) {
				if err := a.shell.acquire(context.Background(), t); err == nil {
					a.shell.setEnv(a.userEnv(env))
					a.shell.release()
				}
			}(t, h.Env)
			t = a.shell.enqueue()
		}
		s.Reply(agentproto.HelloReply{Version: agentproto.Version, Shell: a.shell.path}, nil)
		go func() {
			if err := a.shell.acquire(context.Background(), t); err == nil {
				a.startOnce.Do(func() {
					if err := a.shell.start(); err != nil {
						fmt.Fprintf(os.Stderr, "warren agent: %v\n", err)
					}
				})
				a.shell.release()
			}
		}()
	case agentproto.OpExec:
		var req agentproto.ExecRequest
		if err := json.Unmarshal(args, &req); err != nil {
			s.Fail(errdefs.New(errdefs.ErrInvalidArgument, "decode exec request: %v", err))
			return
		}
		if len(req.Argv) > 0 {
			go a.execArgv(ctx, s, &req, tail)
			return
		}
		t := a.shell.enqueue()
		go a.execShell(ctx, s, &req, tail, t)
	case agentproto.OpState:
		go func() {
			cwd, _ := a.shell.snapshot()
			s.Reply(agentproto.StateReply{Cwd: cwd}, nil)
		}()
	case agentproto.OpReadFile, agentproto.OpWriteFile, agentproto.OpList, agentproto.OpStat,
		agentproto.OpMkdir, agentproto.OpRemove, agentproto.OpTarGet, agentproto.OpTarPut:
		var req agentproto.FileRequest
		if err := json.Unmarshal(args, &req); err != nil {
			s.Fail(errdefs.New(errdefs.ErrInvalidArgument, "decode file request: %v", err))
			return
		}
		go a.fileOp(ctx, s, op, &req)
	case agentproto.OpFS:
		var req agentproto.FSRequest
		if err := json.Unmarshal(args, &req); err != nil {
			s.Fail(errdefs.New(errdefs.ErrInvalidArgument, "decode filesystem request: %v", err))
			return
		}
		go a.fsCall(ctx, s, &req)
	case agentproto.OpFSWatch:
		var req agentproto.FSWatchRequest
		if err := json.Unmarshal(args, &req); err != nil {
			s.Fail(errdefs.New(errdefs.ErrInvalidArgument, "decode watch request: %v", err))
			return
		}
		go a.fsWatch(ctx, s, &req)
	case agentproto.OpProcStart:
		var req agentproto.ProcStartRequest
		if err := json.Unmarshal(args, &req); err != nil {
			s.Fail(errdefs.New(errdefs.ErrInvalidArgument, "decode process request: %v", err))
			return
		}
		go func() {
			p, err := a.startProc(&req)
			if err != nil {
				s.Fail(err)
				return
			}
			s.Reply(p.info(), nil)
		}()
	case agentproto.OpProcList, agentproto.OpProcGet, agentproto.OpProcOutput, agentproto.OpProcStdin,
		agentproto.OpProcSignal, agentproto.OpProcResize, agentproto.OpProcKill:
		var req agentproto.ProcRequest
		if err := json.Unmarshal(args, &req); err != nil {
			s.Fail(errdefs.New(errdefs.ErrInvalidArgument, "decode process request: %v", err))
			return
		}
		go a.procOp(ctx, s, op, &req)
	default:
		s.Fail(errdefs.New(errdefs.ErrInvalidArgument, "unknown operation %d", op))
	}
}

// stdinReader returns the stdin of an exec: the inline tail, the Data frames
// that follow, or nil for none.
func stdinReader(ctx context.Context, s *agentproto.Stream, req *agentproto.ExecRequest, tail []byte) io.Reader {
	switch req.Stdin {
	case agentproto.StdinInline:
		return bytesReader(tail)
	case agentproto.StdinStream:
		return agentproto.NewDataReader(ctx, s)
	}
	return nil
}

func (a *Agent) execShell(ctx context.Context, s *agentproto.Stream, req *agentproto.ExecRequest, tail []byte, t *turn) {
	if err := a.shell.acquire(ctx, t); err != nil {
		s.Fail(errdefs.New(errdefs.ErrUnavailable, "exec canceled while queued"))
		return
	}
	out := a.newOutput(ctx, s, req)
	res, err := a.shell.run(ctx, req, stdinReader(ctx, s, req, tail), out)
	if err != nil {
		a.shell.release()
		s.Fail(err)
		return
	}
	a.reply(ctx, s, out, res)
	// A shell that died is replaced before the next call, while this call
	// still holds the turn.
	if a.shell.proc == nil {
		if err := a.shell.start(); err != nil {
			fmt.Fprintf(os.Stderr, "warren agent: restart shell: %v\n", err)
		}
	}
	a.shell.release()
}

func (a *Agent) newOutput(ctx context.Context, s *agentproto.Stream, req *agentproto.ExecRequest) *output {
	out := &output{max: req.MaxOutput, ctx: ctx}
	if out.max <= 0 {
		out.max = 1 << 20
	}
	if req.Stream {
		out.stream = s
	}
	return out
}

// reply ends an exec: gathered output goes inline when it fits in one frame,
// else as Data frames before the Reply.
func (a *Agent) reply(ctx context.Context, s *agentproto.Stream, out *output, res agentproto.ExecResult) {
	res.Truncated = out.truncated
	if out.stream != nil {
		s.Reply(res, nil)
		return
	}
	stdout, stderr := out.bufs[agentproto.ChanStdout].Bytes(), out.bufs[agentproto.ChanStderr].Bytes()
	if len(stdout)+len(stderr) <= agentproto.MaxTail {
		res.StdoutLen, res.StderrLen = len(stdout), len(stderr)
		s.Reply(res, append(stdout, stderr...))
		return
	}
	if err := s.WriteData(ctx, agentproto.ChanStdout, stdout); err != nil {
		s.Fail(err)
		return
	}
	if err := s.WriteData(ctx, agentproto.ChanStderr, stderr); err != nil {
		s.Fail(err)
		return
	}
	s.Reply(res, nil)
}

// execArgv runs a program directly, in the shell's current cwd and exported
// environment, without touching the shell. Calls run concurrently.
func (a *Agent) execArgv(ctx context.Context, s *agentproto.Stream, req *agentproto.ExecRequest, tail []byte) {
	begin := time.Now()
	out := a.newOutput(ctx, s, req)
	cwd, env := a.shell.snapshot()
	if req.Cwd != "" {
		cwd = req.Cwd
	}
	env = mergeEnv(env, req.Env)
	path, err := lookPath(req.Argv[0], env, cwd)
	if err != nil {
		out.write(agentproto.ChanStderr, []byte(err.Error()+"\n"))
		a.reply(ctx, s, out, agentproto.ExecResult{ExitCode: 127, Duration: time.Since(begin), Cwd: cwd})
		return
	}
	res, err := a.runArgv(ctx, append([]string{path}, req.Argv[1:]...), env, cwd, stdinReader(ctx, s, req, tail), req.Timeout, out)
	if err != nil {
		if errdefs.Explicit(err) { // a bare errno is the command's failure to start
			s.Fail(err)
			return
		}
		out.write(agentproto.ChanStderr, []byte(err.Error()+"\n"))
		res.ExitCode = 126
	}
	res.Duration = time.Since(begin)
	res.Cwd = cwd
	a.reply(ctx, s, out, res)
}

func (a *Agent) runArgv(ctx context.Context, argv, env []string, dir string, stdin io.Reader, timeout time.Duration, out *output) (agentproto.ExecResult, error) {
	var res agentproto.ExecResult
	outR, outW, err := os.Pipe()
	if err != nil {
		return res, err
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		outR.Close()
		outW.Close()
		return res, err
	}
	var inR, inW *os.File
	if stdin != nil {
		inR, inW, err = os.Pipe()
	} else {
		inR, err = os.Open(os.DevNull)
	}
	if err != nil {
		outR.Close()
		outW.Close()
		errR.Close()
		errW.Close()
		return res, err
	}
	since := lastPid()
	pid, exit, err := a.spawner.start(&spawnReq{
		argv: argv, env: env, dir: dir,
		files:   []uintptr{inR.Fd(), outW.Fd(), errW.Fd()},
		setpgid: true,
	})
	inR.Close()
	outW.Close()
	errW.Close()
	if err != nil {
		outR.Close()
		errR.Close()
		if inW != nil {
			inW.Close()
		}
		if errdefs.Is(err, errdefs.ErrResourceExhausted) {
			return res, err
		}
		if isEAGAIN(err) {
			return res, errdefs.New(errdefs.ErrResourceExhausted, "%v", err)
		}
		return res, err
	}
	cols := []*collector{collect(outR, agentproto.ChanStdout, out), collect(errR, agentproto.ChanStderr, out)}
	if inW != nil {
		go func() {
			_, _ = io.Copy(inW, stdin) // the command sees EOF either way; its own result is what counts
			inW.Close()
		}()
	}
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	var ws unix.WaitStatus
	select {
	case ws = <-exit:
	case <-timer.C:
		res.TimedOut = true
		killStarted(a.reaper, pid, since, true)
		unix.Kill(-pid, unix.SIGKILL)
		ws = <-exit
	case <-ctx.Done():
		killStarted(a.reaper, pid, since, true)
		unix.Kill(-pid, unix.SIGKILL)
		ws = <-exit
	}
	if inW != nil {
		inW.Close()
	}
	for _, c := range cols {
		if c.finish() {
			go a.bg.drain(c.f)
		} else {
			c.f.Close()
		}
	}
	res.ExitCode = waitCode(ws)
	if ws.Signaled() {
		res.Signal = int(ws.Signal())
	}
	return res, nil
}

func isEAGAIN(err error) bool {
	for e := err; e != nil; {
		if e == syscall.EAGAIN {
			return true
		}
		u, ok := e.(interface{ Unwrap() error })
		if !ok {
			return false
		}
		e = u.Unwrap()
	}
	return false
}

// mergeEnv overlays extra on env.
func mergeEnv(env []string, extra map[string]string) []string {
	if len(extra) == 0 {
		return env
	}
	out := make([]string, 0, len(env)+len(extra))
	for _, kv := range env {
		name := kv
		for i := 0; i < len(kv); i++ {
			if kv[i] == '=' {
				name = kv[:i]
				break
			}
		}
		if _, over := extra[name]; !over {
			out = append(out, kv)
		}
	}
	for k, v := range extra {
		out = append(out, k+"="+v)
	}
	return out
}
