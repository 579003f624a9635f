package mcpapi

import (
	"bytes"
	"context"
	"io"

	"github.com/warrenhq/warren/api"
	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/session"
	"github.com/warrenhq/warren/internal/wire"
)

// managerBackend calls a daemon's session manager directly, as the REST
// handlers do (internal/httpapi), for the tenant its tenant function names.
type managerBackend struct {
	m      *session.Manager
	tenant func(ctx context.Context) (string, error)
}

// NewManagerBackend returns a backend over m. tenant names the tenant a
// call acts for, from the call's context (where the daemon's
// authentication put the caller); it must never return "", which the
// manager reads as every tenant.
func NewManagerBackend(m *session.Manager, tenant func(ctx context.Context) (string, error)) Backend {
	return &managerBackend{m: m, tenant: tenant}
}

// tenantOf is the tenant a call acts for.
func (b *managerBackend) tenantOf(ctx context.Context) (string, error) {
	tn, err := b.tenant(ctx)
	if err == nil && tn == "" {
		err = errdefs.New(errdefs.ErrUnauthenticated, "the call has no tenant")
	}
	return tn, err
}

func (b *managerBackend) CreateSession(ctx context.Context, req *api.CreateSessionRequest) (*api.Session, error) {
	tn, err := b.tenantOf(ctx)
	if err != nil {
		return nil, err
	}
	info, _, err := b.m.Create(ctx, tn, wire.CreateRequest(req))
	if err != nil {
		return nil, err
	}
	s := toAPISession(info)
	return &s, nil
}

func (b *managerBackend) NetworkDenials(ctx context.Context, id string) ([]api.NetworkDenial, error) {
	tn, err := b.tenantOf(ctx)
	if err != nil {
		return nil, err
	}
	ds, err := b.m.NetworkDenials(ctx, tn, id)
	if err != nil {
		return nil, err
	}
	out := make([]api.NetworkDenial, len(ds))
	for i, d := range ds {
		out[i] = api.NetworkDenial{Time: d.Time, Host: d.Host, Port: d.Port, Proto: d.Proto, Reason: d.Reason}
	}
	return out, nil
}

func (b *managerBackend) GetSession(ctx context.Context, id string) (*api.Session, error) {
	tn, err := b.tenantOf(ctx)
	if err != nil {
		return nil, err
	}
	info, err := b.m.Get(ctx, tn, id)
	if err != nil {
		return nil, err
	}
	s := toAPISession(info)
	return &s, nil
}

func (b *managerBackend) ListSessions(ctx context.Context) ([]api.Session, error) {
	tn, err := b.tenantOf(ctx)
	if err != nil {
		return nil, err
	}
	// A fleet node that did not answer is in the daemon's log; the
	// tool's result lists what the others hold.
	infos, _ := b.m.ListFleet(ctx, tn)
	out := make([]api.Session, 0, len(infos))
	for _, in := range infos {
		out = append(out, toAPISession(in))
	}
	return out, nil
}

func (b *managerBackend) DeleteSession(ctx context.Context, id string) error {
	tn, err := b.tenantOf(ctx)
	if err != nil {
		return err
	}
	return b.m.Delete(ctx, tn, id)
}

func (b *managerBackend) Exec(ctx context.Context, id string, req *api.ExecRequest) (*api.ExecResult, error) {
	tn, err := b.tenantOf(ctx)
	if err != nil {
		return nil, err
	}
	ereq, err := wire.ExecRequest(req)
	if err != nil {
		return nil, err
	}
	res, err := b.m.Exec(ctx, tn, id, ereq, nil)
	if err != nil {
		return nil, err
	}
	out := wire.Result(res)
	return &out, nil
}

func (b *managerBackend) StartProcess(ctx context.Context, id string, req *api.StartProcessRequest) (*api.Process, error) {
	tn, err := b.tenantOf(ctx)
	if err != nil {
		return nil, err
	}
	info, err := b.m.StartProcess(ctx, tn, id, &session.StartProcessRequest{
		Command: req.Command, Argv: req.Argv, Env: req.Env, Cwd: req.Cwd,
		TTY: req.TTY, Cols: req.Cols, Rows: req.Rows, Stdin: req.Stdin,
	})
	if err != nil {
		return nil, err
	}
	p := toAPIProcess(info)
	return &p, nil
}

