package mcpapi

import (
	"context"
	"errors"
	"io"
	"os"

	"github.com/warrenhq/warren/api"
	"github.com/warrenhq/warren/client"
	"github.com/warrenhq/warren/internal/errdefs"
)

// clientBackend calls a daemon's REST API, as the caller that c
// authenticates as.
type clientBackend struct{ c *client.Client }

// NewClientBackend returns a backend that calls the daemon c talks to
// (what `warren mcp` serves over stdio). The daemon's error envelopes keep
// their code; a daemon that cannot be reached is "unavailable".
func NewClientBackend(c *client.Client) Backend { return &clientBackend{c: c} }

// classify turns the client's errors into errdefs classes: the envelope's
// code is kept, a failure to reach the daemon is unavailable.
func classify(err error) error {
	if err == nil {
		return nil
	}
	var ce *client.Error
	switch {
	case errors.As(err, &ce):
		return errdefs.New(errdefs.FromCode(ce.Code), "%s", ce.Message)
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return err
	}
	return errdefs.New(errdefs.ErrUnavailable, "cannot reach the warren daemon: %v", err)
}

func (b *clientBackend) CreateSession(ctx context.Context, req *api.CreateSessionRequest) (*api.Session, error) {
	s, err := b.c.CreateSession(ctx, req)
	return s, classify(err)
}

func (b *clientBackend) GetSession(ctx context.Context, id string) (*api.Session, error) {
	s, err := b.c.GetSession(ctx, id)
	return s, classify(err)
}

func (b *clientBackend) NetworkDenials(ctx context.Context, id string) ([]api.NetworkDenial, error) {
	d, err := b.c.NetworkDenials(ctx, id)
	return d, classify(err)
}

func (b *clientBackend) ListSessions(ctx context.Context) ([]api.Session, error) {
	l, err := b.c.ListSessions(ctx)
	return l, classify(err)
}

func (b *clientBackend) DeleteSession(ctx context.Context, id string) error {
	return classify(b.c.DeleteSession(ctx, id))
}

func (b *clientBackend) Exec(ctx context.Context, id string, req *api.ExecRequest) (*api.ExecResult, error) {
	res, err := b.c.Exec(ctx, id, req)
	return res, classify(err)
}

func (b *clientBackend) StartProcess(ctx context.Context, id string, req *api.StartProcessRequest) (*api.Process, error) {
	p, err := b.c.StartProcess(ctx, id, req)
	return p, classify(err)
}

func (b *clientBackend) GetProcess(ctx context.Context, id, pid string) (*api.Process, error) {
	p, err := b.c.GetProcess(ctx, id, pid)
	return p, classify(err)
}

// errStop marks an error of the caller's fn, which is returned as is.
type errStop struct{ err error }

func (e errStop) Error() string { return e.err.Error() }

func (b *clientBackend) ProcessOutput(ctx context.Context, id, pid string, offset int64, follow bool, fn func(OutputEvent) error) error {
	err := b.c.ProcessOutput(ctx, id, pid, offset, follow, func(ev client.ProcessEvent) error {
		var out OutputEvent
		switch ev.Kind {
		case client.ProcessEventOutput:
			out = OutputEvent{Kind: "output", Offset: ev.Offset, Data: ev.Data}
		case client.ProcessEventGap:
			out = OutputEvent{Kind: "gap", Offset: ev.Gap.From, From: ev.Gap.From, To: ev.Gap.To}
		case client.ProcessEventExit:
			out = OutputEvent{Kind: "exit", Offset: ev.Offset, ExitCode: ev.Exit.ExitCode, Signal: ev.Exit.Signal}
		default:
			return nil
		}
		if err := fn(out); err != nil {
			return errStop{err}
		}
		return nil
	})
	var stop errStop
	if errors.As(err, &stop) {
		return stop.err
	}
	return classify(err)
}

func (b *clientBackend) ReadFile(ctx context.Context, id, path string) (io.ReadCloser, error) {
	rc, err := b.c.ReadFile(ctx, id, path)
	if err != nil {
		return nil, classify(err)
	}
	return rc, nil
}

func (b *clientBackend) WriteFile(ctx context.Context, id, path string, r io.Reader, mode uint32) (int64, error) {
	w, err := b.c.WriteFile(ctx, id, path, r, fileMode(mode))
	if err != nil {
		return 0, classify(err)
	}
	return w.Size, nil
}

// fileMode turns permission bits (0o7777) into an os.FileMode.
func fileMode(m uint32) os.FileMode {
	mode := os.FileMode(m & 0o777)
	if m&0o4000 != 0 {
		mode |= os.ModeSetuid
	}
	if m&0o2000 != 0 {
		mode |= os.ModeSetgid
	}
	if m&0o1000 != 0 {
		mode |= os.ModeSticky
	}
	return mode
}

func (b *clientBackend) StatFile(ctx context.Context, id, path string) (*api.FileEntry, error) {
	e, err := b.c.StatFile(ctx, id, path)
	return e, classify(err)
}

func (b *clientBackend) ListFiles(ctx context.Context, id, path string) ([]api.FileEntry, error) {
	l, err := b.c.ListFiles(ctx, id, path)
	return l, classify(err)
}

func (b *clientBackend) RemoveFile(ctx context.Context, id, path string, recursive bool) error {
	return classify(b.c.RemoveFile(ctx, id, path, recursive))
}
