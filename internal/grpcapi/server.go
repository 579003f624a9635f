package grpcapi

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"path"
	"runtime/debug"
	"strings"
	"time"

	"connectrpc.com/connect"
	"connectrpc.com/grpcreflect"
	"google.golang.org/protobuf/types/descriptorpb"

	warrenv1 "github.com/warrenhq/warren/api/gen/warren/v1"
	"github.com/warrenhq/warren/api/gen/warren/v1/warrenv1connect"
	"github.com/warrenhq/warren/internal/edge"
	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/session"
)

// DefaultMaxMessageBytes is the default cap on one request message.
const DefaultMaxMessageBytes = 16 << 20

// Config configures a Server.
type Config struct {
	Manager *session.Manager
	// Edge admits every call (authentication, rate limit), knows its
	// caller and writes the audit log.
	Edge *edge.Edge
	Log  *slog.Logger
	// Ready says whether the daemon takes new work, for grpc.health.v1;
	// nil is always.
	Ready func(ctx context.Context) error
	// MaxMessageBytes caps one request message (default 16 MiB): the
	// data of a unary WriteFile or WriteStdin, an exec's stdin. Larger
	// files go through WriteFileStream, up to the manager's file limit.
	MaxMessageBytes int64
}

// Server is the RPC API.
type Server struct {
	m     *session.Manager
	edge  *edge.Edge
	log   *slog.Logger
	ready func(ctx context.Context) error
	// opts apply to every service handler.
	opts []connect.HandlerOption
	// errw answers the calls Admit refuses, in the caller's protocol.
	errw *connect.ErrorWriter
	// mutating holds the procedures that change state: those not marked
	// NO_SIDE_EFFECTS in the proto. They are audited, as REST's non-GET
	// routes are.
	mutating map[string]bool
}

// New returns the RPC API server.
func New(cfg Config) *Server {
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	if cfg.MaxMessageBytes == 0 {
		cfg.MaxMessageBytes = DefaultMaxMessageBytes
	}
	if cfg.Edge == nil {
		cfg.Edge = edge.New(edge.Config{Log: cfg.Log})
	}
	s := &Server{m: cfg.Manager, edge: cfg.Edge, log: cfg.Log, ready: cfg.Ready, mutating: mutatingProcedures()}
	s.opts = []connect.HandlerOption{
		connect.WithCodec(jsonCodec{name: "json"}),
		connect.WithCodec(jsonCodec{name: "json; charset=utf-8"}),
		connect.WithReadMaxBytes(int(cfg.MaxMessageBytes)),
		// The audit sees the class of the error, so it wraps the mapping.
		connect.WithInterceptors(auditInterceptor{s}, errorInterceptor{s}),
		connect.WithRecover(s.recovered),
	}
	s.errw = connect.NewErrorWriter(s.opts...)
	return s
}

// Mount registers the services on mux, each behind the edge's Admit, and
// without authentication server reflection (v1 and v1alpha; like the
// OpenAPI document, it only describes the API) and grpc.health.v1 (like
// /readyz, for probes that carry no key).
func (s *Server) Mount(mux *http.ServeMux) {
	admitted := func(pattern string, h http.Handler) { mux.Handle(pattern, s.admit(h)) }
	admitted(warrenv1connect.NewSessionServiceHandler(sessions{s}, s.opts...))
	admitted(warrenv1connect.NewExecServiceHandler(execs{s}, s.opts...))
	admitted(warrenv1connect.NewProcessServiceHandler(processes{s}, s.opts...))
	admitted(warrenv1connect.NewFileServiceHandler(files{s}, s.opts...))
	admitted(warrenv1connect.NewNetworkServiceHandler(networks{s}, s.opts...))
	reflector := grpcreflect.NewStaticReflector(serviceNames()...)
	mux.Handle(grpcreflect.NewHandlerV1(reflector))
	mux.Handle(grpcreflect.NewHandlerV1Alpha(reflector))
	mux.Handle(s.healthHandler())
}

// serviceNames are the fully qualified names of the services served.
func serviceNames() []string {
	return []string{
		warrenv1connect.SessionServiceName,
		warrenv1connect.ExecServiceName,
		warrenv1connect.ProcessServiceName,
		warrenv1connect.FileServiceName,
		warrenv1connect.NetworkServiceName,
	}
}

// admit passes every call through the edge's admission (authentication,
// rate limit) before the connect handler sees it; the handler finds the
// caller with edge.IdentityOf. A refused call gets its error in the
// caller's protocol, and an unauthenticated attempt at a mutating call is
// audited, as on every transport.
func (s *Server) admit(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		ctx, err := s.edge.Admit(r)
		if err != nil {
			s.edge.Refuse(ctx, w, r, err, "grpc "+path.Base(r.URL.Path), "", s.mutating[r.URL.Path], start)
			s.errw.Write(w, r, connectError(err))
			return
		}
		h.ServeHTTP(w, r.WithContext(ctx))
	})
}

// tenant is the tenant the caller acts for (every service sits behind
// admit).
func tenant(ctx context.Context) string { return edge.TenantOf(ctx) }

