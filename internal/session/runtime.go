package session

import (
	"context"
	"io"
	"net"
	"time"
)

// Runtime starts and removes the sandboxes that run sessions. The manager
// owns this interface (containerd's core/sandbox.Controller is the model):
// internal/sandbox implements it on this host's kernel, and a remote
// runtime, such as a fleet node that forwards to another, implements the
// same. Errors are classified with errdefs: a request the runtime cannot
// honour is ErrInvalidArgument, a sandbox that is gone ErrNotFound, one
// that stopped answering ErrUnavailable.
type Runtime interface {
	// Start creates and starts a sandbox; on failure nothing of it remains.
	Start(ctx context.Context, cfg *SandboxConfig) (Sandbox, error)
	// Adopt takes over a sandbox that an earlier daemon started and left
	// running, pid being its PID 1 as the store recorded it; its
	// processes, files and shell state carry on. A sandbox that is gone is
	// ErrNotFound.
	Adopt(ctx context.Context, name string, pid int) (Sandbox, error)
	// Remove deletes what the sandbox name left behind (its process is
	// gone, or is killed with whatever remains).
	Remove(name string) error
	// Leftovers lists the names of sandboxes that have anything left on
	// the host, whether a session owns them or not.
	Leftovers() ([]string, error)
	// Wait waits for the removals a Destroy left running in the
	// background.
	Wait()
	// Features says what sandboxes of this runtime can do.
	Features() Features
	// StateDir is the directory whose filesystem holds the sandboxes'
	// state; the manager keeps free space on it (Config.MinFreeDiskMB).
	StateDir() string
}

// Features are what a runtime's sandboxes can do.
type Features struct {
	// DiskQuota: the writable layer of a sandbox has a size limit
	// (SandboxConfig.DiskBytes).
	DiskQuota bool
	// UserNS: every sandbox has its own user namespace, so an image's
	// user applies, and host directories can be bound into it (workspaces)
	// and its layers copied out re-based (snapshots).
	UserNS bool
}

// Sandbox is one running sandbox, as the manager drives it. Calls that
// reach into the sandbox take a context and honour it.
type Sandbox interface {
	// Name is the sandbox's unique name on its host (Session.Name).
	Name() string
	// Pid is the host pid of the sandbox's PID 1 (0 if it has none here).
	Pid() int
	// Done is closed once the sandbox has ended, ExitErr then says why.
	Done() <-chan struct{}
	ExitErr() error
	// Usage reads the sandbox's resource use.
	Usage() (Usage, error)

	// Claim makes a sandbox started with SandboxConfig.Deferred a
	// session's: it gets the hostname, and its shell starts with env. On
	// error the caller destroys the sandbox.
	Claim(ctx context.Context, hostname string, env []string) error
	// Destroy kills the sandbox and removes it; some of the removal may go
	// on in the background (Runtime.Wait).
	Destroy(ctx context.Context) error
	// Detach lets go of the sandbox without stopping it, for the next
	// daemon to adopt.
	Detach()

	// Cwd is the session shell's current directory.
	Cwd(ctx context.Context) (string, error)
	// Exec runs a command whose Timeout and MaxOutput are set. With stream
	// set, output goes to it as it comes and the result carries none.
	Exec(ctx context.Context, req *ExecRequest, stream OutputFunc) (*ExecResult, error)

	Stat(ctx context.Context, path string) (*Entry, error)
	List(ctx context.Context, path string) ([]Entry, error)
	Mkdir(ctx context.Context, path string) error
	Remove(ctx context.Context, path string, recursive bool) error
	// WriteFile writes r to path (parents created) with mode (0: keep, or
	// 0644), at most max bytes.
	WriteFile(ctx context.Context, path string, mode uint32, max int64, r io.Reader) (int64, error)
	// PutArchive extracts the tar in r into the directory path.
	PutArchive(ctx context.Context, path string, max int64, r io.Reader) (int64, error)
	// ReadFile and GetArchive start a download of at most max bytes and
	// wait for its first bytes, so that an error such as "not found"
	// arrives before the caller commits to a response.
	ReadFile(ctx context.Context, path string, max int64) (DownloadStream, []byte, error)
	GetArchive(ctx context.Context, path string, max int64) (DownloadStream, []byte, error)

	StartProcess(ctx context.Context, req *StartProcessRequest) (*ProcessInfo, error)
	ListProcesses(ctx context.Context) ([]ProcessInfo, error)
	GetProcess(ctx context.Context, pid string) (*ProcessInfo, error)
	// ProcessOutput streams a process's output from offset to fn,
	// following it until the process exits if follow is set, and returns
	// the process's state at the end.
	ProcessOutput(ctx context.Context, pid string, offset int64, follow bool, fn func(OutputEvent) error) (*ProcessInfo, error)
	WriteStdin(ctx context.Context, pid string, r io.Reader, eof bool) (int64, error)
	SignalProcess(ctx context.Context, pid string, sig int) error
	ResizeProcess(ctx context.Context, pid string, cols, rows int) error
	KillProcess(ctx context.Context, pid string) error

	// Listeners lists the TCP sockets listening inside the sandbox, by
	// port then address.
	Listeners(ctx context.Context) ([]Listener, error)
	// DialPort connects to port on the sandbox's loopback, from the host,
	// whatever the sandbox's network (none included). Nothing listening
	// there is ErrUnavailable. The connection outlives ctx.
	DialPort(ctx context.Context, port int) (net.Conn, error)

	// CopyLayers freezes the sandbox's processes, copies the changes it
	// made to its files into the new directory dir (root/ for its root
	// filesystem, ov/<i>/ for its i-th overlay), re-based to the canonical
	// ids, and lets the processes run again.
	CopyLayers(ctx context.Context, dir string, overlays int) (LayerCopy, error)
}

