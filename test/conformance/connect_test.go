package conformance

import (
	"context"
	"errors"
	"net/http"
	"testing"

	"connectrpc.com/connect"

	warrenv1 "github.com/warrenhq/warren/api/gen/warren/v1"
	"github.com/warrenhq/warren/api/gen/warren/v1/warrenv1connect"
	"github.com/warrenhq/warren/internal/daemon/daemontest"
	"github.com/warrenhq/warren/internal/grpcapi"
)

func init() {
	register("connect", func(t *testing.T, h *daemontest.Harness) Transport {
		// The Connect protocol with JSON, over HTTP/1.1: what a browser or
		// curl speaks.
		opts := []connect.ClientOption{connect.WithProtoJSON(), connect.WithInterceptors(connectAuth(h.AdminKey))}
		return &connectTransport{
			sessions: warrenv1connect.NewSessionServiceClient(http.DefaultClient, h.URL, opts...),
			execs:    warrenv1connect.NewExecServiceClient(http.DefaultClient, h.URL, opts...),
			procs:    warrenv1connect.NewProcessServiceClient(http.DefaultClient, h.URL, opts...),
			files:    warrenv1connect.NewFileServiceClient(http.DefaultClient, h.URL, opts...),
		}
	})
}

// connectAuth sends the key with every call, unary and streaming.
type connectAuth string

func (k connectAuth) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		req.Header().Set("Authorization", "Bearer "+string(k))
		return next(ctx, req)
	}
}

func (k connectAuth) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return func(ctx context.Context, spec connect.Spec) connect.StreamingClientConn {
		conn := next(ctx, spec)
		conn.RequestHeader().Set("Authorization", "Bearer "+string(k))
		return conn
	}
}

func (k connectAuth) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return next
}

// connectTransport is the RPC API through connect-go clients.
type connectTransport struct {
	sessions warrenv1connect.SessionServiceClient
	execs    warrenv1connect.ExecServiceClient
	procs    warrenv1connect.ProcessServiceClient
	files    warrenv1connect.FileServiceClient
}

// Code is warren's class, from the error's metadata. An error without one
// names its connect code instead, which matches no class.
func (c *connectTransport) Code(err error) string {
	if err == nil {
		return ""
	}
	var ce *connect.Error
	if errors.As(err, &ce) {
		if code := ce.Meta().Get(grpcapi.ErrorCodeKey); code != "" {
			return code
		}
	}
	return "unclassified " + connect.CodeOf(err).String()
}

func (c *connectTransport) CreateSession(ctx context.Context, id string) error {
	_, err := c.sessions.CreateSession(ctx, connect.NewRequest(&warrenv1.CreateSessionRequest{Id: id}))
	return err
}

func (c *connectTransport) GetSession(ctx context.Context, id string) (string, error) {
	resp, err := c.sessions.GetSession(ctx, connect.NewRequest(&warrenv1.GetSessionRequest{SessionId: id}))
	if err != nil {
		return "", err
	}
	return resp.Msg.GetSession().GetState(), nil
}

func (c *connectTransport) ListSessions(ctx context.Context) ([]string, error) {
	resp, err := c.sessions.ListSessions(ctx, connect.NewRequest(&warrenv1.ListSessionsRequest{}))
	if err != nil {
		return nil, err
	}
	return sessionIDs(resp.Msg.GetSessions()), nil
}

func (c *connectTransport) DeleteSession(ctx context.Context, id string) error {
	_, err := c.sessions.DeleteSession(ctx, connect.NewRequest(&warrenv1.DeleteSessionRequest{SessionId: id}))
	return err
}

func (c *connectTransport) Exec(ctx context.Context, id, command string) (*ExecResult, error) {
	resp, err := c.execs.Exec(ctx, connect.NewRequest(&warrenv1.ExecRequest{SessionId: id, Command: command}))
	if err != nil {
		return nil, err
	}
	return rpcResult(resp.Msg), nil
}

func (c *connectTransport) ExecStream(ctx context.Context, id, command string) ([]Chunk, *ExecResult, error) {
	stream, err := c.execs.ExecStream(ctx, connect.NewRequest(&warrenv1.ExecStreamRequest{SessionId: id, Command: command}))
	if err != nil {
		return nil, nil, err
	}
	defer stream.Close()
	var chunks []Chunk
	var res *ExecResult
	for stream.Receive() {
		chunks, res = addExecEvent(chunks, res, stream.Msg())
	}
	return execStreamEnd(chunks, res, stream.Err())
}

func (c *connectTransport) StartProcess(ctx context.Context, id, command string) (string, error) {
	resp, err := c.procs.StartProcess(ctx, connect.NewRequest(&warrenv1.StartProcessRequest{SessionId: id, Command: command}))
	if err != nil {
		return "", err
	}
	return resp.Msg.GetProcess().GetId(), nil
}

