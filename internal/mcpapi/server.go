package mcpapi

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"slices"
	"strings"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/warrenhq/warren/internal/errdefs"
)

// Options configures a Server.
type Options struct {
	// Version is the server's version in the MCP handshake.
	Version string
	// Log receives internal errors; nil is slog.Default(). Never stdout.
	Log *slog.Logger
	// Audit, if set, hears of every call of a tool that changes something
	// (create_session, delete_session, exec, start_process, write_file,
	// edit_file, delete_file): op is "mcp <tool>", target the file path or
	// process acted on, err the outcome. It never receives contents.
	Audit func(ctx context.Context, op, session, target string, err error, start time.Time)
	// ProgressInterval is how often a call that carries a progress token
	// hears how long it has run (notifications/progress); 0 is 5 seconds.
	ProgressInterval time.Duration
}

// instructions tell an agent how the tools fit together.
const instructions = `warren runs isolated Linux sandboxes ("sessions"). Typical use:
1. create_session (or list_sessions to reuse one); remember its id.
2. exec runs shell commands in the session's persistent shell: cd, exported variables and activated virtualenvs carry over between calls. stdout, stderr and the exit code come back separately.
3. read_file / write_file / edit_file / list_files / delete_file / search_files work on the session's files (relative paths resolve against the session's working directory at creation, /workspace by default).
4. For servers and long jobs use start_process, then process_output (with wait_seconds to wait for it to finish).
5. delete_session when done; idle sessions also expire on their own.
Errors read "<code>: <message>", with codes such as not_found, invalid_argument, too_large, resource_exhausted.`

// NewServer returns an MCP server whose tools call b. It is safe to serve
// to many clients at once.
func NewServer(b Backend, opts Options) *mcp.Server {
	if opts.Log == nil {
		opts.Log = slog.Default()
	}
	if opts.Version == "" {
		opts.Version = "dev"
	}
	if opts.ProgressInterval <= 0 {
		opts.ProgressInterval = 5 * time.Second
	}
	s := mcp.NewServer(&mcp.Implementation{Name: "warren", Title: "warren sandboxes", Version: opts.Version},
		&mcp.ServerOptions{
			Instructions: instructions,
			Logger:       slog.New(warnings{opts.Log.Handler()}),
			SchemaCache:  schemaCache,
			// Tools only, and no listChanged: the tool list never changes,
			// and a stateless endpoint could not send the notification
			// anyway. No logging either: the server logs to its own log.
			Capabilities: &mcp.ServerCapabilities{Tools: &mcp.ToolCapabilities{}},
		})
	t := &tools{b: b, opts: opts}
	t.register(s)
	s.AddReceivingMiddleware(classifyArgumentErrors)
	return s
}

// warnings passes on a log's warnings and errors only: the SDK reports
// every connection at info, which for the daemon's stateless endpoint means
// every request.
type warnings struct{ slog.Handler }

func (h warnings) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= slog.LevelWarn && h.Handler.Enabled(ctx, l)
}

func (h warnings) WithAttrs(as []slog.Attr) slog.Handler { return warnings{h.Handler.WithAttrs(as)} }
func (h warnings) WithGroup(name string) slog.Handler    { return warnings{h.Handler.WithGroup(name)} }

// schemaCache keeps the output schemas inferred from the tools' types
// across the servers of one process.
var schemaCache = mcp.NewSchemaCache()

// ToolError is the error of a failed tool call. Its text, the tool
// result's content, is "<code>: <message>" with the code of the REST error
// envelope.
type ToolError struct {
	Code    string
	Message string
}

func (e *ToolError) Error() string { return e.Code + ": " + e.Message }

// toolErrorOf maps an error to the tool error: the one place MCP does.
func toolErrorOf(err error) *ToolError {
	var te *ToolError
	if errors.As(err, &te) {
		return te
	}
	switch {
	case errors.Is(err, context.Canceled):
		return &ToolError{Code: errdefs.ErrUnavailable.String(), Message: "the call was cancelled"}
	case errors.Is(err, context.DeadlineExceeded):
		return &ToolError{Code: errdefs.ErrUnavailable.String(), Message: "the call ran out of time"}
	}
	return &ToolError{Code: errdefs.ClassOf(err).String(), Message: err.Error()}
}

// ParseToolError splits the text of a tool error into its code and
// message; ok is false when text does not start with a known code.
func ParseToolError(text string) (code, message string, ok bool) {
	code, message, found := strings.Cut(text, ": ")
	if !found || errdefs.FromCode(code).String() != code {
		return "", text, false
	}
	return code, message, true
}

