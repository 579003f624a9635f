package session

import (
	"context"
	"io"
	"strings"
	"time"

	"github.com/warrenhq/warren/internal/errdefs"
)

// ExecRequest is one command for a session.
type ExecRequest struct {
	Command   string
	Argv      []string
	Stdin     []byte // nil: empty stdin
	Env       map[string]string
	Cwd       string
	Timeout   time.Duration
	MaxOutput int64
}

// The sizes of a command. An exec's command is read by the session's
// shell, so it may be long (a heredoc that writes a file); everything that
// becomes one argument of execve (each argv string, a process's command,
// which runs as sh -c COMMAND) is bounded by the kernel's MAX_ARG_STRLEN,
// and the whole call must fit the agent protocol's frame (2 MiB) with
// room for the rest of the request. Past either the answer is too_large,
// naming the limit, before anything reaches the sandbox.
const (
	MaxCommandBytes = 1 << 20
	MaxArgBytes     = 128<<10 - 1
)

// checkSizes checks the command and argv against MaxCommandBytes and
// MaxArgBytes; commandIsArg says the command runs as one argument (a
// process's) rather than through the shell's input (exec's).
func checkSizes(command string, argv []string, commandIsArg bool) error {
	total := len(command)
	for _, a := range argv {
		total += len(a) + 1
	}
	if total > MaxCommandBytes {
		return errdefs.New(errdefs.ErrTooLarge, "the command (or argv in all) is %d bytes; at most %d are allowed", total, MaxCommandBytes)
	}
	if commandIsArg && len(command) > MaxArgBytes {
		return errdefs.New(errdefs.ErrTooLarge, "a process's command runs as one argument of sh -c, and is %d bytes; at most %d are allowed (the kernel's MAX_ARG_STRLEN; exec takes commands of up to %d)", len(command), MaxArgBytes, MaxCommandBytes)
	}
	for i, a := range argv {
		if len(a) > MaxArgBytes {
			return errdefs.New(errdefs.ErrTooLarge, "argv[%d] is %d bytes; one argument may be at most %d (the kernel's MAX_ARG_STRLEN)", i, len(a), MaxArgBytes)
		}
	}
	return nil
}

// checkStrings validates the command, argv, env and cwd of a request.
func (req *ExecRequest) checkStrings() error {
	if err := checkSizes(req.Command, req.Argv, false); err != nil {
		return err
	}
	if strings.IndexByte(req.Command, 0) >= 0 {
		return invalid("command contains a NUL byte")
	}
	for _, a := range req.Argv {
		if strings.IndexByte(a, 0) >= 0 {
			return invalid("argv contains a NUL byte")
		}
	}
	if len(req.Argv) > 0 && req.Argv[0] == "" {
		return invalid("argv[0] must name a program")
	}
	if err := checkEnv(req.Env); err != nil {
		return err
	}
	return checkPath("cwd", req.Cwd)
}

// checkExec validates req and returns it with its timeout and output limit
// resolved.
func (m *Manager) checkExec(req *ExecRequest) (*ExecRequest, error) {
	hasCmd, hasArgv := req.Command != "", len(req.Argv) > 0
	switch {
	case hasCmd && hasArgv:
		return nil, invalid("give either command or argv, not both")
	case !hasCmd && !hasArgv:
		return nil, invalid("command or argv is required")
	}
	if err := req.checkStrings(); err != nil {
		return nil, err
	}
	timeout := req.Timeout
	switch {
	case timeout < 0:
		return nil, invalid("timeout_ms must not be negative")
	case timeout == 0:
		timeout = m.cfg.DefaultTimeout
	case timeout > m.cfg.MaxTimeout:
		return nil, invalid("timeout_ms exceeds the maximum of %d", m.cfg.MaxTimeout.Milliseconds())
	}
	maxOut := req.MaxOutput
	switch {
	case maxOut < 0:
		return nil, invalid("max_output_bytes must not be negative")
	case maxOut == 0:
		maxOut = m.cfg.DefaultMaxOutput
	case maxOut > m.cfg.MaxOutput:
		return nil, invalid("max_output_bytes exceeds the maximum of %d", m.cfg.MaxOutput)
	}
	out := *req
	out.Timeout, out.MaxOutput = timeout, maxOut
	return &out, nil
}

