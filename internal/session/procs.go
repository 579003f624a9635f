package session

import (
	"context"
	"io"
	"time"
)

func (m *Manager) checkProcess(req *StartProcessRequest) error {
	if !req.Login && (req.Command == "") == (len(req.Argv) == 0) {
		return invalid("give either command or argv")
	}
	if err := checkSizes(req.Command, req.Argv, true); err != nil {
		return err
	}
	if err := (&ExecRequest{Command: req.Command, Argv: req.Argv, Env: req.Env, Cwd: req.Cwd}).checkStrings(); err != nil {
		return err
	}
	if req.Cols < 0 || req.Rows < 0 || req.Cols > 10000 || req.Rows > 10000 {
		return invalid("cols and rows must be between 1 and 10000")
	}
	return nil
}

// StartProcess starts a durable process: it runs on its own, whatever
// happens to the connection that started it, and keeps its output.
func (m *Manager) StartProcess(ctx context.Context, tenant, id string, req *StartProcessRequest) (info *ProcessInfo, err error) {
	defer m.observe(OpProcessStart, time.Now(), &err)
	if err := m.checkProcess(req); err != nil {
		return nil, err
	}
	tl, err := m.tenantLimits(ctx, tenant)
	if err != nil {
		return nil, err
	}
	if !req.Login {
		if err := checkPolicy(tenant, tl, req.Command, req.Argv); err != nil {
			return nil, err
		}
	}
	err = m.withSandbox(ctx, tenant, id, func(sb Sandbox) error {
		info, err = sb.StartProcess(ctx, req)
		return err
	})
	return info, err
}

// ListProcesses lists a session's durable processes.
func (m *Manager) ListProcesses(ctx context.Context, tenant, id string) (list []ProcessInfo, err error) {
	err = m.withSandbox(ctx, tenant, id, func(sb Sandbox) error {
		list, err = sb.ListProcesses(ctx)
		return err
	})
	return list, err
}

// GetProcess describes one durable process.
func (m *Manager) GetProcess(ctx context.Context, tenant, id, pid string) (info *ProcessInfo, err error) {
	err = m.withSandbox(ctx, tenant, id, func(sb Sandbox) error {
		info, err = sb.GetProcess(ctx, pid)
		return err
	})
	return info, err
}

// ProcessOutput streams a process's output from offset; with follow it
// waits for more until the process exits. While it streams, the session
// counts as in use and does not expire.
func (m *Manager) ProcessOutput(ctx context.Context, tenant, id, pid string, offset int64, follow bool, fn func(OutputEvent) error) (info *ProcessInfo, err error) {
	err = m.withSandbox(ctx, tenant, id, func(sb Sandbox) error {
		info, err = sb.ProcessOutput(ctx, pid, offset, follow, fn)
		return err
	})
	return info, err
}

// WriteStdin writes to a process's stdin.
func (m *Manager) WriteStdin(ctx context.Context, tenant, id, pid string, r io.Reader, eof bool) (n int64, err error) {
	err = m.withSandbox(ctx, tenant, id, func(sb Sandbox) error {
		n, err = sb.WriteStdin(ctx, pid, r, eof)
		return err
	})
	return n, err
}

// SignalProcess signals a process's group.
func (m *Manager) SignalProcess(ctx context.Context, tenant, id, pid string, sig int) error {
	return m.withSandbox(ctx, tenant, id, func(sb Sandbox) error {
		return sb.SignalProcess(ctx, pid, sig)
	})
}

// ResizeProcess sets a TTY process's terminal size.
func (m *Manager) ResizeProcess(ctx context.Context, tenant, id, pid string, cols, rows int) error {
	if cols <= 0 || rows <= 0 || cols > 10000 || rows > 10000 {
		return invalid("cols and rows must be between 1 and 10000")
	}
	return m.withSandbox(ctx, tenant, id, func(sb Sandbox) error {
		return sb.ResizeProcess(ctx, pid, cols, rows)
	})
}

// KillProcess kills a process and its group and forgets it.
func (m *Manager) KillProcess(ctx context.Context, tenant, id, pid string) error {
	return m.withSandbox(ctx, tenant, id, func(sb Sandbox) error {
		return sb.KillProcess(ctx, pid)
	})
}
