package conformance

import (
	"bytes"
	"context"
	"io"
	"testing"

	"github.com/warrenhq/warren/api"
	"github.com/warrenhq/warren/client"
	"github.com/warrenhq/warren/internal/daemon/daemontest"
)

func init() {
	register("rest", func(t *testing.T, h *daemontest.Harness) Transport { return &rest{c: h.Client} })
}

// rest is the REST API through the Go client.
type rest struct{ c *client.Client }

func (r *rest) Code(err error) string { return client.Code(err) }

func (r *rest) CreateSession(ctx context.Context, id string) error {
	_, err := r.c.CreateSession(ctx, &api.CreateSessionRequest{ID: id})
	return err
}

func (r *rest) GetSession(ctx context.Context, id string) (string, error) {
	s, err := r.c.GetSession(ctx, id)
	if err != nil {
		return "", err
	}
	return s.State, nil
}

func (r *rest) ListSessions(ctx context.Context) ([]string, error) {
	ss, err := r.c.ListSessions(ctx)
	var ids []string
	for _, s := range ss {
		ids = append(ids, s.ID)
	}
	return ids, err
}

func (r *rest) DeleteSession(ctx context.Context, id string) error { return r.c.DeleteSession(ctx, id) }

func toResult(res *api.ExecResult) *ExecResult {
	return &ExecResult{Stdout: res.Stdout, Stderr: res.Stderr, ExitCode: res.ExitCode, TimedOut: res.TimedOut, Truncated: res.Truncated}
}

func (r *rest) Exec(ctx context.Context, id, command string) (*ExecResult, error) {
	res, err := r.c.Exec(ctx, id, &api.ExecRequest{Command: command})
	if err != nil {
		return nil, err
	}
	return toResult(res), nil
}

func (r *rest) ExecStream(ctx context.Context, id, command string) ([]Chunk, *ExecResult, error) {
	var chunks []Chunk
	res, err := r.c.ExecStream(ctx, id, &api.ExecRequest{Command: command}, func(stream string, p []byte) error {
		chunks = append(chunks, Chunk{Stream: stream, Data: string(p)})
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	return chunks, toResult(res), nil
}

func (r *rest) StartProcess(ctx context.Context, id, command string) (string, error) {
	p, err := r.c.StartProcess(ctx, id, &api.StartProcessRequest{Command: command})
	if err != nil {
		return "", err
	}
	return p.ID, nil
}

func (r *rest) ProcessOutput(ctx context.Context, id, pid string, offset int64, follow bool) ([]byte, *int, error) {
	var data []byte
	var exit *int
	err := r.c.ProcessOutput(ctx, id, pid, offset, follow, func(ev client.ProcessEvent) error {
		switch ev.Kind {
		case client.ProcessEventOutput:
			data = append(data, ev.Data...)
		case client.ProcessEventExit:
			code := ev.Exit.ExitCode
			exit = &code
		}
		return nil
	})
	return data, exit, err
}

func (r *rest) WriteFile(ctx context.Context, id, path string, data []byte) error {
	_, err := r.c.WriteFile(ctx, id, path, bytes.NewReader(data), 0)
	return err
}

func (r *rest) ReadFile(ctx context.Context, id, path string) ([]byte, error) {
	rc, err := r.c.ReadFile(ctx, id, path)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	return io.ReadAll(rc)
}

func (r *rest) ListFiles(ctx context.Context, id, dir string) ([]string, error) {
	es, err := r.c.ListFiles(ctx, id, dir)
	var names []string
	for _, e := range es {
		names = append(names, e.Name)
	}
	return names, err
}

func (r *rest) DeleteFile(ctx context.Context, id, path string) error {
	return r.c.RemoveFile(ctx, id, path, false)
}