// Exec runs a command in a session. With stream set, output goes to stream
// as it is produced and the result carries none.
func (m *Manager) Exec(ctx context.Context, tenant, id string, req *ExecRequest, stream OutputFunc) (_ *ExecResult, err error) {
	defer m.observe(OpExec, time.Now(), &err)
	areq, err := m.checkExec(req)
	if err != nil {
		return nil, err
	}
	tl, err := m.tenantLimits(ctx, tenant)
	if err != nil {
		return nil, err
	}
	if err := checkPolicy(tenant, tl, req.Command, req.Argv); err != nil {
		return nil, err
	}
	if tl.MaxExecTimeout > 0 {
		switch {
		case req.Timeout == 0 && areq.Timeout > tl.MaxExecTimeout:
			areq.Timeout = tl.MaxExecTimeout
		case areq.Timeout > tl.MaxExecTimeout:
			return nil, quotaErr(tenant, "max_exec_timeout_seconds", "commands may run %v, not %v", tl.MaxExecTimeout, areq.Timeout)
		}
	}
	e, done, err := m.use(ctx, tenant, id)
	if err != nil {
		return nil, err
	}
	defer done()
	res, err := e.sb.Exec(ctx, areq, stream)
	if err != nil {
		return nil, m.sandboxErr(e, id, err)
	}
	if res.Cwd != "" && req.Argv == nil {
		e.mu.Lock()
		e.cwd = res.Cwd
		e.mu.Unlock()
	}
	return res, nil
}

// RunRequest is a stateless run: a fresh sandbox for one command.
type RunRequest struct {
	Image  string
	Limits Limits
	Exec   ExecRequest
	// Network, NetworkAllow and NetworkDeny are the run's network, as
	// CreateRequest's.
	Network                   string
	NetworkAllow, NetworkDeny []string
}

// Run creates a hidden session, runs one command in it and deletes it.
func (m *Manager) Run(ctx context.Context, tenant string, req *RunRequest) (*ExecResult, error) {
	if _, err := m.checkExec(&req.Exec); err != nil {
		return nil, err
	}
	// createSession: a run has no use for the live details Create adds.
	s, _, err := m.createSession(ctx, tenant, &CreateRequest{Image: req.Image, Limits: req.Limits, Hidden: true,
		Network: req.Network, NetworkAllow: req.NetworkAllow, NetworkDeny: req.NetworkDeny})
	if err != nil {
		return nil, err
	}
	// The hidden session goes whatever the command did; a delete that
	// fails logs what it left, and the reaper takes the session at its TTL.
	defer func() { _ = m.Delete(context.WithoutCancel(ctx), tenant, s.ID) }()
	return m.Exec(ctx, tenant, s.ID, &req.Exec, nil)
}

// MaxFileBytes is the largest file the file API moves.
func (m *Manager) MaxFileBytes() int64 { return m.cfg.MaxFileBytes }

// withSandbox runs f on a session's sandbox as one call.
func (m *Manager) withSandbox(ctx context.Context, tenant, id string, f func(sb Sandbox) error) error {
	e, done, err := m.use(ctx, tenant, id)
	if err != nil {
		return err
	}
	defer done()
	if err := f(e.sb); err != nil {
		// An unclassified error (the agent connection closing under
		// the call) may be the session going away: say so.
		if errdefs.ClassOf(err) == errdefs.ErrUnavailable || !errdefs.Classified(err) {
			return m.sandboxErr(e, id, err)
		}
		return err
	}
	return nil
}

// Stat describes a path in a session.
func (m *Manager) Stat(ctx context.Context, tenant, id, path string) (entry *Entry, err error) {
	defer m.observe(OpFileStat, time.Now(), &err)
	err = m.withSandbox(ctx, tenant, id, func(sb Sandbox) error {
		entry, err = sb.Stat(ctx, path)
		return err
	})
	return entry, err
}

