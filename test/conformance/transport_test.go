package conformance

import (
	"context"
	"sort"
	"sync"
	"testing"

	"github.com/warrenhq/warren/internal/daemon/daemontest"
)

// Transport is one way to reach warren, seen from a client. Every method
// talks to the daemon for real. An error a method returns must let Code
// name the error class the daemon answered ("not_found",
// "invalid_argument", "too_large", "resource_exhausted", ...).
type Transport interface {
	// Code is the error class of an error this transport returned, "" for
	// nil.
	Code(err error) string

	CreateSession(ctx context.Context, id string) error
	// GetSession returns the session's state ("running", ...).
	GetSession(ctx context.Context, id string) (state string, err error)
	// ListSessions returns the ids of the caller's sessions.
	ListSessions(ctx context.Context) ([]string, error)
	DeleteSession(ctx context.Context, id string) error

	// Exec runs a shell command in the session's persistent shell.
	Exec(ctx context.Context, id, command string) (*ExecResult, error)
	// ExecStream runs a command and returns the output as it arrived, in
	// order, then the result. A transport without streaming (MCP) returns
	// the whole output as one chunk per stream.
	ExecStream(ctx context.Context, id, command string) ([]Chunk, *ExecResult, error)

	// StartProcess starts a durable process and returns its id.
	StartProcess(ctx context.Context, id, command string) (pid string, err error)
	// ProcessOutput returns the process's output from offset. With follow
	// it waits until the process ends and returns everything to the end,
	// and the exit code; without, what is there now and a nil exit code
	// if the process still runs.
	ProcessOutput(ctx context.Context, id, pid string, offset int64, follow bool) (data []byte, exit *int, err error)

	WriteFile(ctx context.Context, id, path string, data []byte) error
	ReadFile(ctx context.Context, id, path string) ([]byte, error)
	// ListFiles returns the names in a directory.
	ListFiles(ctx context.Context, id, dir string) ([]string, error)
	DeleteFile(ctx context.Context, id, path string) error
}

// ExecResult is what every transport reports of a finished command.
type ExecResult struct {
	Stdout, Stderr string
	ExitCode       int
	TimedOut       bool
	Truncated      bool
}

// Chunk is a piece of streamed output.
type Chunk struct {
	Stream string // "stdout" or "stderr"
	Data   string
}

// factory connects a transport to a daemon under test, as its admin.
type factory func(t *testing.T, h *daemontest.Harness) Transport

var (
	registryMu sync.Mutex
	registry   = map[string]factory{}
)

// register adds a transport to the suite; adapters call it from init.
func register(name string, f factory) {
	registryMu.Lock()
	defer registryMu.Unlock()
	if _, dup := registry[name]; dup {
		panic("conformance: transport " + name + " registered twice")
	}
	registry[name] = f
}

func transports() []string {
	registryMu.Lock()
	defer registryMu.Unlock()
	names := make([]string, 0, len(registry))
	for n := range registry {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}
