package daemon_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"

	"connectrpc.com/connect"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	reflectionpb "google.golang.org/grpc/reflection/grpc_reflection_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	"github.com/warrenhq/warren/api"
	warrenv1 "github.com/warrenhq/warren/api/gen/warren/v1"
	"github.com/warrenhq/warren/api/gen/warren/v1/warrenv1connect"
	"github.com/warrenhq/warren/api/gen/warren/v1/warrenv1grpc"
	"github.com/warrenhq/warren/internal/config"
	"github.com/warrenhq/warren/internal/daemon/daemontest"
)

// bearerToken authenticates every call of a grpc-go connection.
type bearerToken string

func (k bearerToken) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": "Bearer " + string(k)}, nil
}

// RequireTransportSecurity is false: the tests talk h2c on loopback.
func (bearerToken) RequireTransportSecurity() bool { return false }

// dialGRPC connects a stock grpc-go client over h2c, with key on every
// call ("" for none).
func dialGRPC(t testing.TB, h *daemontest.Harness, key string) *grpc.ClientConn {
	t.Helper()
	opts := []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}
	if key != "" {
		opts = append(opts, grpc.WithPerRPCCredentials(bearerToken(key)))
	}
	conn, err := grpc.NewClient(strings.TrimPrefix(h.URL, "http://"), opts...)
	if err != nil {
		t.Fatalf("grpc client: %v", err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// grpcClass is warren's error class of a grpc-go error, from its detail.
func grpcClass(err error) string {
	for _, d := range status.Convert(err).Details() {
		if ed, ok := d.(*warrenv1.ErrorDetail); ok {
			return ed.GetCode()
		}
	}
	return ""
}

func TestGRPCInterop(t *testing.T) {
	h := daemontest.Start(t, nil)
	ctx := t.Context()
	conn := dialGRPC(t, h, h.AdminKey)
	sessions := warrenv1grpc.NewSessionServiceClient(conn)
	execs := warrenv1grpc.NewExecServiceClient(conn)
	procs := warrenv1grpc.NewProcessServiceClient(conn)
	files := warrenv1grpc.NewFileServiceClient(conn)

	cr, err := sessions.CreateSession(ctx, &warrenv1.CreateSessionRequest{Id: "g1", Labels: map[string]string{"via": "grpc"}})
	if err != nil || !cr.GetCreated() || cr.GetSession().GetId() != "g1" || cr.GetSession().GetState() != "running" {
		t.Fatalf("CreateSession: %v %v", cr, err)
	}
	if again, err := sessions.CreateSession(ctx, &warrenv1.CreateSessionRequest{Id: "g1"}); err != nil || again.GetCreated() {
		t.Errorf("CreateSession of an existing id: %v %v, want created=false", again, err)
	}
	if gs, err := sessions.GetSession(ctx, &warrenv1.GetSessionRequest{SessionId: "g1"}); err != nil || gs.GetSession().GetLabels()["via"] != "grpc" || gs.GetSession().GetCreatedAt() == nil {
		t.Errorf("GetSession: %v %v", gs, err)
	}

	// Unary: the shell keeps its state between calls; stderr and the exit
	// code come apart from stdout.
	res, err := execs.Exec(ctx, &warrenv1.ExecRequest{SessionId: "g1", Command: "cd /tmp; echo hi; echo oops >&2; (exit 3)"})
	if err != nil || res.GetStdout() != "hi\n" || res.GetStderr() != "oops\n" || res.GetExitCode() != 3 {
		t.Fatalf("Exec: %v %v", res, err)
	}
	if res, err := execs.Exec(ctx, &warrenv1.ExecRequest{SessionId: "g1", Command: "pwd; cat", Input: &warrenv1.ExecRequest_Stdin{Stdin: "in"}}); err != nil || res.GetStdout() != "/tmp\nin" {
		t.Errorf("Exec after cd, with stdin: %v %v", res, err)
	}
	if res, err := execs.Exec(ctx, &warrenv1.ExecRequest{SessionId: "g1", Command: `printf '\377'`}); err != nil || !bytes.Equal(res.GetStdoutBase64(), []byte{0xff}) || res.GetStdout() != "\uFFFD" {
		t.Errorf("Exec with binary output: %v %v", res, err)
	}

	// Server streaming: the chunks in order, then one exit message.
	stream, err := execs.ExecStream(ctx, &warrenv1.ExecStreamRequest{SessionId: "g1", Command: "echo a; sleep 0.05; echo b >&2; sleep 0.05; echo c"})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	var exit *warrenv1.ExecResult
	for {
		ev, err := stream.Recv()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("ExecStream: %v", err)
		}
		if exit != nil {
			t.Fatalf("ExecStream sent %v after exit", ev)
		}
		switch e := ev.GetEvent().(type) {
		case *warrenv1.ExecStreamResponse_Stdout:
			got = append(got, "out:"+e.Stdout.GetText())
		case *warrenv1.ExecStreamResponse_Stderr:
			got = append(got, "err:"+e.Stderr.GetText())
		case *warrenv1.ExecStreamResponse_Exit:
			exit = e.Exit
		}
	}
	if want := []string{"out:a\n", "err:b\n", "out:c\n"}; !slices.Equal(got, want) || exit == nil || exit.GetExitCode() != 0 || exit.GetStdout() != "" {
		t.Errorf("ExecStream: %q then %v, want %q then exit 0", got, exit, want)
	}

	if res, err := execs.Run(ctx, &warrenv1.RunRequest{Argv: []string{"sh", "-c", "echo ran"}}); err != nil || res.GetStdout() != "ran\n" {
		t.Errorf("Run: %v %v", res, err)
	}

	// A process's output from an offset, followed to the end.
	sp, err := procs.StartProcess(ctx, &warrenv1.StartProcessRequest{SessionId: "g1", Command: "echo one; sleep 0.2; echo two >&2"})
	if err != nil {
		t.Fatal(err)
	}
	pid := sp.GetProcess().GetId()
	out, code := grpcOutput(t, procs, "g1", pid, 0, true)
	if out != "one\ntwo\n" || code == nil || *code != 0 {
		t.Errorf("ProcessOutput follow: %q exit %v", out, code)
	}
	if out, code := grpcOutput(t, procs, "g1", pid, 4, false); out != "two\n" || code == nil {
		t.Errorf("ProcessOutput from 4: %q exit %v", out, code)
	}
	if gp, err := procs.GetProcess(ctx, &warrenv1.GetProcessRequest{SessionId: "g1", ProcessId: pid}); err != nil || gp.GetProcess().GetState() != "exited" || gp.GetProcess().ExitCode == nil {
		t.Errorf("GetProcess: %v %v", gp, err)
	}

	// Files: a client-streamed upload, a streamed download.
	data := bytes.Repeat([]byte("0123456789abcdef"), 40<<10) // 640 KiB
	up, err := files.WriteFileStream(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < len(data); i += 100 << 10 {
		msg := &warrenv1.WriteFileStreamRequest{Data: data[i:min(i+100<<10, len(data))]}
		if i == 0 {
			msg.SessionId, msg.Path, msg.Mode = "g1", "dir/big.bin", "0600"
		}
		if err := up.Send(msg); err != nil {
			t.Fatal(err)
		}
	}
	if w, err := up.CloseAndRecv(); err != nil || w.GetSize() != int64(len(data)) {
		t.Fatalf("WriteFileStream: %v %v", w, err)
	}
	if b := grpcRead(t, files, "g1", "dir/big.bin"); !bytes.Equal(b, data) {
		t.Errorf("ReadFile: %d bytes, want the %d written", len(b), len(data))
	}
	if st, err := files.StatFile(ctx, &warrenv1.StatFileRequest{SessionId: "g1", Path: "dir/big.bin"}); err != nil || st.GetEntry().GetMode() != "0600" || st.GetEntry().GetSize() != int64(len(data)) {
		t.Errorf("StatFile: %v %v", st, err)
	}

	// Errors: the code, the message and warren's class.
	_, err = execs.Exec(ctx, &warrenv1.ExecRequest{SessionId: "nope", Command: "true"})
	if status.Code(err) != codes.NotFound || grpcClass(err) != "not_found" || !strings.Contains(status.Convert(err).Message(), "nope") {
		t.Errorf("Exec in a missing session: %v (class %q)", err, grpcClass(err))
	}
	if _, err := execs.Exec(ctx, &warrenv1.ExecRequest{SessionId: "g1"}); status.Code(err) != codes.InvalidArgument || grpcClass(err) != "invalid_argument" {
		t.Errorf("Exec without a command: %v", err)
	}
	if _, err := files.DeleteFile(ctx, &warrenv1.DeleteFileRequest{SessionId: "g1", Path: "dir"}); status.Code(err) != codes.FailedPrecondition || grpcClass(err) != "conflict" {
		t.Errorf("DeleteFile of a full directory: %v, want FailedPrecondition (conflict)", err)
	}
	if _, err := warrenv1grpc.NewSessionServiceClient(dialGRPC(t, h, "")).ListSessions(ctx, &warrenv1.ListSessionsRequest{}); status.Code(err) != codes.Unauthenticated {
		t.Errorf("ListSessions without a key: %v, want Unauthenticated", err)
	}
	if _, err := warrenv1grpc.NewSessionServiceClient(dialGRPC(t, h, flipLast(h.AdminKey))).ListSessions(ctx, &warrenv1.ListSessionsRequest{}); status.Code(err) != codes.Unauthenticated {
		t.Errorf("ListSessions with a wrong key: %v, want Unauthenticated", err)
	}

	if _, err := sessions.DeleteSession(ctx, &warrenv1.DeleteSessionRequest{SessionId: "g1"}); err != nil {
		t.Fatal(err)
	}
	if _, err := sessions.GetSession(ctx, &warrenv1.GetSessionRequest{SessionId: "g1"}); status.Code(err) != codes.NotFound {
		t.Errorf("GetSession after delete: %v", err)
	}
}

// grpcOutput reads a process's output and its exit code (nil if none came).
func grpcOutput(t *testing.T, procs warrenv1grpc.ProcessServiceClient, sid, pid string, offset int64, follow bool) (string, *int32) {
	t.Helper()
	stream, err := procs.ProcessOutput(t.Context(), &warrenv1.ProcessOutputRequest{SessionId: sid, ProcessId: pid, Offset: offset, Follow: follow})
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	var code *int32
	for {
		ev, err := stream.Recv()
		if err == io.EOF {
			return out.String(), code
		}
		if err != nil {
			t.Fatalf("ProcessOutput: %v", err)
		}
		if o := ev.GetOutput(); o != nil {
			if o.GetOffset() != offset+int64(out.Len()) {
				t.Errorf("chunk at offset %d, want %d", o.GetOffset(), offset+int64(out.Len()))
			}
			out.WriteString(o.GetText())
			out.Write(o.GetBase64())
		}
		if e := ev.GetExit(); e != nil {
			c := e.GetExitCode()
			code = &c
		}
	}
}

func grpcRead(t *testing.T, files warrenv1grpc.FileServiceClient, sid, path string) []byte {
	t.Helper()
	stream, err := files.ReadFile(t.Context(), &warrenv1.ReadFileRequest{SessionId: sid, Path: path})
	if err != nil {
		t.Fatal(err)
	}
	var b []byte
	for {
		msg, err := stream.Recv()
		if err == io.EOF {
			return b
		}
		if err != nil {
			t.Fatalf("ReadFile %s: %v", path, err)
		}
		b = append(b, msg.GetData()...)
	}
}

// TestGRPCTenantIsolation calls every RPC that names a session, as another
// tenant, on a session that exists: each answers NotFound, with the message
// a missing session gets.
func TestGRPCTenantIsolation(t *testing.T) {
	h := daemontest.Start(t, nil)
	ctx := t.Context()
	a := newKey(t, h, api.CreateKeyRequest{Tenant: "a"}).Secret
	b := newKey(t, h, api.CreateKeyRequest{Tenant: "b"}).Secret
	ca, cb := dialGRPC(t, h, a), dialGRPC(t, h, b)
	if _, err := warrenv1grpc.NewSessionServiceClient(ca).CreateSession(ctx, &warrenv1.CreateSessionRequest{Id: "s"}); err != nil {
		t.Fatal(err)
	}
	if _, err := warrenv1grpc.NewFileServiceClient(ca).WriteFile(ctx, &warrenv1.WriteFileRequest{SessionId: "s", Path: "secret.txt", Data: []byte("a's")}); err != nil {
		t.Fatal(err)
	}
	sp, err := warrenv1grpc.NewProcessServiceClient(ca).StartProcess(ctx, &warrenv1.StartProcessRequest{SessionId: "s", Command: "sleep 60"})
	if err != nil {
		t.Fatal(err)
	}
	pid := sp.GetProcess().GetId()

	// call invokes method with a request naming session sid.
	call := func(conn *grpc.ClientConn, md protoreflect.MethodDescriptor, sid string) error {
		mt, err := protoregistry.GlobalTypes.FindMessageByName(md.Input().FullName())
		if err != nil {
			t.Fatal(err)
		}
		req := mt.New()
		set := func(name string, v protoreflect.Value) {
			if f := md.Input().Fields().ByName(protoreflect.Name(name)); f != nil {
				req.Set(f, v)
			}
		}
		set("session_id", protoreflect.ValueOfString(sid))
		set("process_id", protoreflect.ValueOfString(pid))
		set("path", protoreflect.ValueOfString("secret.txt"))
		set("command", protoreflect.ValueOfString("cat secret.txt"))
		set("signal", protoreflect.ValueOfString("KILL"))
		set("cols", protoreflect.ValueOfInt32(80))
		set("rows", protoreflect.ValueOfInt32(24))
		om, err := protoregistry.GlobalTypes.FindMessageByName(md.Output().FullName())
		if err != nil {
			t.Fatal(err)
		}
		path := "/" + string(md.Parent().FullName()) + "/" + string(md.Name())
		if !md.IsStreamingClient() && !md.IsStreamingServer() {
			return conn.Invoke(ctx, path, req.Interface(), om.New().Interface())
		}
		s, err := conn.NewStream(ctx, &grpc.StreamDesc{ClientStreams: md.IsStreamingClient(), ServerStreams: md.IsStreamingServer()}, path)
		if err != nil {
			return err
		}
		if err := s.SendMsg(req.Interface()); err != nil && err != io.EOF {
			return err
		}
		s.CloseSend()
		for {
			if err := s.RecvMsg(om.New().Interface()); err != nil {
				if err == io.EOF {
					return nil
				}
				return err
			}
		}
	}
	tried := 0
	svcs := warrenv1.File_warren_v1_warren_proto.Services()
	for i := range svcs.Len() {
		methods := svcs.Get(i).Methods()
		for j := range methods.Len() {
			md := methods.Get(j)
			if md.Input().Fields().ByName("session_id") == nil {
				continue
			}
			tried++
			err := call(cb, md, "s")
			if status.Code(err) != codes.NotFound || grpcClass(err) != "not_found" {
				t.Errorf("b: %s on a's session: %v, want NotFound", md.FullName(), err)
				continue
			}
			miss := call(cb, md, "missing")
			if strings.ReplaceAll(status.Convert(miss).Message(), "missing", "s") != status.Convert(err).Message() {
				t.Errorf("b: %s: %q for a's session, %q for a missing one", md.FullName(), status.Convert(err).Message(), status.Convert(miss).Message())
			}
		}
	}
	if tried < 19 {
		t.Fatalf("tried %d RPCs, want every one that names a session", tried)
	}
	// a's session and process are untouched; b sees no session.
	if gp, err := warrenv1grpc.NewProcessServiceClient(ca).GetProcess(ctx, &warrenv1.GetProcessRequest{SessionId: "s", ProcessId: pid}); err != nil || gp.GetProcess().GetState() != "running" {
		t.Errorf("a's process after b's calls: %v %v", gp, err)
	}
	if ls, err := warrenv1grpc.NewSessionServiceClient(cb).ListSessions(ctx, &warrenv1.ListSessionsRequest{}); err != nil || len(ls.GetSessions()) != 0 {
		t.Errorf("b lists %v %v", ls, err)
	}
	if _, err := warrenv1grpc.NewSessionServiceClient(cb).ListSessions(ctx, &warrenv1.ListSessionsRequest{All: true}); status.Code(err) != codes.PermissionDenied {
		t.Errorf("b lists every tenant's sessions: %v, want PermissionDenied", err)
	}
	all, err := warrenv1grpc.NewSessionServiceClient(dialGRPC(t, h, h.AdminKey)).ListSessions(ctx, &warrenv1.ListSessionsRequest{All: true})
	if err != nil || len(all.GetSessions()) != 1 || all.GetSessions()[0].GetTenant() != "a" {
		t.Errorf("the admin lists every tenant's sessions: %v %v", all, err)
	}
}

// TestGRPCReflection: grpcurl and Postman find the services without the
// proto and without a key.
func TestGRPCReflection(t *testing.T) {
	h := daemontest.Start(t, nil)
	stream, err := reflectionpb.NewServerReflectionClient(dialGRPC(t, h, "")).ServerReflectionInfo(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	list := func() []string {
		if err := stream.Send(&reflectionpb.ServerReflectionRequest{MessageRequest: &reflectionpb.ServerReflectionRequest_ListServices{}}); err != nil {
			t.Fatal(err)
		}
		resp, err := stream.Recv()
		if err != nil {
			t.Fatalf("reflection: %v", err)
		}
		var names []string
		for _, s := range resp.GetListServicesResponse().GetService() {
			names = append(names, s.GetName())
		}
		return names
	}
	names := list()
	for _, want := range []string{"warren.v1.SessionService", "warren.v1.ExecService", "warren.v1.ProcessService", "warren.v1.FileService"} {
		if !slices.Contains(names, want) {
			t.Errorf("reflection lists %v, without %s", names, want)
		}
	}
	// The file holding a service, for a client to build requests from.
	if err := stream.Send(&reflectionpb.ServerReflectionRequest{MessageRequest: &reflectionpb.ServerReflectionRequest_FileContainingSymbol{FileContainingSymbol: "warren.v1.ExecService"}}); err != nil {
		t.Fatal(err)
	}
	resp, err := stream.Recv()
	if err != nil || len(resp.GetFileDescriptorResponse().GetFileDescriptorProto()) == 0 {
		t.Errorf("file containing warren.v1.ExecService: %v %v", resp, err)
	}
}

// TestConnectClients drives the API with connect-go clients in each
// protocol and codec, and with plain HTTP+JSON as curl would.
func TestConnectClients(t *testing.T) {
	h := daemontest.Start(t, nil)
	ctx := t.Context()
	auth := connect.WithInterceptors(connect.UnaryInterceptorFunc(func(next connect.UnaryFunc) connect.UnaryFunc {
		return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
			req.Header().Set("Authorization", "Bearer "+h.AdminKey)
			return next(ctx, req)
		}
	}), streamAuth(h.AdminKey))
	h2c := &http.Client{Transport: &http.Transport{Protocols: h2cOnly()}}
	for _, tc := range []struct {
		name   string
		client *http.Client
		opts   []connect.ClientOption
	}{
		{"connect+proto", http.DefaultClient, nil},
		{"connect+json", http.DefaultClient, []connect.ClientOption{connect.WithProtoJSON()}},
		{"grpc-web+proto", http.DefaultClient, []connect.ClientOption{connect.WithGRPCWeb()}},
		{"grpc+json over h2c", h2c, []connect.ClientOption{connect.WithGRPC(), connect.WithProtoJSON()}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opts := append([]connect.ClientOption{auth}, tc.opts...)
			sessions := warrenv1connect.NewSessionServiceClient(tc.client, h.URL, opts...)
			execs := warrenv1connect.NewExecServiceClient(tc.client, h.URL, opts...)
			files := warrenv1connect.NewFileServiceClient(tc.client, h.URL, opts...)
			id := strings.NewReplacer("+", "-", " ", "-").Replace(tc.name)
			cr, err := sessions.CreateSession(ctx, connect.NewRequest(&warrenv1.CreateSessionRequest{Id: id}))
			if err != nil || !cr.Msg.GetCreated() {
				t.Fatalf("CreateSession: %v %v", cr, err)
			}
			defer sessions.DeleteSession(context.WithoutCancel(ctx), connect.NewRequest(&warrenv1.DeleteSessionRequest{SessionId: id}))
			res, err := execs.Exec(ctx, connect.NewRequest(&warrenv1.ExecRequest{SessionId: id, Command: "X=7; echo $((X*6))"}))
			if err != nil || res.Msg.GetStdout() != "42\n" {
				t.Fatalf("Exec: %v %v", res, err)
			}
			stream, err := execs.ExecStream(ctx, connect.NewRequest(&warrenv1.ExecStreamRequest{SessionId: id, Command: "echo $X; echo e >&2"}))
			if err != nil {
				t.Fatal(err)
			}
			var out, errOut string
			var exit *warrenv1.ExecResult
			for stream.Receive() {
				ev := stream.Msg()
				out += ev.GetStdout().GetText()
				errOut += ev.GetStderr().GetText()
				if ev.GetExit() != nil {
					exit = ev.GetExit()
				}
			}
			if err := stream.Err(); err != nil || out != "7\n" || errOut != "e\n" || exit == nil || exit.GetExitCode() != 0 {
				t.Errorf("ExecStream: %q %q %v %v", out, errOut, exit, err)
			}
			if _, err := files.WriteFile(ctx, connect.NewRequest(&warrenv1.WriteFileRequest{SessionId: id, Path: "a.txt", Data: []byte("hello")})); err != nil {
				t.Fatal(err)
			}
			rs, err := files.ReadFile(ctx, connect.NewRequest(&warrenv1.ReadFileRequest{SessionId: id, Path: "a.txt"}))
			if err != nil {
				t.Fatal(err)
			}
			var data []byte
			for rs.Receive() {
				data = append(data, rs.Msg().GetData()...)
			}
			if rs.Err() != nil || string(data) != "hello" {
				t.Errorf("ReadFile: %q %v", data, rs.Err())
			}
			_, err = files.StatFile(ctx, connect.NewRequest(&warrenv1.StatFileRequest{SessionId: id, Path: "missing.txt"}))
			var ce *connect.Error
			if !errors.As(err, &ce) || ce.Code() != connect.CodeNotFound || ce.Meta().Get("Warren-Error-Code") != "not_found" {
				t.Fatalf("StatFile of a missing file: %v", err)
			}
			if len(ce.Details()) != 1 {
				t.Fatalf("error details: %v", ce.Details())
			}
			if d, err := ce.Details()[0].Value(); err != nil || d.(*warrenv1.ErrorDetail).GetCode() != "not_found" {
				t.Errorf("error detail: %v %v", d, err)
			}
		})
	}

	// Plain HTTP and JSON, as curl sends it: REST's field names come back.
	sid := "curl"
	post := func(procedure, body string, hdr http.Header) (*http.Response, []byte) {
		t.Helper()
		req, _ := http.NewRequest("POST", h.URL+procedure, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		for k, v := range hdr {
			req.Header[k] = v
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, b
	}
	if resp, b := post(warrenv1connect.SessionServiceCreateSessionProcedure, `{"id":"curl"}`, bearer(h.AdminKey)); resp.StatusCode != http.StatusOK {
		t.Fatalf("create over HTTP/JSON: %d %s", resp.StatusCode, b)
	}
	resp, b := post(warrenv1connect.ExecServiceExecProcedure, `{"session_id":"curl","command":"echo hi"}`, bearer(h.AdminKey))
	var res map[string]any
	if resp.StatusCode != http.StatusOK || json.Unmarshal(b, &res) != nil || res["stdout"] != "hi\n" || res["exit_code"] != 0.0 || res["timed_out"] != false {
		t.Errorf("exec over HTTP/JSON: %d %s, want REST's fields", resp.StatusCode, b)
	}
	resp, b = post(warrenv1connect.ExecServiceExecProcedure, `{"session_id":"nope","command":"echo hi"}`, bearer(h.AdminKey))
	var wire struct{ Code, Message string }
	if json.Unmarshal(b, &wire); resp.StatusCode != http.StatusNotFound || wire.Code != "not_found" || resp.Header.Get("Warren-Error-Code") != "not_found" {
		t.Errorf("exec in a missing session over HTTP/JSON: %d %v %s", resp.StatusCode, resp.Header, b)
	}
	if resp, b := post(warrenv1connect.ExecServiceExecProcedure, `{"session_id":"curl","command":"true"}`, nil); resp.StatusCode != http.StatusUnauthorized || !strings.Contains(string(b), `"unauthenticated"`) || resp.Header.Get("WWW-Authenticate") == "" {
		t.Errorf("exec without a key over HTTP/JSON: %d %s", resp.StatusCode, b)
	}
	// Calls without side effects answer GET too (cacheable, linkable).
	req, _ := http.NewRequest("GET", h.URL+warrenv1connect.SessionServiceGetSessionProcedure+`?encoding=json&message={"session_id":"`+sid+`"}`, nil)
	if resp, err := h.Do(req); err != nil || resp.StatusCode != http.StatusOK {
		t.Errorf("GetSession over GET: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}
}

// streamAuth adds the key to streaming calls of a connect client.
func streamAuth(key string) connect.Interceptor { return streamAuthInterceptor(key) }

type streamAuthInterceptor string

func (k streamAuthInterceptor) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc { return next }

func (k streamAuthInterceptor) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return func(ctx context.Context, spec connect.Spec) connect.StreamingClientConn {
		conn := next(ctx, spec)
		conn.RequestHeader().Set("Authorization", "Bearer "+string(k))
		return conn
	}
}

func (k streamAuthInterceptor) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return next
}

func h2cOnly() *http.Protocols {
	var p http.Protocols
	p.SetUnencryptedHTTP2(true)
	return &p
}

// TestGRPCRateLimit: a rate-limited call is ResourceExhausted with
// retry-after, as REST's 429 has Retry-After.
func TestGRPCRateLimit(t *testing.T) {
	h := daemontest.Start(t, func(c *config.Config) { c.Auth.RateLimit, c.Auth.RateBurst = 0.5, 2 })
	sessions := warrenv1grpc.NewSessionServiceClient(dialGRPC(t, h, newKey(t, h, api.CreateKeyRequest{Tenant: "r"}).Secret))
	var hdr, trl metadata.MD
	var err error
	for range 5 {
		if _, err = sessions.ListSessions(t.Context(), &warrenv1.ListSessionsRequest{}, grpc.Header(&hdr), grpc.Trailer(&trl)); err != nil {
			break
		}
	}
	if status.Code(err) != codes.ResourceExhausted || grpcClass(err) != "resource_exhausted" {
		t.Fatalf("calls at 0.5/s, burst 2: %v, want ResourceExhausted", err)
	}
	if ra := append(hdr.Get("retry-after"), trl.Get("retry-after")...); len(ra) == 0 || ra[0] == "0" {
		t.Errorf("rate limited without retry-after: header %v trailer %v", hdr, trl)
	}
}

// TestGRPCAudit: mutating calls are audited as "grpc <Method>", with their
// session, target and outcome (too_large keeps its class over gRPC).
func TestGRPCAudit(t *testing.T) {
	h := daemontest.Start(t, func(c *config.Config) { c.Session.MaxFileBytes = 1 << 10 })
	ctx := t.Context()
	key := newKey(t, h, api.CreateKeyRequest{Tenant: "au"})
	conn := dialGRPC(t, h, key.Secret)
	sessions := warrenv1grpc.NewSessionServiceClient(conn)
	files := warrenv1grpc.NewFileServiceClient(conn)
	if _, err := sessions.CreateSession(ctx, &warrenv1.CreateSessionRequest{Id: "l"}); err != nil {
		t.Fatal(err)
	}
	_, err := files.WriteFile(ctx, &warrenv1.WriteFileRequest{SessionId: "l", Path: "big", Data: make([]byte, 2<<10)})
	if status.Code(err) != codes.ResourceExhausted || grpcClass(err) != "too_large" {
		t.Errorf("WriteFile over the file limit: %v (class %q), want ResourceExhausted (too_large)", err, grpcClass(err))
	}
	grpcRead(t, files, "l", "/etc/hostname") // a read: not audited
	if _, err := sessions.DeleteSession(ctx, &warrenv1.DeleteSessionRequest{SessionId: "l"}); err != nil {
		t.Fatal(err)
	}
	// A refused attempt to change something is on record too; a refused
	// read is not.
	anon := warrenv1grpc.NewSessionServiceClient(dialGRPC(t, h, flipLast(key.Secret)))
	if _, err := anon.CreateSession(ctx, &warrenv1.CreateSessionRequest{}); status.Code(err) != codes.Unauthenticated {
		t.Fatalf("CreateSession with a wrong key: %v", err)
	}
	anon.ListSessions(ctx, &warrenv1.ListSessionsRequest{})

	audit := func(query string) []api.AuditRecord {
		t.Helper()
		r := as(t, h, bearer(h.AdminKey), "GET", "/v1/audit?since=1h&"+query, "")
		var al api.AuditList
		if r.status != http.StatusOK || json.Unmarshal(r.body, &al) != nil {
			t.Fatalf("GET /v1/audit?%s: %d %s", query, r.status, r.body)
		}
		return al.Records
	}
	type row struct{ op, session, target, outcome string }
	var got []row
	for _, rec := range audit("tenant=au") {
		if rec.KeyID != key.ID {
			t.Errorf("record %+v: want key %s", rec, key.ID)
		}
		got = append(got, row{rec.Op, rec.Session, rec.Target, rec.Outcome})
	}
	want := []row{
		{"grpc CreateSession", "l", "", "ok"},
		{"grpc WriteFile", "l", "big", "too_large"},
		{"grpc DeleteSession", "l", "", "ok"},
	}
	if !slices.Equal(got, want) {
		t.Errorf("audit records:\n got %+v\nwant %+v", got, want)
	}
	for op, n := range map[string]int{"grpc+CreateSession": 1, "grpc+ListSessions": 0} {
		refused := 0
		for _, rec := range audit("op=" + op) {
			if rec.Outcome == "unauthenticated" && rec.Status == http.StatusUnauthorized {
				refused++
			}
		}
		if refused != n {
			t.Errorf("%d refused %s on record, want %d", refused, op, n)
		}
	}
}

// BenchmarkExecEchoBuiltinGRPC is BenchmarkExecEchoBuiltin over a stock
// grpc-go client (h2c, protobuf), for comparison with REST.
func BenchmarkExecEchoBuiltinGRPC(b *testing.B) {
	h := benchDaemon(b)
	ctx := context.Background()
	conn := dialGRPC(b, h, h.AdminKey)
	cr, err := warrenv1grpc.NewSessionServiceClient(conn).CreateSession(ctx, &warrenv1.CreateSessionRequest{})
	if err != nil {
		b.Fatal(err)
	}
	execs := warrenv1grpc.NewExecServiceClient(conn)
	req := &warrenv1.ExecRequest{SessionId: cr.GetSession().GetId(), Command: "echo hi"}
	for range 20 { // warm up
		execs.Exec(ctx, req)
	}
	timed(b, func() {
		res, err := execs.Exec(ctx, req)
		if err != nil || res.GetStdout() != "hi\n" {
			b.Fatalf("exec: %v %v", err, res)
		}
	})
}

// BenchmarkExecEchoBuiltinConnect is the same over a connect-go client
// (Connect protocol, protobuf, HTTP/1.1).
func BenchmarkExecEchoBuiltinConnect(b *testing.B) {
	h := benchDaemon(b)
	ctx := context.Background()
	opts := connect.WithInterceptors(connect.UnaryInterceptorFunc(func(next connect.UnaryFunc) connect.UnaryFunc {
		return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
			req.Header().Set("Authorization", "Bearer "+h.AdminKey)
			return next(ctx, req)
		}
	}))
	cr, err := warrenv1connect.NewSessionServiceClient(http.DefaultClient, h.URL, opts).CreateSession(ctx, connect.NewRequest(&warrenv1.CreateSessionRequest{}))
	if err != nil {
		b.Fatal(err)
	}
	execs := warrenv1connect.NewExecServiceClient(http.DefaultClient, h.URL, opts)
	req := &warrenv1.ExecRequest{SessionId: cr.Msg.GetSession().GetId(), Command: "echo hi"}
	for range 20 { // warm up
		execs.Exec(ctx, connect.NewRequest(req))
	}
	timed(b, func() {
		res, err := execs.Exec(ctx, connect.NewRequest(req))
		if err != nil || res.Msg.GetStdout() != "hi\n" {
			b.Fatalf("exec: %v %v", err, res)
		}
	})
}
