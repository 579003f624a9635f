package conformance

import (
	"context"
	"io"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	warrenv1 "github.com/warrenhq/warren/api/gen/warren/v1"
	"github.com/warrenhq/warren/api/gen/warren/v1/warrenv1grpc"
	"github.com/warrenhq/warren/internal/daemon/daemontest"
)

func init() {
	register("grpc", func(t *testing.T, h *daemontest.Harness) Transport {
		// A stock grpc-go client: HTTP/2 in cleartext, the key on every
		// call.
		conn, err := grpc.NewClient(strings.TrimPrefix(h.URL, "http://"),
			grpc.WithTransportCredentials(insecure.NewCredentials()),
			grpc.WithPerRPCCredentials(grpcKey(h.AdminKey)))
		if err != nil {
			t.Fatalf("grpc client: %v", err)
		}
		t.Cleanup(func() { conn.Close() })
		return &grpcTransport{
			sessions: warrenv1grpc.NewSessionServiceClient(conn),
			execs:    warrenv1grpc.NewExecServiceClient(conn),
			procs:    warrenv1grpc.NewProcessServiceClient(conn),
			files:    warrenv1grpc.NewFileServiceClient(conn),
		}
	})
}

// grpcKey is a bearer key as per-call credentials.
type grpcKey string

func (k grpcKey) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": "Bearer " + string(k)}, nil
}

// RequireTransportSecurity is false: the suite talks h2c on loopback.
func (grpcKey) RequireTransportSecurity() bool { return false }

// grpcTransport is the RPC API through grpc-go stubs.
type grpcTransport struct {
	sessions warrenv1grpc.SessionServiceClient
	execs    warrenv1grpc.ExecServiceClient
	procs    warrenv1grpc.ProcessServiceClient
	files    warrenv1grpc.FileServiceClient
}

// Code is warren's class, from the status's ErrorDetail. An error without
// one names its gRPC code instead, which matches no class.
func (g *grpcTransport) Code(err error) string {
	if err == nil {
		return ""
	}
	st := status.Convert(err)
	for _, d := range st.Details() {
		if ed, ok := d.(*warrenv1.ErrorDetail); ok {
			return ed.GetCode()
		}
	}
	return "unclassified " + st.Code().String()
}

func (g *grpcTransport) CreateSession(ctx context.Context, id string) error {
	_, err := g.sessions.CreateSession(ctx, &warrenv1.CreateSessionRequest{Id: id})
	return err
}

func (g *grpcTransport) GetSession(ctx context.Context, id string) (string, error) {
	resp, err := g.sessions.GetSession(ctx, &warrenv1.GetSessionRequest{SessionId: id})
	if err != nil {
		return "", err
	}
	return resp.GetSession().GetState(), nil
}

func (g *grpcTransport) ListSessions(ctx context.Context) ([]string, error) {
	resp, err := g.sessions.ListSessions(ctx, &warrenv1.ListSessionsRequest{})
	if err != nil {
		return nil, err
	}
	return sessionIDs(resp.GetSessions()), nil
}

func (g *grpcTransport) DeleteSession(ctx context.Context, id string) error {
	_, err := g.sessions.DeleteSession(ctx, &warrenv1.DeleteSessionRequest{SessionId: id})
	return err
}

func (g *grpcTransport) Exec(ctx context.Context, id, command string) (*ExecResult, error) {
	res, err := g.execs.Exec(ctx, &warrenv1.ExecRequest{SessionId: id, Command: command})
	if err != nil {
		return nil, err
	}
	return rpcResult(res), nil
}

func (g *grpcTransport) ExecStream(ctx context.Context, id, command string) ([]Chunk, *ExecResult, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := g.execs.ExecStream(ctx, &warrenv1.ExecStreamRequest{SessionId: id, Command: command})
	if err != nil {
		return nil, nil, err
	}
	var chunks []Chunk
	var res *ExecResult
	for {
		ev, err := stream.Recv()
		if err == io.EOF {
			return execStreamEnd(chunks, res, nil)
		}
		if err != nil {
			return execStreamEnd(nil, nil, err)
		}
		chunks, res = addExecEvent(chunks, res, ev)
	}
}

func (g *grpcTransport) StartProcess(ctx context.Context, id, command string) (string, error) {
	resp, err := g.procs.StartProcess(ctx, &warrenv1.StartProcessRequest{SessionId: id, Command: command})
	if err != nil {
		return "", err
	}
	return resp.GetProcess().GetId(), nil
}

func (g *grpcTransport) ProcessOutput(ctx context.Context, id, pid string, offset int64, follow bool) ([]byte, *int, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := g.procs.ProcessOutput(ctx, &warrenv1.ProcessOutputRequest{SessionId: id, ProcessId: pid, Offset: offset, Follow: follow})
	if err != nil {
		return nil, nil, err
	}
	var data []byte
	var exit *int
	for {
		ev, err := stream.Recv()
		if err == io.EOF {
			return data, exit, nil
		}
		if err != nil {
			return nil, nil, err
		}
		data, exit = addOutputEvent(data, exit, ev)
	}
}

// uploadChunk is how much of a file one WriteFileStream message carries.
const uploadChunk = 64 << 10

// WriteFile streams the file in chunks, the way for files of any size.
func (g *grpcTransport) WriteFile(ctx context.Context, id, path string, data []byte) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := g.files.WriteFileStream(ctx)
	if err != nil {
		return err
	}
	for i := 0; i == 0 || i < len(data); i += uploadChunk {
		msg := &warrenv1.WriteFileStreamRequest{Data: data[i:min(i+uploadChunk, len(data))]}
		if i == 0 {
			msg.SessionId, msg.Path = id, path
		}
		if err := stream.Send(msg); err != nil {
			// io.EOF: the daemon answered early (an error); CloseAndRecv
			// has it.
			break
		}
	}
	_, err = stream.CloseAndRecv()
	return err
}

func (g *grpcTransport) ReadFile(ctx context.Context, id, path string) ([]byte, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := g.files.ReadFile(ctx, &warrenv1.ReadFileRequest{SessionId: id, Path: path})
	if err != nil {
		return nil, err
	}
	var data []byte
	for {
		msg, err := stream.Recv()
		if err == io.EOF {
			return data, nil
		}
		if err != nil {
			return nil, err
		}
		data = append(data, msg.GetData()...)
	}
}

func (g *grpcTransport) ListFiles(ctx context.Context, id, dir string) ([]string, error) {
	resp, err := g.files.ListFiles(ctx, &warrenv1.ListFilesRequest{SessionId: id, Path: dir})
	if err != nil {
		return nil, err
	}
	return entryNames(resp.GetEntries()), nil
}

func (g *grpcTransport) DeleteFile(ctx context.Context, id, path string) error {
	_, err := g.files.DeleteFile(ctx, &warrenv1.DeleteFileRequest{SessionId: id, Path: path})
	return err
}