// SandboxConfig describes one sandbox to start.
type SandboxConfig struct {
	// Name is unique on the host; it names the sandbox's state.
	Name     string
	Hostname string
	// Lower are the image's read-only layers, topmost first.
	Lower []string
	// Overlays are host directories mounted as extra writable overlays
	// (the base image's /usr): each gets its own writable layer.
	Overlays []SandboxOverlay
	BaseDir  string
	Env      []string
	Shell    string
	// MemoryBytes, Pids and CPUs limit the workload.
	MemoryBytes, Pids int64
	CPUs              float64
	// DiskBytes caps the writable layer (0: no cap); Features.DiskQuota.
	DiskBytes int64
	// User is who sandboxed processes run as ("" is root).
	User string
	// BackgroundLogBytes bounds the output log of background jobs.
	BackgroundLogBytes int
	// Deferred starts the sandbox without its shell: Claim starts it. A
	// warm pool's sandboxes start this way.
	Deferred bool
	// Binds are host directories mounted into the sandbox (a workspace).
	Binds []SandboxBind
}

// SandboxOverlay is a host directory shown at Target, writable per
// sandbox.
type SandboxOverlay struct {
	Source, Target string
	// Lower are more read-only layers above Source, topmost first.
	Lower []string
}

// SandboxBind is a host directory shown at Target; writes land in Source.
type SandboxBind struct {
	Source, Target string
	ReadOnly       bool
}

// Usage is a sandbox's resource use.
type Usage struct {
	MemoryBytes uint64
	Pids        uint64
	CPUSeconds  float64
	OOMKills    uint64
	// DiskBytes is the size of the writable layer, where it is measured.
	DiskBytes int64
	// NetworkInBytes and NetworkOutBytes are what the session's network
	// link carried into and out of it (0 without a network).
	NetworkInBytes, NetworkOutBytes uint64
}

// ExecResult is a command's outcome.
type ExecResult struct {
	ExitCode int
	// Signal is the signal that ended the command, if any.
	Signal         int
	TimedOut       bool
	Truncated      bool
	ShellRestarted bool
	Duration       time.Duration
	// Cwd is the shell's directory afterwards ("" for an argv command).
	Cwd            string
	Stdout, Stderr []byte
	OOMKilled      bool
}

// The channels of command output (OutputFunc, OutputEvent.Chan).
const (
	ChanStdout byte = 1
	ChanStderr byte = 2
)

// OutputFunc receives streamed output on channel ch (ChanStdout or
// ChanStderr). Returning an error cancels the command.
type OutputFunc func(ch byte, p []byte) error

// OutputEvent is one event of a process's output: Kind "output" (Data on
// channel Chan at Offset), "gap" (bytes [From, To) were dropped) or "exit".
type OutputEvent struct {
	Kind             string
	Offset           int64
	Chan             byte
	Data             []byte
	From, To         int64
	ExitCode, Signal int
}

// StartProcessRequest starts a durable process in a session. Exactly one of
// Command and Argv is set, unless Login asks for the login shell.
type StartProcessRequest struct {
	Command    string
	Argv       []string
	Login      bool
	Env        map[string]string
	Cwd        string
	TTY        bool
	Cols, Rows int
	// Stdin keeps the process's stdin open for WriteStdin.
	Stdin bool
	// User runs the process as a user of the image other than the
	// session's: "root", a name of its /etc/passwd, "uid" or "uid:gid".
	User string
}

// ProcessInfo describes a durable process.
type ProcessInfo struct {
	ID          string
	Command     string
	Argv        []string
	TTY         bool
	Running     bool
	Pid         int
	ExitCode    int
	Signal      int
	StartedAt   time.Time
	EndedAt     *time.Time
	OutputBytes int64
	OutputStart int64
}

// Entry describes one file of a session.
type Entry struct {
	Name string
	Path string
	// Type is file, dir, symlink or other.
	Type string
	Size int64
	// Mode holds the permission bits and setuid/setgid/sticky.
	Mode  uint32
	MTime time.Time
	// Target is a symlink's target.
	Target string
}

// DownloadStream is a file or tar coming out of a sandbox.
type DownloadStream interface {
	io.Reader
	// Err says how the transfer ended once Read returned io.EOF: nil if
	// the sandbox confirmed it.
	Err() error
	// Close abandons the download if it was not read to the end.
	Close() error
}

// LayerCopy is what CopyLayers copied, and how long the sandbox stood still.
type LayerCopy struct {
	Files, Dirs, Links int64
	// Bytes of regular-file data.
	Bytes int64
	// Skipped are entries that have no place in a layer.
	Skipped int64
	Frozen  time.Duration
}