// List describes a directory of a session.
func (m *Manager) ListFiles(ctx context.Context, tenant, id, path string) (entries []Entry, err error) {
	defer m.observe(OpFileList, time.Now(), &err)
	err = m.withSandbox(ctx, tenant, id, func(sb Sandbox) error {
		entries, err = sb.List(ctx, path)
		return err
	})
	return entries, err
}

// Mkdir creates a directory and its parents, and describes it.
func (m *Manager) Mkdir(ctx context.Context, tenant, id, path string) (entry *Entry, err error) {
	defer m.observe(OpFileMkdir, time.Now(), &err)
	err = m.withSandbox(ctx, tenant, id, func(sb Sandbox) error {
		if err := sb.Mkdir(ctx, path); err != nil {
			return err
		}
		entry, err = sb.Stat(ctx, path)
		return err
	})
	return entry, err
}

// Remove removes a path (a tree if recursive).
func (m *Manager) Remove(ctx context.Context, tenant, id, path string, recursive bool) (err error) {
	defer m.observe(OpFileRemove, time.Now(), &err)
	return m.withSandbox(ctx, tenant, id, func(sb Sandbox) error {
		return sb.Remove(ctx, path, recursive)
	})
}

// WriteFile writes r to path, creating parents.
func (m *Manager) WriteFile(ctx context.Context, tenant, id, path string, mode uint32, r io.Reader) (n int64, err error) {
	defer m.observe(OpFileWrite, time.Now(), &err)
	err = m.withSandbox(ctx, tenant, id, func(sb Sandbox) error {
		n, err = sb.WriteFile(ctx, path, mode, m.cfg.MaxFileBytes, r)
		return err
	})
	return n, err
}

// PutArchive extracts a tar into the directory path.
func (m *Manager) PutArchive(ctx context.Context, tenant, id, path string, r io.Reader) (n int64, err error) {
	defer m.observe(OpArchivePut, time.Now(), &err)
	err = m.withSandbox(ctx, tenant, id, func(sb Sandbox) error {
		n, err = sb.PutArchive(ctx, path, m.cfg.MaxFileBytes, r)
		return err
	})
	return n, err
}

// Download is a file or archive on its way out of a session. The caller
// reads it and then must call Close.
type Download struct {
	DownloadStream
	First []byte // the first bytes, already read
	done  func()
}

// Close ends the download and the call.
func (d *Download) Close() error {
	d.DownloadStream.Close()
	d.done()
	return nil
}

func (m *Manager) download(ctx context.Context, tenant, id string, open func(Sandbox) (DownloadStream, []byte, error)) (*Download, error) {
	e, done, err := m.use(ctx, tenant, id)
	if err != nil {
		return nil, err
	}
	d, first, err := open(e.sb)
	if err != nil {
		done()
		if errdefs.ClassOf(err) == errdefs.ErrUnavailable {
			return nil, m.sandboxErr(e, id, err)
		}
		return nil, err
	}
	return &Download{DownloadStream: d, First: first, done: done}, nil
}

// ReadFile opens a file of a session for reading.
func (m *Manager) ReadFile(ctx context.Context, tenant, id, path string) (_ *Download, err error) {
	defer m.observe(OpFileRead, time.Now(), &err)
	return m.download(ctx, tenant, id, func(sb Sandbox) (DownloadStream, []byte, error) {
		return sb.ReadFile(ctx, path, m.cfg.MaxFileBytes)
	})
}

// GetArchive opens a tar of a directory of a session.
func (m *Manager) GetArchive(ctx context.Context, tenant, id, path string) (_ *Download, err error) {
	defer m.observe(OpArchiveGet, time.Now(), &err)
	return m.download(ctx, tenant, id, func(sb Sandbox) (DownloadStream, []byte, error) {
		return sb.GetArchive(ctx, path, m.cfg.MaxFileBytes)
	})
}
