package mcpapi

import (
	"context"
	"io"

	"github.com/warrenhq/warren/api"
)

// Backend is what the tools need of warren: the session, exec, process and
// file operations of the REST API, in its types. Errors are classified with
// errdefs, so that a tool error carries the envelope's code.
//
// Implementations: NewManagerBackend (in the daemon) and NewClientBackend
// (over a daemon's REST API).
type Backend interface {
	CreateSession(ctx context.Context, req *api.CreateSessionRequest) (*api.Session, error)
	GetSession(ctx context.Context, id string) (*api.Session, error)
	ListSessions(ctx context.Context) ([]api.Session, error)
	DeleteSession(ctx context.Context, id string) error

	// Exec runs a command and gathers its output; a failing command is
	// not an error.
	Exec(ctx context.Context, id string, req *api.ExecRequest) (*api.ExecResult, error)

	StartProcess(ctx context.Context, id string, req *api.StartProcessRequest) (*api.Process, error)
	GetProcess(ctx context.Context, id, pid string) (*api.Process, error)
	// ProcessOutput calls fn with the process's output events from
	// offset, as the REST API's output stream delivers them; with follow
	// it waits for more until the process exits. An error fn returns ends
	// the call and is returned.
	ProcessOutput(ctx context.Context, id, pid string, offset int64, follow bool, fn func(OutputEvent) error) error

	// ReadFile opens a file; the caller reads what it needs and closes it.
	// A transfer that breaks off is an error of Read, never a short EOF.
	ReadFile(ctx context.Context, id, path string) (io.ReadCloser, error)
	// WriteFile writes r to path, creating parents. mode holds permission
	// bits (0o7777); 0 keeps an existing file's, else 0644.
	WriteFile(ctx context.Context, id, path string, r io.Reader, mode uint32) (int64, error)
	StatFile(ctx context.Context, id, path string) (*api.FileEntry, error)
	ListFiles(ctx context.Context, id, path string) ([]api.FileEntry, error)
	RemoveFile(ctx context.Context, id, path string, recursive bool) error

	// NetworkDenials lists what a session's egress policy refused lately,
	// oldest first.
	NetworkDenials(ctx context.Context, id string) ([]api.NetworkDenial, error)
}

// OutputEvent is one event of a process's output.
type OutputEvent struct {
	// Kind is "output" (Data at Offset), "gap" (bytes [From, To) were
	// dropped from the bounded buffer) or "exit" (the last event).
	Kind   string
	Offset int64
	Data   []byte
	// From and To bound a gap.
	From, To int64
	// ExitCode and Signal ("SIGKILL") say how the process ended.
	ExitCode int
	Signal   string
}