// classifyArgumentErrors gives the tool errors that the SDK itself makes
// (arguments that do not match a tool's input schema) the code
// invalid_argument, like every other tool error's.
func classifyArgumentErrors(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		res, err := next(ctx, method, req)
		r, ok := res.(*mcp.CallToolResult)
		if err != nil || !ok || r == nil || !r.IsError {
			return res, err
		}
		var te *ToolError
		if errors.As(r.GetError(), &te) {
			return res, err
		}
		msg := "invalid arguments"
		if e := r.GetError(); e != nil {
			msg = e.Error()
		}
		r.Content = []mcp.Content{&mcp.TextContent{Text: (&ToolError{Code: errdefs.ErrInvalidArgument.String(), Message: msg}).Error()}}
		return res, err
	}
}

// auditFunc names what a mutating call acted on: its session and target.
type auditFunc[In, Out any] func(in *In, out *Out) (session, target string)

// addTool registers a tool whose run returns its structured output and,
// optionally, its content for the model (nil: the output as JSON). Errors
// become tool errors, panics internal ones; calls of a tool with audit set
// are audited.
func addTool[In, Out any](t *tools, s *mcp.Server, def *mcp.Tool, audit auditFunc[In, Out], run func(ctx context.Context, in *In) (*Out, []mcp.Content, error)) {
	in, err := jsonschema.For[In](nil)
	if err != nil {
		panic(fmt.Sprintf("tool %s: input schema: %v", def.Name, err))
	}
	def.InputSchema = withoutNull(in)
	out, err := jsonschema.For[Out](nil)
	if err != nil {
		panic(fmt.Sprintf("tool %s: output schema: %v", def.Name, err))
	}
	def.OutputSchema = withoutNull(out)
	mcp.AddTool(s, def, func(ctx context.Context, req *mcp.CallToolRequest, in In) (*mcp.CallToolResult, *Out, error) {
		start := time.Now()
		ctx, unbind := callContext(ctx)
		defer unbind()
		if tok := req.Params.GetProgressToken(); tok != nil && req.Session != nil {
			defer reportProgress(ctx, req.Session, tok, def.Name, t.opts.ProgressInterval)()
		}
		out, content, err := runTool(t.opts.Log, ctx, def.Name, &in, run)
		if audit != nil && t.opts.Audit != nil {
			var o Out
			if out != nil {
				o = *out
			}
			sess, target := audit(&in, &o)
			t.opts.Audit(ctx, "mcp "+def.Name, sess, target, err, start)
		}
		if err != nil {
			te := toolErrorOf(err)
			if te.Code == errdefs.ErrInternal.String() {
				t.opts.Log.Error("mcp tool failed", "tool", def.Name, "error", err)
			}
			return nil, nil, te
		}
		if content == nil {
			return nil, out, nil // the SDK adds the output as JSON text
		}
		return &mcp.CallToolResult{Content: content}, out, nil
	})
}

// withoutNull makes optional properties that Go infers as "X or null"
// (pointers, slices, maps) plain "X", in input and output schemas alike:
// some MCP hosts' models and schema checkers reject type lists, and leaving
// a property out already says "none". The tools therefore never answer
// null: an absent value is left out (omitempty) or an empty list.
func withoutNull(s *jsonschema.Schema) *jsonschema.Schema {
	if s == nil {
		return nil
	}
	if len(s.Types) == 2 && slices.Contains(s.Types, "null") {
		i := slices.Index(s.Types, "null")
		s.Type, s.Types = s.Types[1-i], nil
	}
	for _, p := range s.Properties {
		withoutNull(p)
	}
	for _, d := range s.Defs {
		withoutNull(d)
	}
	withoutNull(s.Items)
	withoutNull(s.AdditionalProperties)
	return s
}

// runTool runs a tool, turning a panic into an internal error.
func runTool[In, Out any](log *slog.Logger, ctx context.Context, name string, in *In, run func(context.Context, *In) (*Out, []mcp.Content, error)) (out *Out, content []mcp.Content, err error) {
	defer func() {
		if v := recover(); v != nil {
			log.Error("mcp tool panic", "tool", name, "panic", v, "stack", string(debug.Stack()))
			out, content, err = nil, nil, errdefs.New(errdefs.ErrInternal, "internal error")
		}
	}()
	return run(ctx, in)
}