// recovered answers a handler's panic with an internal error.
func (s *Server) recovered(ctx context.Context, spec connect.Spec, _ http.Header, v any) error {
	s.log.Error("handler panic", "procedure", spec.Procedure, "panic", v, "stack", string(debug.Stack()))
	return connectError(errdefs.New(errdefs.ErrInternal, "internal error"))
}

// mutatingProcedures lists the procedures that change state, from the
// idempotency levels in the proto.
func mutatingProcedures() map[string]bool {
	out := map[string]bool{}
	svcs := warrenv1.File_warren_v1_warren_proto.Services()
	for i := range svcs.Len() {
		sd := svcs.Get(i)
		methods := sd.Methods()
		for j := range methods.Len() {
			md := methods.Get(j)
			opts, _ := md.Options().(*descriptorpb.MethodOptions)
			out["/"+string(sd.FullName())+"/"+string(md.Name())] = opts.GetIdempotencyLevel() != descriptorpb.MethodOptions_NO_SIDE_EFFECTS
		}
	}
	return out
}

// errorInterceptor maps every error a handler returns to its connect code.
type errorInterceptor struct{ s *Server }

func (i errorInterceptor) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		resp, err := next(ctx, req)
		if err != nil {
			return nil, i.s.fail(req.Spec(), err)
		}
		return resp, nil
	}
}

func (i errorInterceptor) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return next
}

func (i errorInterceptor) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return func(ctx context.Context, conn connect.StreamingHandlerConn) error {
		if err := next(ctx, conn); err != nil {
			return i.s.fail(conn.Spec(), err)
		}
		return nil
	}
}

// fail maps err, logging the internal errors (bugs) as REST does.
func (s *Server) fail(spec connect.Spec, err error) error {
	ce := connectError(err)
	if ce.Code() == connect.CodeInternal {
		s.log.Error("internal error", "procedure", spec.Procedure, "error", err)
	}
	return ce
}

// auditInterceptor records every mutating call in the audit log: who, the
// session, the process or path it acted on and the outcome. Never contents.
type auditInterceptor struct{ s *Server }

func (i auditInterceptor) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		if !i.s.mutating[req.Spec().Procedure] {
			return next(ctx, req)
		}
		start := time.Now()
		resp, err := next(ctx, req)
		sess, target := auditFields(req.Any())
		if c, ok := responseMsg(resp).(*warrenv1.CreateSessionResponse); ok {
			sess = c.GetSession().GetId() // the id may be the daemon's choice
		}
		i.s.edge.Record(ctx, "grpc "+path.Base(req.Spec().Procedure), sess, target, err, start)
		return resp, err
	}
}

func (i auditInterceptor) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return next
}

func (i auditInterceptor) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return func(ctx context.Context, conn connect.StreamingHandlerConn) error {
		if !i.s.mutating[conn.Spec().Procedure] {
			return next(ctx, conn)
		}
		start := time.Now()
		fc := &firstReceived{StreamingHandlerConn: conn}
		err := next(ctx, fc)
		sess, target := auditFields(fc.first)
		i.s.edge.Record(ctx, "grpc "+path.Base(conn.Spec().Procedure), sess, target, err, start)
		return err
	}
}

func responseMsg(resp connect.AnyResponse) any {
	if resp == nil {
		return nil
	}
	return resp.Any()
}

// firstReceived remembers a stream's first message, which names the
// session (and path) of the call.
type firstReceived struct {
	connect.StreamingHandlerConn
	first any
}

func (c *firstReceived) Receive(msg any) error {
	err := c.StreamingHandlerConn.Receive(msg)
	if err == nil && c.first == nil {
		c.first = msg
	}
	return err
}

// auditFields names what a request acts on: its session, and the process
// or file path inside it.
func auditFields(msg any) (sess, target string) {
	if m, ok := msg.(interface{ GetSessionId() string }); ok {
		sess = m.GetSessionId()
	}
	if m, ok := msg.(*warrenv1.CreateSessionRequest); ok {
		sess = m.GetId()
	}
	if m, ok := msg.(interface{ GetProcessId() string }); ok {
		target = m.GetProcessId()
	}
	if m, ok := msg.(interface{ GetPath() string }); ok {
		target = m.GetPath()
	}
	return sess, target
}

// requireAdmin refuses a call that only administrators may make.
func requireAdmin(ctx context.Context, what string) error { return edge.RequireAdmin(ctx, what) }

// Unrouted answers a request in a gRPC protocol (content type
// application/grpc, application/grpc-web, application/connect+…) whose
// procedure mux does not serve with Unimplemented in that protocol, as a
// gRPC server does, and passes every other request on to mux. Without it
// the call would reach REST at the root and get a JSON 404 that no gRPC
// client can read.
func Unrouted(mux *http.ServeMux) http.Handler {
	errw := connect.NewErrorWriter()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ct := r.Header.Get("Content-Type")
		if strings.HasPrefix(ct, "application/grpc") || strings.HasPrefix(ct, "application/connect+") {
			if _, p := mux.Handler(r); (p == "" || p == "/") && errw.IsSupported(r) {
				errw.Write(w, r, connect.NewError(connect.CodeUnimplemented, fmt.Errorf("no such procedure: %s", r.URL.Path)))
				return
			}
		}
		mux.ServeHTTP(w, r)
	})
}