func (c *connectTransport) ProcessOutput(ctx context.Context, id, pid string, offset int64, follow bool) ([]byte, *int, error) {
	stream, err := c.procs.ProcessOutput(ctx, connect.NewRequest(&warrenv1.ProcessOutputRequest{SessionId: id, ProcessId: pid, Offset: offset, Follow: follow}))
	if err != nil {
		return nil, nil, err
	}
	defer stream.Close()
	var data []byte
	var exit *int
	for stream.Receive() {
		data, exit = addOutputEvent(data, exit, stream.Msg())
	}
	if err := stream.Err(); err != nil {
		return nil, nil, err
	}
	return data, exit, nil
}

// WriteFile sends the file in one message (the suite's files fit).
func (c *connectTransport) WriteFile(ctx context.Context, id, path string, data []byte) error {
	_, err := c.files.WriteFile(ctx, connect.NewRequest(&warrenv1.WriteFileRequest{SessionId: id, Path: path, Data: data}))
	return err
}

func (c *connectTransport) ReadFile(ctx context.Context, id, path string) ([]byte, error) {
	stream, err := c.files.ReadFile(ctx, connect.NewRequest(&warrenv1.ReadFileRequest{SessionId: id, Path: path}))
	if err != nil {
		return nil, err
	}
	defer stream.Close()
	var data []byte
	for stream.Receive() {
		data = append(data, stream.Msg().GetData()...)
	}
	if err := stream.Err(); err != nil {
		return nil, err
	}
	return data, nil
}

func (c *connectTransport) ListFiles(ctx context.Context, id, dir string) ([]string, error) {
	resp, err := c.files.ListFiles(ctx, connect.NewRequest(&warrenv1.ListFilesRequest{SessionId: id, Path: dir}))
	if err != nil {
		return nil, err
	}
	return entryNames(resp.Msg.GetEntries()), nil
}

func (c *connectTransport) DeleteFile(ctx context.Context, id, path string) error {
	_, err := c.files.DeleteFile(ctx, connect.NewRequest(&warrenv1.DeleteFileRequest{SessionId: id, Path: path}))
	return err
}

// The conversions below are shared with the gRPC adapter.

func sessionIDs(ss []*warrenv1.Session) []string {
	var ids []string
	for _, s := range ss {
		ids = append(ids, s.GetId())
	}
	return ids
}

func entryNames(es []*warrenv1.FileEntry) []string {
	var names []string
	for _, e := range es {
		names = append(names, e.GetName())
	}
	return names
}

func rpcResult(r *warrenv1.ExecResult) *ExecResult {
	return &ExecResult{Stdout: r.GetStdout(), Stderr: r.GetStderr(), ExitCode: int(r.GetExitCode()), TimedOut: r.GetTimedOut(), Truncated: r.GetTruncated()}
}

// chunkData is a chunk's bytes, whether they came as text or as bytes.
func chunkData(c *warrenv1.OutputChunk) string {
	if c.GetBase64() != nil {
		return string(c.GetBase64())
	}
	return c.GetText()
}

// addExecEvent adds one ExecStream message to what was received so far.
func addExecEvent(chunks []Chunk, res *ExecResult, ev *warrenv1.ExecStreamResponse) ([]Chunk, *ExecResult) {
	switch e := ev.GetEvent().(type) {
	case *warrenv1.ExecStreamResponse_Stdout:
		chunks = append(chunks, Chunk{Stream: "stdout", Data: chunkData(e.Stdout)})
	case *warrenv1.ExecStreamResponse_Stderr:
		chunks = append(chunks, Chunk{Stream: "stderr", Data: chunkData(e.Stderr)})
	case *warrenv1.ExecStreamResponse_Exit:
		res = rpcResult(e.Exit)
	}
	return chunks, res
}

// execStreamEnd checks how an ExecStream ended: with its exit message.
func execStreamEnd(chunks []Chunk, res *ExecResult, err error) ([]Chunk, *ExecResult, error) {
	if err != nil {
		return nil, nil, err
	}
	if res == nil {
		return nil, nil, errors.New("the stream ended without an exit message")
	}
	return chunks, res, nil
}

// addOutputEvent adds one ProcessOutput message to the data and exit code
// received so far.
func addOutputEvent(data []byte, exit *int, ev *warrenv1.ProcessOutputResponse) ([]byte, *int) {
	if o := ev.GetOutput(); o != nil {
		data = append(data, chunkData(o)...)
	}
	if e := ev.GetExit(); e != nil {
		code := int(e.GetExitCode())
		exit = &code
	}
	return data, exit
}
