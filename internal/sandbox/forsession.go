package sandbox

import (
	"context"
	"io"

	"github.com/warrenhq/warren/internal/agentproto"
	"github.com/warrenhq/warren/internal/cgroup"
	"github.com/warrenhq/warren/internal/session"
)

// This file is the edge where the sandbox meets the session manager: the
// manager owns the interfaces (session.Runtime, session.Sandbox) and their
// value types, and the runtime implements them here, converting to and from
// the agent protocol, which nothing above this package sees.

// ForSessions returns r as the session manager's runtime.
func ForSessions(r *Runtime) session.Runtime { return sessionRuntime{r} }

type sessionRuntime struct{ r *Runtime }

var (
	_ session.Runtime = sessionRuntime{}
	_ session.Sandbox = sessionSandbox{}
)

func (sr sessionRuntime) Start(ctx context.Context, c *session.SandboxConfig) (session.Sandbox, error) {
	cfg := &Config{
		Name:               c.Name,
		Hostname:           c.Hostname,
		Lower:              c.Lower,
		BaseDir:            c.BaseDir,
		Env:                c.Env,
		Shell:              c.Shell,
		Limits:             cgroup.Limits{MemoryBytes: c.MemoryBytes, Pids: c.Pids, CPUs: c.CPUs},
		DiskBytes:          c.DiskBytes,
		User:               c.User,
		BackgroundLogBytes: c.BackgroundLogBytes,
		Deferred:           c.Deferred,
	}
	for _, o := range c.Overlays {
		cfg.Overlays = append(cfg.Overlays, Overlay{Source: o.Source, Target: o.Target, Lower: o.Lower})
	}
	for _, b := range c.Binds {
		cfg.Binds = append(cfg.Binds, Bind{Source: b.Source, Target: b.Target, ReadOnly: b.ReadOnly})
	}
	sb, err := sr.r.Start(ctx, cfg)
	if err != nil {
		return nil, err
	}
	return sessionSandbox{sb}, nil
}

func (sr sessionRuntime) Adopt(ctx context.Context, name string, pid int) (session.Sandbox, error) {
	sb, err := sr.r.Adopt(ctx, name, pid)
	if err != nil {
		return nil, err
	}
	return sessionSandbox{sb}, nil
}

func (sr sessionRuntime) Remove(name string) error     { return sr.r.Remove(name) }
func (sr sessionRuntime) Leftovers() ([]string, error) { return sr.r.Leftovers() }
func (sr sessionRuntime) Wait()                        { sr.r.Wait() }
func (sr sessionRuntime) StateDir() string             { return sr.r.Dir() }
func (sr sessionRuntime) Features() session.Features {
	return session.Features{DiskQuota: sr.r.opts.Layers != nil, UserNS: sr.r.opts.UserNS}
}

// sessionSandbox is a Sandbox as the manager sees it.
type sessionSandbox struct{ sb *Sandbox }

func (s sessionSandbox) Name() string          { return s.sb.Name() }
func (s sessionSandbox) Pid() int              { return s.sb.Pid() }
func (s sessionSandbox) Done() <-chan struct{} { return s.sb.Done() }
func (s sessionSandbox) ExitErr() error        { return s.sb.ExitErr() }
func (s sessionSandbox) Detach()               { s.sb.Detach() }

func (s sessionSandbox) Destroy(ctx context.Context) error { return s.sb.Destroy(ctx) }

func (s sessionSandbox) Claim(ctx context.Context, hostname string, env []string) error {
	return s.sb.Claim(ctx, hostname, env)
}

func (s sessionSandbox) Usage() (session.Usage, error) {
	st, err := s.sb.Stats()
	return session.Usage{MemoryBytes: st.MemoryBytes, Pids: st.Pids, CPUSeconds: st.CPUSeconds, OOMKills: st.OOMKills,
		DiskBytes: st.DiskBytes}, err
}

func (s sessionSandbox) Cwd(ctx context.Context) (string, error) { return s.sb.Cwd(ctx) }

func (s sessionSandbox) Exec(ctx context.Context, req *session.ExecRequest, stream session.OutputFunc) (*session.ExecResult, error) {
	areq := &agentproto.ExecRequest{Command: req.Command, Argv: req.Argv, Env: req.Env, Cwd: req.Cwd, Timeout: req.Timeout,
		MaxOutput: req.MaxOutput}
	var out OutputFunc
	if stream != nil {
		out = func(ch byte, p []byte) error { return stream(outputChan(ch), p) }
	}
	res, err := s.sb.Exec(ctx, areq, req.Stdin, out)
	if err != nil {
		return nil, err
	}
	return &session.ExecResult{
		ExitCode:       res.ExitCode,
		Signal:         res.Signal,
		TimedOut:       res.TimedOut,
		Truncated:      res.Truncated,
		ShellRestarted: res.ShellRestarted,
		Duration:       res.Duration,
		Cwd:            res.Cwd,
		Stdout:         res.Stdout,
		Stderr:         res.Stderr,
		OOMKilled:      res.OOMKilled,
	}, nil
}

// outputChan is the session's name of an agent output channel.
func outputChan(ch byte) byte {
	if ch == agentproto.ChanStderr {
		return session.ChanStderr
	}
	return session.ChanStdout
}

func toEntry(e *agentproto.Entry) session.Entry {
	return session.Entry{Name: e.Name, Path: e.Path, Type: e.Type, Size: e.Size, Mode: e.Mode, MTime: e.MTime, Target: e.Target}
}