func (b *managerBackend) GetProcess(ctx context.Context, id, pid string) (*api.Process, error) {
	tn, err := b.tenantOf(ctx)
	if err != nil {
		return nil, err
	}
	info, err := b.m.GetProcess(ctx, tn, id, pid)
	if err != nil {
		return nil, err
	}
	p := toAPIProcess(info)
	return &p, nil
}

func (b *managerBackend) ProcessOutput(ctx context.Context, id, pid string, offset int64, follow bool, fn func(OutputEvent) error) error {
	tn, err := b.tenantOf(ctx)
	if err != nil {
		return err
	}
	_, err = b.m.ProcessOutput(ctx, tn, id, pid, offset, follow, func(ev session.OutputEvent) error {
		switch ev.Kind {
		case "output":
			return fn(OutputEvent{Kind: "output", Offset: ev.Offset, Data: ev.Data})
		case "gap":
			return fn(OutputEvent{Kind: "gap", Offset: ev.From, From: ev.From, To: ev.To})
		case "exit":
			out := OutputEvent{Kind: "exit", ExitCode: ev.ExitCode}
			if ev.Signal > 0 {
				out.Signal = signalName(ev.Signal)
			}
			return fn(out)
		}
		return nil
	})
	return err
}

func (b *managerBackend) ReadFile(ctx context.Context, id, path string) (io.ReadCloser, error) {
	tn, err := b.tenantOf(ctx)
	if err != nil {
		return nil, err
	}
	d, err := b.m.ReadFile(ctx, tn, id, path)
	if err != nil {
		return nil, err
	}
	return &download{d: d, r: io.MultiReader(bytes.NewReader(d.First), d)}, nil
}

// download reads a session.Download to its end, where a transfer that
// broke off becomes an error instead of a quiet EOF.
type download struct {
	d *session.Download
	r io.Reader
}

func (d *download) Read(p []byte) (int, error) {
	n, err := d.r.Read(p)
	if err == io.EOF {
		if derr := d.d.Err(); derr != nil {
			return n, derr
		}
	}
	return n, err
}

func (d *download) Close() error { return d.d.Close() }

func (b *managerBackend) WriteFile(ctx context.Context, id, path string, r io.Reader, mode uint32) (int64, error) {
	tn, err := b.tenantOf(ctx)
	if err != nil {
		return 0, err
	}
	return b.m.WriteFile(ctx, tn, id, path, mode, r)
}

func (b *managerBackend) StatFile(ctx context.Context, id, path string) (*api.FileEntry, error) {
	tn, err := b.tenantOf(ctx)
	if err != nil {
		return nil, err
	}
	e, err := b.m.Stat(ctx, tn, id, path)
	if err != nil {
		return nil, err
	}
	fe := toAPIEntry(e)
	return &fe, nil
}

func (b *managerBackend) ListFiles(ctx context.Context, id, path string) ([]api.FileEntry, error) {
	tn, err := b.tenantOf(ctx)
	if err != nil {
		return nil, err
	}
	entries, err := b.m.ListFiles(ctx, tn, id, path)
	if err != nil {
		return nil, err
	}
	out := make([]api.FileEntry, 0, len(entries))
	for i := range entries {
		out = append(out, toAPIEntry(&entries[i]))
	}
	return out, nil
}

func (b *managerBackend) RemoveFile(ctx context.Context, id, path string, recursive bool) error {
	tn, err := b.tenantOf(ctx)
	if err != nil {
		return err
	}
	return b.m.Remove(ctx, tn, id, path, recursive)
}

// The conversions below are those of internal/httpapi, so that both
// transports describe a session, a process or a file alike.

// The encodings every transport shares (internal/wire).
var (
	toAPISession = wire.Session
	toAPIProcess = wire.Process
	toAPIEntry   = wire.Entry
	textOf       = wire.TextBase64
	signalName   = wire.SignalName
)
