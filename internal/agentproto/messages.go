package agentproto

import "time"

// Version is the protocol version; Hello refuses a mismatch.
const Version = 1

// Op names the operation of a Call.
type Op byte

// The operations.
const (
	OpHello     Op = 1
	OpExec      Op = 2
	OpReadFile  Op = 3
	OpWriteFile Op = 4
	OpList      Op = 5
	OpStat      Op = 6
	OpMkdir     Op = 7
	OpRemove    Op = 8
	OpTarGet    Op = 9
	OpTarPut    Op = 10
	OpState     Op = 11
)

// Hello is the first call on a connection.
type Hello struct {
	Version int `json:"version"`
	// Env, when set on the first hello, replaces the spec's environment
	// for the shell and the processes the agent starts (a sandbox from a
	// warm pool learns its session's environment this way).
	Env []string `json:"env,omitempty"`
	// Defer answers without starting the shell: the sandbox waits in a
	// warm pool, and a later hello carrying its session's Env starts it.
	Defer bool `json:"defer,omitempty"`
}

// HelloReply answers Hello.
type HelloReply struct {
	Version int    `json:"version"`
	Shell   string `json:"shell"` // path of the session shell inside the sandbox
}

// Stdin modes of an exec.
const (
	StdinNone   = ""       // the command reads an empty stdin
	StdinInline = "inline" // the Call's tail is the whole stdin
	StdinStream = "stream" // stdin follows as Data frames ended by EOF
)

// ExecRequest runs a command. Exactly one of Command (through the session's
// persistent shell) and Argv (directly, concurrently, changing no state) is
// set.
type ExecRequest struct {
	Command   string            `json:"command,omitempty"`
	Argv      []string          `json:"argv,omitempty"`
	Env       map[string]string `json:"env,omitempty"`
	Cwd       string            `json:"cwd,omitempty"`
	Timeout   time.Duration     `json:"timeout"`
	MaxOutput int64             `json:"max_output"` // per stream, in bytes
	Stdin     string            `json:"stdin,omitempty"`
	// Stream asks for output as Data frames while the command runs. Without
	// it the agent gathers the output and returns it as the Reply's tail.
	Stream bool `json:"stream,omitempty"`
}

// ExecResult ends an exec. When the output came inline, the Reply's tail is
// StdoutLen bytes of stdout followed by StderrLen bytes of stderr.
type ExecResult struct {
	ExitCode       int           `json:"exit_code"`
	Signal         int           `json:"signal,omitempty"` // the signal that ended the command, if any
	TimedOut       bool          `json:"timed_out,omitempty"`
	Truncated      bool          `json:"truncated,omitempty"`
	ShellRestarted bool          `json:"shell_restarted,omitempty"`
	Duration       time.Duration `json:"duration"`
	StdoutLen      int           `json:"stdout_len,omitempty"`
	StderrLen      int           `json:"stderr_len,omitempty"`
	Cwd            string        `json:"cwd,omitempty"` // the shell's cwd afterwards
}

// FileRequest names a path inside the sandbox. Relative paths resolve against
// the session's base directory (its cwd at creation).
type FileRequest struct {
	Path      string `json:"path"`
	Mode      uint32 `json:"mode,omitempty"`      // write: permission bits; 0 means 0644
	MaxBytes  int64  `json:"max_bytes,omitempty"` // read, write and tar: size cap
	Recursive bool   `json:"recursive,omitempty"` // remove
}

// Entry describes one file.
type Entry struct {
	Name   string    `json:"name"`
	Path   string    `json:"path"`
	Type   string    `json:"type"` // file, dir, symlink or other
	Size   int64     `json:"size"`
	Mode   uint32    `json:"mode"` // permission bits and setuid/setgid/sticky
	MTime  time.Time `json:"mtime"`
	Target string    `json:"target,omitempty"` // symlink target
}

// FileReply answers the file operations.
type FileReply struct {
	Size    int64   `json:"size,omitempty"`
	Entry   *Entry  `json:"entry,omitempty"`
	Entries []Entry `json:"entries,omitempty"`
	// EntriesStreamed says a listing too large for one frame came as Data:
	// the JSON array of its entries.
	EntriesStreamed bool `json:"entries_streamed,omitempty"`
}

// StateReply reports the shell's state.
type StateReply struct {
	Cwd string `json:"cwd"`
}

// Operations of durable processes.
const (
	OpProcStart  Op = 20
	OpProcList   Op = 21
	OpProcGet    Op = 22
	OpProcOutput Op = 23
	OpProcStdin  Op = 24
	OpProcSignal Op = 25
	OpProcResize Op = 26
	OpProcKill   Op = 27
)

// ProcStartRequest starts a durable process. Exactly one of Command and Argv
// is set, unless Login asks for the session's login shell.
type ProcStartRequest struct {
	Command string            `json:"command,omitempty"`
	Argv    []string          `json:"argv,omitempty"`
	Login   bool              `json:"login,omitempty"`
	Env     map[string]string `json:"env,omitempty"`
	Cwd     string            `json:"cwd,omitempty"`
	TTY     bool              `json:"tty,omitempty"`
	Cols    int               `json:"cols,omitempty"`
	Rows    int               `json:"rows,omitempty"`
	Stdin   bool              `json:"stdin,omitempty"`
	// User runs the process as a user of the image other than the
	// session's ("root", a name of its /etc/passwd, "uid" or "uid:gid");
	// "" is the session's user. It needs a sandbox with a user namespace.
	User string `json:"user,omitempty"`
}

// ProcInfo describes a durable process.
type ProcInfo struct {
	ID          string     `json:"id"`
	Command     string     `json:"command,omitempty"`
	Argv        []string   `json:"argv,omitempty"`
	TTY         bool       `json:"tty"`
	Running     bool       `json:"running"`
	Pid         int        `json:"pid"`
	ExitCode    int        `json:"exit_code"`
	Signal      int        `json:"signal,omitempty"`
	StartedAt   time.Time  `json:"started_at"`
	EndedAt     *time.Time `json:"ended_at,omitempty"`
	OutputBytes int64      `json:"output_bytes"`
	OutputStart int64      `json:"output_start"`
}

// ProcRequest names a durable process and what to do with it.
type ProcRequest struct {
	ID     string `json:"id"`
	Offset int64  `json:"offset,omitempty"` // output: first byte wanted
	Follow bool   `json:"follow,omitempty"` // output: wait for more until exit
	Signal int    `json:"signal,omitempty"` // signal
	Cols   int    `json:"cols,omitempty"`   // resize
	Rows   int    `json:"rows,omitempty"`   // resize
	EOF    bool   `json:"eof,omitempty"`    // stdin: close after the data
}

// ProcList answers OpProcList.
type ProcList struct {
	Processes []ProcInfo `json:"processes"`
}

// ProcOutputEvent is an Event on an output stream. "start" gives the offset
// of the first Data byte that follows; "gap" says [From, To) was dropped
// before it could be sent, and Data continues at To; "exit" (last, before the
// Reply) says the process ended and all its output was sent. Data frames
// between events are contiguous, on their channel's flag.
type ProcOutputEvent struct {
	Kind     string `json:"kind"`
	Offset   int64  `json:"offset,omitempty"`
	From     int64  `json:"from,omitempty"`
	To       int64  `json:"to,omitempty"`
	ExitCode int    `json:"exit_code,omitempty"`
	Signal   int    `json:"signal,omitempty"`
}

// StdinReply answers OpProcStdin.
type StdinReply struct {
	Written int64 `json:"written"`
}