func (s sessionSandbox) Stat(ctx context.Context, path string) (*session.Entry, error) {
	e, err := s.sb.Stat(ctx, path)
	if err != nil || e == nil {
		return nil, err
	}
	out := toEntry(e)
	return &out, nil
}

func (s sessionSandbox) List(ctx context.Context, path string) ([]session.Entry, error) {
	es, err := s.sb.List(ctx, path)
	if err != nil {
		return nil, err
	}
	out := make([]session.Entry, len(es))
	for i := range es {
		out[i] = toEntry(&es[i])
	}
	return out, nil
}

func (s sessionSandbox) Mkdir(ctx context.Context, path string) error { return s.sb.Mkdir(ctx, path) }

func (s sessionSandbox) Remove(ctx context.Context, path string, recursive bool) error {
	return s.sb.Remove(ctx, path, recursive)
}

func (s sessionSandbox) WriteFile(ctx context.Context, path string, mode uint32, max int64, r io.Reader) (int64, error) {
	return s.sb.WriteFile(ctx, path, mode, max, r)
}

func (s sessionSandbox) PutArchive(ctx context.Context, path string, max int64, r io.Reader) (int64, error) {
	return s.sb.TarPut(ctx, path, max, r)
}

func (s sessionSandbox) ReadFile(ctx context.Context, path string, max int64) (session.DownloadStream, []byte, error) {
	d, first, err := s.sb.ReadFile(ctx, path, max)
	if err != nil {
		return nil, nil, err
	}
	return d, first, nil
}

func (s sessionSandbox) GetArchive(ctx context.Context, path string, max int64) (session.DownloadStream, []byte, error) {
	d, first, err := s.sb.TarGet(ctx, path, max)
	if err != nil {
		return nil, nil, err
	}
	return d, first, nil
}

func toProcessInfo(p *agentproto.ProcInfo) *session.ProcessInfo {
	if p == nil {
		return nil
	}
	return &session.ProcessInfo{ID: p.ID, Command: p.Command, Argv: p.Argv, TTY: p.TTY, Running: p.Running, Pid: p.Pid,
		ExitCode: p.ExitCode, Signal: p.Signal, StartedAt: p.StartedAt, EndedAt: p.EndedAt, OutputBytes: p.OutputBytes,
		OutputStart: p.OutputStart}
}

func (s sessionSandbox) StartProcess(ctx context.Context, req *session.StartProcessRequest) (*session.ProcessInfo, error) {
	info, err := s.sb.StartProcess(ctx, &agentproto.ProcStartRequest{Command: req.Command, Argv: req.Argv, Login: req.Login,
		Env: req.Env, Cwd: req.Cwd, TTY: req.TTY, Cols: req.Cols, Rows: req.Rows, Stdin: req.Stdin, User: req.User})
	if err != nil {
		return nil, err
	}
	return toProcessInfo(info), nil
}

func (s sessionSandbox) ListProcesses(ctx context.Context) ([]session.ProcessInfo, error) {
	ps, err := s.sb.ListProcesses(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]session.ProcessInfo, len(ps))
	for i := range ps {
		out[i] = *toProcessInfo(&ps[i])
	}
	return out, nil
}

func (s sessionSandbox) GetProcess(ctx context.Context, pid string) (*session.ProcessInfo, error) {
	info, err := s.sb.GetProcess(ctx, pid)
	if err != nil {
		return nil, err
	}
	return toProcessInfo(info), nil
}

func (s sessionSandbox) ProcessOutput(ctx context.Context, pid string, offset int64, follow bool, fn func(session.OutputEvent) error) (*session.ProcessInfo, error) {
	info, err := s.sb.ProcessOutput(ctx, pid, offset, follow, func(ev OutputEvent) error {
		out := session.OutputEvent{Kind: ev.Kind, Offset: ev.Offset, Data: ev.Data, From: ev.From, To: ev.To,
			ExitCode: ev.ExitCode, Signal: ev.Signal}
		if ev.Kind == "output" {
			out.Chan = outputChan(ev.Chan)
		}
		return fn(out)
	})
	if err != nil {
		return nil, err
	}
	return toProcessInfo(info), nil
}

func (s sessionSandbox) WriteStdin(ctx context.Context, pid string, r io.Reader, eof bool) (int64, error) {
	return s.sb.WriteStdin(ctx, pid, r, eof)
}

func (s sessionSandbox) SignalProcess(ctx context.Context, pid string, sig int) error {
	return s.sb.SignalProcess(ctx, pid, sig)
}

func (s sessionSandbox) ResizeProcess(ctx context.Context, pid string, cols, rows int) error {
	return s.sb.ResizeProcess(ctx, pid, cols, rows)
}

func (s sessionSandbox) KillProcess(ctx context.Context, pid string) error {
	return s.sb.KillProcess(ctx, pid)
}

func (s sessionSandbox) CopyLayers(ctx context.Context, dir string, overlays int) (session.LayerCopy, error) {
	st, frozen, err := s.sb.CopyLayers(ctx, dir, overlays)
	return session.LayerCopy{Files: st.Files, Dirs: st.Dirs, Links: st.Links, Bytes: st.Bytes, Skipped: st.Skipped,
		Frozen: frozen}, err
}

// Freeze and Thaw let the session manager pause a session (session.Pause).
func (s sessionSandbox) Freeze(ctx context.Context) error { return s.sb.Freeze(ctx) }
func (s sessionSandbox) Thaw() error                      { return s.sb.Thaw() }
