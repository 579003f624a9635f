package mcpapi

import (
	"bytes"
	"cmp"
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"path"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/warrenhq/warren/api"
	"github.com/warrenhq/warren/internal/errdefs"
)

// Bounds that keep a tool's answer a size an agent can take in.
const (
	readDefaultBytes   = 256 << 10
	readMaxBytes       = 4 << 20
	outputDefaultBytes = 64 << 10
	// execDefaultOutputBytes is exec's max_output_bytes over MCP unless
	// the call asks otherwise: a model's context is smaller than the
	// daemon's default (session.exec_output_bytes).
	execDefaultOutputBytes = 64 << 10
	// bothFormsBytes is the most output (exec's stdout and stderr
	// together, process_output's output, read_file's content) a result
	// carries twice, in its text content for the model and in its
	// structured content. Past it the bytes travel once, in the text
	// content, and the structured content says so (output_in_text,
	// content_in_text) with the field left empty.
	bothFormsBytes = 16 << 10
	outputMaxBytes = 1 << 20
	maxWaitSeconds = 300
	editMaxBytes   = 8 << 20
	listMaxEntries = 1000
)

// tools are the MCP tools over one backend.
type tools struct {
	b    Backend
	opts Options
}

func invalid(format string, args ...any) error {
	return errdefs.New(errdefs.ErrInvalidArgument, format, args...)
}

func text(s string) []mcp.Content { return []mcp.Content{&mcp.TextContent{Text: s}} }

func hints(readOnly, destructive, idempotent bool) *mcp.ToolAnnotations {
	no := false
	return &mcp.ToolAnnotations{ReadOnlyHint: readOnly, DestructiveHint: &destructive, IdempotentHint: idempotent, OpenWorldHint: &no}
}

func (t *tools) register(s *mcp.Server) {
	addTool(t, s, &mcp.Tool{
		Name:        "create_session",
		Description: "Create a new isolated Linux sandbox session (a container-like machine with a persistent bash shell, its own files and processes, and no network unless network asks for one). Returns the session; pass its id as session_id to every other tool. Giving an id you used before returns that existing session instead of a new one. Idle sessions are deleted after ttl_seconds (default 30 minutes).",
		Annotations: hints(false, false, true),
	}, func(in *CreateSessionInput, out *Session) (string, string) { return cmp.Or(out.ID, in.ID), "" }, t.createSession)
	addTool(t, s, &mcp.Tool{
		Name:        "network_denials",
		Description: "List the connections and DNS names a session's egress policy refused lately, oldest first (the last 256), each with its host, port (0 for a DNS question), protocol and the reason, such as \"not on the allow-list\". Read it when a download, install or request in the session fails with a DNS or connection error, to tell a policy refusal from a fault.",
		Annotations: hints(true, false, true),
	}, nil, t.networkDenials)
	addTool(t, s, &mcp.Tool{
		Name:        "get_session",
		Description: "Describe one session: its state, image, current working directory, limits, expiry and resource usage.",
		Annotations: hints(true, false, true),
	}, nil, t.getSession)
	addTool(t, s, &mcp.Tool{
		Name:        "list_sessions",
		Description: "List your sessions (id, state, image, working directory, expiry), oldest first. Use it to find a session to reuse instead of creating a new one.",
		Annotations: hints(true, false, true),
	}, nil, t.listSessions)
	addTool(t, s, &mcp.Tool{
		Name:        "delete_session",
		Description: "Delete a session and everything in it: its processes and files are gone for good.",
		Annotations: hints(false, true, true),
	}, func(in *SessionInput, _ *Deleted) (string, string) { return in.SessionID, "" }, t.deleteSession)
	addTool(t, s, &mcp.Tool{
		Name: "exec",
		Description: "Run a shell command in a session and wait for it to finish. The command goes to the session's persistent bash shell, so the working directory (cd), exported and plain variables, functions and activated virtualenvs carry over to the next exec, as in a terminal. Returns stdout, stderr and the exit code separately (a failing command is not a tool error: read exit_code). " +
			"Commands are killed after timeout_ms (default 2 minutes) and report timed_out; output beyond max_output_bytes per stream (default 64 KiB) is dropped and reported as truncated. " +
			"Output travels once when large: up to 16 KiB of stdout and stderr together is in both the text and the structured result; more is only in the text, and the structured result then has output_in_text set and empty stdout and stderr. " +
			"exec waits for the command to end (a host may time the call out; progress notifications are sent when the call carries a progress token): for servers, watchers and anything that runs longer than a minute or two, or does not end by itself, use start_process and read its output with process_output. " +
			"Background jobs (cmd &) keep running after exec returns, but their later output is not captured. Do not run interactive programs (editors, pagers, prompts): stdin is empty unless you pass stdin.",
		Annotations: hints(false, true, false),
	}, func(in *ExecInput, _ *ExecOutput) (string, string) { return in.SessionID, "" }, t.exec)
	addTool(t, s, &mcp.Tool{
		Name:        "start_process",
		Description: "Start a long-running process in a session (a dev server, a build, a test suite) without waiting for it. It keeps running on its own and its output (stdout and stderr merged, in order) is kept in a bounded buffer; read it with process_output. Returns the process id. Stop it with exec, e.g. `kill <pid>`.",
		Annotations: hints(false, false, false),
	}, func(in *StartProcessInput, out *Process) (string, string) { return in.SessionID, out.ProcessID }, t.startProcess)
	addTool(t, s, &mcp.Tool{
		Name:        "process_output",
		Description: "Read the output of a process started with start_process, from a byte offset (0 for the beginning; negative for that many bytes back from the end). With wait_seconds it waits until the process exits, max_bytes of output arrived, or the time is up, whichever comes first; without, it returns what is there now. Returns the output, whether the process still runs and its exit code, and next_offset: pass it as offset next time to read on without repeats or gaps. Output of more than 16 KiB is only in the text result (output_in_text), not also in the structured one.",
		Annotations: hints(true, false, false),
	}, nil, t.processOutput)
	addTool(t, s, &mcp.Tool{
		Name:        "read_file",
		Description: "Read a file of a session. Text comes back as is; a binary file comes back base64-encoded (encoding \"base64\"). At most max_bytes (default 256 KiB) are returned from offset; truncated says there is more, to read with a larger offset. For a slice of lines of a big file, exec `sed -n '100,200p' file` is often better. Content of more than 16 KiB is only in the text result (content_in_text), not also in the structured one.",
		Annotations: hints(true, false, true),
	}, nil, t.readFile)
	addTool(t, s, &mcp.Tool{
		Name:        "write_file",
		Description: "Create or overwrite a file in a session with the given content, creating missing parent directories. Text by default; pass encoding \"base64\" for binary content. An existing file keeps its permissions unless mode is given. To change part of an existing file, prefer edit_file.",
		Annotations: hints(false, true, true),
	}, func(in *WriteFileInput, _ *FileWritten) (string, string) { return in.SessionID, in.Path }, t.writeFile)
	addTool(t, s, &mcp.Tool{
		Name:        "edit_file",
		Description: "Edit a text file in a session by replacing an exact string: old_string must occur exactly once in the file (include enough surrounding lines to make it unique), unless replace_all is true, which replaces every occurrence. Whitespace and indentation must match exactly. Fails without changing anything when old_string is not found or is not unique; read_file the file again in that case.",
		Annotations: hints(false, true, false),
	}, func(in *EditFileInput, _ *EditResult) (string, string) { return in.SessionID, in.Path }, t.editFile)
	addTool(t, s, &mcp.Tool{
		Name:        "list_files",
		Description: "List a directory of a session: each entry's name, type (file, dir, symlink), size, permissions and modification time. For a recursive search by name or content use search_files.",
		Annotations: hints(true, false, true),
	}, nil, t.listFiles)
	addTool(t, s, &mcp.Tool{
		Name:        "delete_file",
		Description: "Delete a file, symlink or empty directory of a session; with recursive, a directory and everything below it.",
		Annotations: hints(false, true, true),
	}, func(in *DeleteFileInput, _ *Deleted) (string, string) { return in.SessionID, in.Path }, t.deleteFile)
	addTool(t, s, &mcp.Tool{
		Name:        "search_files",
		Description: "Search a session's files recursively. With pattern: the lines that match (a regular expression, extended syntax; or an exact string with fixed_strings), as path, line number and text, like grep -rn; glob limits the search to file names that match, e.g. \"*.py\". With only glob: the paths of the files whose name matches, like find -name. Binary files and .git directories are skipped. At most max_results (default 100) results; truncated says there were more.",
		Annotations: hints(true, false, true),
	}, nil, t.searchFiles)
}

// Inputs and outputs. Their json and jsonschema tags are the tools' schemas.

// SessionInput names a session.
type SessionInput struct {
	SessionID string `json:"session_id" jsonschema:"the session's id, as create_session or list_sessions returned it"`
}

// Limits are a session's resource limits.
type Limits struct {
	MemoryMB int64   `json:"memory_mb,omitempty" jsonschema:"memory limit in MiB (default 512)"`
	CPUs     float64 `json:"cpus,omitempty" jsonschema:"CPU limit in cores (default 1)"`
	Pids     int64   `json:"pids,omitempty" jsonschema:"most processes at once (default 256)"`
	DiskMB   int64   `json:"disk_mb,omitempty" jsonschema:"limit of the session's writable disk in MiB, where the daemon enforces it"`
}

// CreateSessionInput is create_session's input.
type CreateSessionInput struct {
	ID         string            `json:"id,omitempty" jsonschema:"optional id of your choosing ([a-z0-9][a-z0-9_-]{0,62}); an id that exists returns that session"`
	Image      string            `json:"image,omitempty" jsonschema:"image to start from (default \"base\": a Debian userland with bash, coreutils, python3 where the host has them)"`
	Cwd        string            `json:"cwd,omitempty" jsonschema:"absolute working directory at start (default /workspace); relative file paths resolve against it"`
	Env        map[string]string `json:"env,omitempty" jsonschema:"environment variables of the session's shell and processes"`
	TTLSeconds int64             `json:"ttl_seconds,omitempty" jsonschema:"idle seconds after which the session is deleted (default 1800)"`
	Limits     *Limits           `json:"limits,omitempty" jsonschema:"resource limits; defaults apply to what is left out"`
	Labels     map[string]string `json:"labels,omitempty" jsonschema:"free-form labels to recognise the session by"`
	Network    *Network          `json:"network,omitempty" jsonschema:"egress beyond loopback (default: none); what it refuses is listed by network_denials"`
}

// Network is a session's egress policy.
type Network struct {
	Mode  string   `json:"mode,omitempty" jsonschema:"none (loopback only, the default), open (the internet minus private, host and metadata addresses) or allowlist (only what allow names; the default when allow is given)"`
	Allow []string `json:"allow,omitempty" jsonschema:"allowed names (pypi.org), wildcards of subdomains (*.pythonhosted.org), IPv4 addresses or CIDRs, each with an optional :port (github.com:443)"`
	Deny  []string `json:"deny,omitempty" jsonschema:"denied names, wildcards, IPv4 addresses or CIDRs (no ports); they win over allow"`
}

// NetworkDenials is network_denials' output.
type NetworkDenials struct {
	Denials []api.NetworkDenial `json:"denials" jsonschema:"oldest first; port is 0 for a DNS question; proto is dns, tcp, udp, icmp or ipv6"`
}

// Session describes a session.
type Session struct {
	ID        string            `json:"id" jsonschema:"the session's id: pass it as session_id"`
	State     string            `json:"state" jsonschema:"creating, running, deleting or failed (lost in a fleet: its node died)"`
	Image     string            `json:"image"`
	Cwd       string            `json:"cwd" jsonschema:"the shell's working directory as of its last command"`
	User      string            `json:"user" jsonschema:"the user the session's processes run as"`
	CreatedAt time.Time         `json:"created_at"`
	ExpiresAt time.Time         `json:"expires_at" jsonschema:"when the session is deleted unless used again"`
	Limits    Limits            `json:"limits"`
	Labels    map[string]string `json:"labels,omitempty"`
	Usage     *api.Usage        `json:"usage,omitempty" jsonschema:"current resource usage"`
	Reason    string            `json:"reason,omitempty" jsonschema:"why a failed session failed"`
	Node      string            `json:"node,omitempty" jsonschema:"in a fleet, the node that holds the session"`
}

func toSession(s *api.Session) *Session {
	return &Session{
		ID: s.ID, State: s.State, Image: s.Image, Cwd: s.Cwd, User: s.User,
		CreatedAt: s.CreatedAt, ExpiresAt: s.ExpiresAt,
		Limits: Limits{MemoryMB: s.Limits.MemoryMB, CPUs: s.Limits.CPUs, Pids: s.Limits.Pids, DiskMB: s.Limits.DiskMB},
		Labels: s.Labels, Usage: s.Usage, Reason: s.Reason, Node: s.Node,
	}
}

func (t *tools) createSession(ctx context.Context, in *CreateSessionInput) (*Session, []mcp.Content, error) {
	req := &api.CreateSessionRequest{ID: in.ID, Image: in.Image, Cwd: in.Cwd, Env: in.Env, TTLSeconds: in.TTLSeconds, Labels: in.Labels}
	if l := in.Limits; l != nil {
		req.Limits = &api.Limits{MemoryMB: l.MemoryMB, CPUs: l.CPUs, Pids: l.Pids, DiskMB: l.DiskMB}
	}
	if n := in.Network; n != nil {
		req.Network = &api.NetworkPolicy{Mode: n.Mode, Allow: n.Allow, Deny: n.Deny}
	}
	s, err := t.b.CreateSession(ctx, req)
	if err != nil {
		return nil, nil, err
	}
	return toSession(s), nil, nil
}

func (t *tools) networkDenials(ctx context.Context, in *SessionInput) (*NetworkDenials, []mcp.Content, error) {
	ds, err := t.b.NetworkDenials(ctx, in.SessionID)
	if err != nil {
		return nil, nil, err
	}
	if ds == nil {
		ds = []api.NetworkDenial{}
	}
	return &NetworkDenials{Denials: ds}, nil, nil
}

func (t *tools) getSession(ctx context.Context, in *SessionInput) (*Session, []mcp.Content, error) {
	s, err := t.b.GetSession(ctx, in.SessionID)
	if err != nil {
		return nil, nil, err
	}
	return toSession(s), nil, nil
}

// ListSessionsInput is list_sessions' (empty) input.
type ListSessionsInput struct{}

// SessionList is list_sessions' output.
type SessionList struct {
	Sessions []Session `json:"sessions"`
}

func (t *tools) listSessions(ctx context.Context, _ *ListSessionsInput) (*SessionList, []mcp.Content, error) {
	l, err := t.b.ListSessions(ctx)
	if err != nil {
		return nil, nil, err
	}
	out := &SessionList{Sessions: make([]Session, 0, len(l))}
	for i := range l {
		out.Sessions = append(out.Sessions, *toSession(&l[i]))
	}
	return out, nil, nil
}

// Deleted is the output of the delete tools.
type Deleted struct {
	Deleted string `json:"deleted" jsonschema:"the session id or path that was deleted"`
}

func (t *tools) deleteSession(ctx context.Context, in *SessionInput) (*Deleted, []mcp.Content, error) {
	if err := t.b.DeleteSession(ctx, in.SessionID); err != nil {
		return nil, nil, err
	}
	return &Deleted{Deleted: in.SessionID}, nil, nil
}

// ExecInput is exec's input.
type ExecInput struct {
	SessionID      string            `json:"session_id" jsonschema:"the session to run in"`
	Command        string            `json:"command,omitempty" jsonschema:"shell command line, run by the session's persistent bash (pipes, redirections, && and cd work)"`
	Argv           []string          `json:"argv,omitempty" jsonschema:"instead of command: a program and its arguments, run directly without a shell (no quoting needed); it changes no shell state and may run concurrently with other calls"`
	Stdin          string            `json:"stdin,omitempty" jsonschema:"text fed to the command's standard input (default: empty)"`
	Cwd            string            `json:"cwd,omitempty" jsonschema:"absolute directory to run this command in; the command then runs in a subshell and changes no shell state"`
	Env            map[string]string `json:"env,omitempty" jsonschema:"extra environment variables for this command only (a subshell, as with cwd)"`
	TimeoutMs      int64             `json:"timeout_ms,omitempty" jsonschema:"kill the command after this many milliseconds (default 120000)"`
	MaxOutputBytes int64             `json:"max_output_bytes,omitempty" jsonschema:"cap on each of stdout and stderr in bytes (default 65536); the rest is dropped and truncated is set"`
}

// ExecOutput is exec's output.
type ExecOutput struct {
	ExitCode       int     `json:"exit_code" jsonschema:"the command's exit status (128+n when killed by signal n)"`
	Stdout         string  `json:"stdout"`
	Stderr         string  `json:"stderr"`
	StdoutBase64   string  `json:"stdout_base64,omitempty" jsonschema:"the exact stdout bytes, when they are not valid UTF-8"`
	StderrBase64   string  `json:"stderr_base64,omitempty" jsonschema:"the exact stderr bytes, when they are not valid UTF-8"`
	Signal         string  `json:"signal,omitempty" jsonschema:"the signal that ended the command, if any"`
	TimedOut       bool    `json:"timed_out" jsonschema:"the command hit its timeout and was killed"`
	Truncated      bool    `json:"truncated" jsonschema:"output beyond max_output_bytes was dropped"`
	ShellRestarted bool    `json:"shell_restarted" jsonschema:"the shell ended (exit, exec, a kill) and a fresh one took its place with the last working directory and exported variables; other shell state was lost"`
	OOMKilled      bool    `json:"oom_killed" jsonschema:"a process was killed for exceeding the session's memory limit"`
	DurationMs     float64 `json:"duration_ms"`
	OutputInText   bool    `json:"output_in_text,omitempty" jsonschema:"stdout and stderr were larger than 16 KiB together: they are only in the text content, and stdout, stderr and their base64 forms are empty here"`
}

func (t *tools) exec(ctx context.Context, in *ExecInput) (*ExecOutput, []mcp.Content, error) {
	req := &api.ExecRequest{
		Command: in.Command, Argv: in.Argv, Cwd: in.Cwd, Env: in.Env,
		TimeoutMs: in.TimeoutMs, MaxOutputBytes: cmp.Or(in.MaxOutputBytes, execDefaultOutputBytes),
	}
	if in.Stdin != "" {
		req.Stdin = &in.Stdin
	}
	res, err := t.b.Exec(ctx, in.SessionID, req)
	if err != nil {
		return nil, nil, err
	}
	out := &ExecOutput{
		ExitCode: res.ExitCode, Stdout: res.Stdout, Stderr: res.Stderr,
		StdoutBase64: res.StdoutBase64, StderrBase64: res.StderrBase64, Signal: res.Signal,
		TimedOut: res.TimedOut, Truncated: res.Truncated, ShellRestarted: res.ShellRestarted,
		OOMKilled: res.OOMKilled, DurationMs: res.DurationMs,
	}
	out.OutputInText = len(out.Stdout)+len(out.Stderr) > bothFormsBytes
	content := text(execText(out))
	if out.OutputInText {
		out.Stdout, out.Stderr, out.StdoutBase64, out.StderrBase64 = "", "", "", ""
	}
	return out, content, nil
}

// execText is an exec result as an agent reads it best: the exit code,
// what went wrong, then the two streams.
func execText(r *ExecOutput) string {
	var b strings.Builder
	fmt.Fprintf(&b, "exit_code: %d", r.ExitCode)
	if r.Signal != "" {
		fmt.Fprintf(&b, " (killed by %s)", r.Signal)
	}
	b.WriteByte('\n')
	if r.TimedOut {
		b.WriteString("[timed out: the command was killed when it reached its timeout (timeout_ms)]\n")
	}
	if r.Truncated {
		b.WriteString("[output truncated: only the first max_output_bytes of each stream were kept; narrow the output (head, tail, grep) or redirect it to a file]\n")
	}
	if r.OOMKilled {
		b.WriteString("[a process was killed for exceeding the session's memory limit]\n")
	}
	if r.ShellRestarted {
		b.WriteString("[the shell ended and was restarted: the working directory and exported variables were kept, other shell state was lost]\n")
	}
	for _, s := range []struct{ name, text, b64 string }{{"stdout", r.Stdout, r.StdoutBase64}, {"stderr", r.Stderr, r.StderrBase64}} {
		if s.text == "" {
			fmt.Fprintf(&b, "%s: (empty)\n", s.name)
			continue
		}
		fmt.Fprintf(&b, "%s:\n%s", s.name, s.text)
		if !strings.HasSuffix(s.text, "\n") {
			b.WriteByte('\n')
		}
		switch {
		case s.b64 != "" && r.OutputInText:
			fmt.Fprintf(&b, "[%s is not valid UTF-8: invalid bytes are shown as U+FFFD; for the exact bytes redirect it to a file and read_file that]\n", s.name)
		case s.b64 != "":
			fmt.Fprintf(&b, "[%s is not valid UTF-8: invalid bytes are shown as U+FFFD; the exact bytes are in %s_base64]\n", s.name, s.name)
		}
	}
	return b.String()
}

// StartProcessInput is start_process' input.
type StartProcessInput struct {
	SessionID string            `json:"session_id" jsonschema:"the session to run in"`
	Command   string            `json:"command,omitempty" jsonschema:"shell command line to run (by bash -c), e.g. \"npm run dev\""`
	Argv      []string          `json:"argv,omitempty" jsonschema:"instead of command: a program and its arguments, run without a shell"`
	Cwd       string            `json:"cwd,omitempty" jsonschema:"absolute directory to run in (default: the shell's current one)"`
	Env       map[string]string `json:"env,omitempty" jsonschema:"extra environment variables"`
}

// Process describes a process started with start_process.
type Process struct {
	ProcessID   string    `json:"process_id" jsonschema:"pass it as process_id to process_output"`
	Pid         int       `json:"pid" jsonschema:"the process id inside the sandbox (for kill)"`
	State       string    `json:"state" jsonschema:"running or exited"`
	ExitCode    *int      `json:"exit_code,omitempty"`
	StartedAt   time.Time `json:"started_at"`
	OutputBytes int64     `json:"output_bytes" jsonschema:"bytes of output so far"`
}

func (t *tools) startProcess(ctx context.Context, in *StartProcessInput) (*Process, []mcp.Content, error) {
	p, err := t.b.StartProcess(ctx, in.SessionID, &api.StartProcessRequest{Command: in.Command, Argv: in.Argv, Cwd: in.Cwd, Env: in.Env})
	if err != nil {
		return nil, nil, err
	}
	return &Process{ProcessID: p.ID, Pid: p.Pid, State: p.State, ExitCode: p.ExitCode, StartedAt: p.StartedAt, OutputBytes: p.OutputBytes}, nil, nil
}

// ProcessOutputInput is process_output's input.
type ProcessOutputInput struct {
	SessionID   string  `json:"session_id" jsonschema:"the process's session"`
	ProcessID   string  `json:"process_id" jsonschema:"the id start_process returned"`
	Offset      int64   `json:"offset,omitempty" jsonschema:"first byte to return: 0 for the beginning, next_offset of the previous call to read on, negative for that many bytes back from the end"`
	WaitSeconds float64 `json:"wait_seconds,omitempty" jsonschema:"wait up to this long (at most 300) for the process to exit, returning early once max_bytes arrived; 0 returns at once"`
	MaxBytes    int64   `json:"max_bytes,omitempty" jsonschema:"most bytes of output to return (default 65536, at most 1048576)"`
}

// ProcessOutput is process_output's output.
type ProcessOutput struct {
	Output       string `json:"output" jsonschema:"the output, stdout and stderr merged as written"`
	OutputBase64 string `json:"output_base64,omitempty" jsonschema:"the exact bytes, when they are not valid UTF-8"`
	Offset       int64  `json:"offset" jsonschema:"offset of the first byte of output"`
	NextOffset   int64  `json:"next_offset" jsonschema:"pass as offset to read on"`
	DroppedBytes int64  `json:"dropped_bytes,omitempty" jsonschema:"bytes of output lost because the bounded buffer dropped them before they were read"`
	MoreOutput   bool   `json:"more_output" jsonschema:"output past next_offset is already there: call again"`
	Running      bool   `json:"running" jsonschema:"the process still runs"`
	ExitCode     *int   `json:"exit_code,omitempty" jsonschema:"the exit status, once the process exited"`
	Signal       string `json:"signal,omitempty" jsonschema:"the signal that ended the process, if any"`
	OutputInText bool   `json:"output_in_text,omitempty" jsonschema:"the output was larger than 16 KiB: it is only in the text content, and output and output_base64 are empty here"`
}

// errFull stops an output stream once max_bytes arrived.
var errFull = fmt.Errorf("enough output")

func (t *tools) processOutput(ctx context.Context, in *ProcessOutputInput) (*ProcessOutput, []mcp.Content, error) {
	limit := in.MaxBytes
	switch {
	case limit < 0:
		return nil, nil, invalid("max_bytes must not be negative")
	case limit == 0:
		limit = outputDefaultBytes
	case limit > outputMaxBytes:
		limit = outputMaxBytes
	}
	if in.WaitSeconds < 0 || in.WaitSeconds > maxWaitSeconds {
		return nil, nil, invalid("wait_seconds must be between 0 and %d", maxWaitSeconds)
	}
	wait := time.Duration(in.WaitSeconds * float64(time.Second))
	sctx := ctx
	if wait > 0 {
		var cancel context.CancelFunc
		sctx, cancel = context.WithTimeout(ctx, wait)
		defer cancel()
	}
	out := &ProcessOutput{Offset: -1, NextOffset: in.Offset}
	var buf []byte
	var exit *OutputEvent
	full := false
	err := t.b.ProcessOutput(sctx, in.SessionID, in.ProcessID, in.Offset, wait > 0, func(ev OutputEvent) error {
		switch ev.Kind {
		case "gap":
			out.DroppedBytes += ev.To - ev.From
			out.NextOffset = max(out.NextOffset, ev.To)
		case "output":
			if out.Offset < 0 {
				out.Offset = ev.Offset
			}
			d := ev.Data
			if room := int(limit) - len(buf); len(d) > room {
				d, full = d[:room], true
			}
			buf = append(buf, d...)
			out.NextOffset = ev.Offset + int64(len(d))
			if full {
				return errFull
			}
		case "exit":
			exit = &ev
		}
		return nil
	})
	switch {
	case err == nil, err == errFull:
	case sctx.Err() != nil && ctx.Err() == nil:
		// Waited as long as asked: return what came.
	default:
		return nil, nil, err
	}
	if full {
		// Do not split a character: leave its first bytes for next time.
		if cut := incompleteTail(buf); cut > 0 {
			buf = buf[:len(buf)-cut]
			out.NextOffset -= int64(cut)
		}
	}
	ended := exit != nil && !full // everything up to the exit was read
	if ended {
		code := exit.ExitCode
		out.ExitCode, out.Signal = &code, exit.Signal
	}
	if !ended || out.NextOffset < 0 {
		p, err := t.b.GetProcess(ctx, in.SessionID, in.ProcessID)
		if err != nil {
			return nil, nil, err
		}
		if out.NextOffset < 0 {
			out.NextOffset = p.OutputBytes // counted from the end, and nothing came
		}
		if !ended {
			if p.State == "running" {
				out.Running = true
			} else {
				out.ExitCode, out.Signal = p.ExitCode, p.Signal
			}
			out.MoreOutput = p.OutputBytes > out.NextOffset
		}
	}
	if out.Offset < 0 {
		out.Offset = out.NextOffset
	}
	out.Output, out.OutputBase64 = textOf(buf)
	out.OutputInText = len(out.Output) > bothFormsBytes
	content := text(processOutputText(in.ProcessID, out))
	if out.OutputInText {
		out.Output, out.OutputBase64 = "", ""
	}
	return out, content, nil
}

// incompleteTail is the length of an incomplete UTF-8 character at the end
// of b (0 if none).
func incompleteTail(b []byte) int {
	for i := len(b) - 1; i >= 0 && i >= len(b)-utf8.UTFMax; i-- {
		if utf8.RuneStart(b[i]) {
			if !utf8.FullRune(b[i:]) {
				return len(b) - i
			}
			return 0
		}
	}
	return 0
}

func processOutputText(pid string, o *ProcessOutput) string {
	var b strings.Builder
	switch {
	case o.Running:
		fmt.Fprintf(&b, "process %s: running\n", pid)
	case o.Signal != "":
		fmt.Fprintf(&b, "process %s: exited, killed by %s\n", pid, o.Signal)
	case o.ExitCode != nil:
		fmt.Fprintf(&b, "process %s: exited with code %d\n", pid, *o.ExitCode)
	}
	if o.DroppedBytes > 0 {
		fmt.Fprintf(&b, "[%d bytes of output were dropped from the bounded buffer before they were read]\n", o.DroppedBytes)
	}
	if o.Output == "" {
		fmt.Fprintf(&b, "no new output (next_offset: %d)\n", o.NextOffset)
	} else {
		fmt.Fprintf(&b, "output bytes %d to %d:\n%s", o.Offset, o.NextOffset, o.Output)
		if !strings.HasSuffix(o.Output, "\n") {
			b.WriteByte('\n')
		}
		switch {
		case o.OutputBase64 != "" && o.OutputInText:
			b.WriteString("[the output is not valid UTF-8: invalid bytes are shown as U+FFFD; read less at a time (max_bytes) for the exact bytes in output_base64]\n")
		case o.OutputBase64 != "":
			b.WriteString("[the output is not valid UTF-8: invalid bytes are shown as U+FFFD; the exact bytes are in output_base64]\n")
		}
	}
	if o.MoreOutput {
		fmt.Fprintf(&b, "[more output is available: call process_output again with offset %d]\n", o.NextOffset)
	}
	return b.String()
}

// ReadFileInput is read_file's input.
type ReadFileInput struct {
	SessionID string `json:"session_id" jsonschema:"the file's session"`
	Path      string `json:"path" jsonschema:"the file's path: absolute, or relative to the session's working directory at creation"`
	Offset    int64  `json:"offset,omitempty" jsonschema:"first byte to return (default 0)"`
	MaxBytes  int64  `json:"max_bytes,omitempty" jsonschema:"most bytes to return (default 262144, at most 4194304)"`
}

// FileContent is read_file's output.
type FileContent struct {
	Path      string `json:"path"`
	Content   string `json:"content" jsonschema:"the file's content: text, or base64 when encoding is base64"`
	Encoding  string `json:"encoding" jsonschema:"utf-8 for text, base64 for binary content"`
	Offset    int64  `json:"offset" jsonschema:"offset of the first byte returned"`
	Bytes     int64  `json:"bytes" jsonschema:"how many bytes were returned"`
	Truncated bool   `json:"truncated" jsonschema:"the file goes on past offset+bytes"`
	InText    bool   `json:"content_in_text,omitempty" jsonschema:"the content was larger than 16 KiB: it is only in the text content, and content is empty here"`
}

func (t *tools) readFile(ctx context.Context, in *ReadFileInput) (*FileContent, []mcp.Content, error) {
	limit := in.MaxBytes
	switch {
	case limit < 0:
		return nil, nil, invalid("max_bytes must not be negative")
	case limit == 0:
		limit = readDefaultBytes
	case limit > readMaxBytes:
		limit = readMaxBytes
	}
	if in.Offset < 0 {
		return nil, nil, invalid("offset must not be negative")
	}
	rc, err := t.b.ReadFile(ctx, in.SessionID, in.Path)
	if err != nil {
		return nil, nil, err
	}
	defer rc.Close()
	if in.Offset > 0 {
		if _, err := io.CopyN(io.Discard, rc, in.Offset); err != nil && err != io.EOF {
			return nil, nil, readErr(in.Path, err)
		}
	}
	data, err := io.ReadAll(io.LimitReader(rc, limit+1))
	if err != nil {
		return nil, nil, readErr(in.Path, err)
	}
	out := &FileContent{Path: in.Path, Offset: in.Offset}
	if int64(len(data)) > limit {
		data, out.Truncated = data[:limit], true
		if isText(data[:len(data)-incompleteTail(data)]) {
			data = data[:len(data)-incompleteTail(data)]
		}
	}
	out.Bytes = int64(len(data))
	if isText(data) {
		out.Content, out.Encoding = string(data), "utf-8"
	} else {
		out.Content, out.Encoding = base64.StdEncoding.EncodeToString(data), "base64"
	}
	content := text(out.Content)
	var notes []string
	if out.Encoding == "base64" {
		notes = append(notes, fmt.Sprintf("[%s is binary: the content above is base64 of %d bytes]", in.Path, out.Bytes))
	}
	if out.Truncated {
		notes = append(notes, fmt.Sprintf("[truncated: bytes %d to %d shown; read on with offset %d]", out.Offset, out.Offset+out.Bytes, out.Offset+out.Bytes))
	}
	if len(notes) > 0 {
		content = append(content, &mcp.TextContent{Text: strings.Join(notes, "\n")})
	}
	if len(out.Content) > bothFormsBytes {
		out.Content, out.InText = "", true
	}
	return out, content, nil
}

// readErr classifies an error that broke a file transfer off.
func readErr(path string, err error) error {
	if errdefs.ClassOf(err) != errdefs.ErrInternal {
		return err
	}
	return errdefs.New(errdefs.ErrUnavailable, "reading %s broke off: %v", path, err)
}

// isText reports whether b reads as text: valid UTF-8 without NUL bytes.
func isText(b []byte) bool {
	return utf8.Valid(b) && bytes.IndexByte(b, 0) < 0
}

// WriteFileInput is write_file's input.
type WriteFileInput struct {
	SessionID string `json:"session_id" jsonschema:"the file's session"`
	Path      string `json:"path" jsonschema:"the file's path: absolute, or relative to the session's working directory at creation"`
	Content   string `json:"content" jsonschema:"the whole new content of the file"`
	Encoding  string `json:"encoding,omitempty" jsonschema:"utf-8 (default) or base64 (content is base64 of binary data)"`
	Mode      string `json:"mode,omitempty" jsonschema:"permission bits in octal, e.g. \"0755\" for a script (default: kept for an existing file, else 0644)"`
}

// FileWritten is write_file's output.
type FileWritten struct {
	Path  string `json:"path"`
	Bytes int64  `json:"bytes" jsonschema:"the file's size"`
}

func (t *tools) writeFile(ctx context.Context, in *WriteFileInput) (*FileWritten, []mcp.Content, error) {
	data := []byte(in.Content)
	switch in.Encoding {
	case "", "utf-8", "utf8", "text":
	case "base64":
		var err error
		if data, err = base64.StdEncoding.DecodeString(in.Content); err != nil {
			return nil, nil, invalid("content is not valid base64: %v", err)
		}
	default:
		return nil, nil, invalid("encoding %q: want utf-8 or base64", in.Encoding)
	}
	var mode uint32
	if in.Mode != "" {
		m, err := strconv.ParseUint(in.Mode, 8, 32)
		if err != nil || m > 0o7777 || m == 0 {
			return nil, nil, invalid("mode %q: want octal permission bits such as 0644 or 0755", in.Mode)
		}
		mode = uint32(m)
	}
	n, err := t.b.WriteFile(ctx, in.SessionID, in.Path, bytes.NewReader(data), mode)
	if err != nil {
		return nil, nil, err
	}
	return &FileWritten{Path: in.Path, Bytes: n}, nil, nil
}

// EditFileInput is edit_file's input.
type EditFileInput struct {
	SessionID  string `json:"session_id" jsonschema:"the file's session"`
	Path       string `json:"path" jsonschema:"the file's path: absolute, or relative to the session's working directory at creation"`
	OldString  string `json:"old_string" jsonschema:"the exact text to replace, including whitespace and indentation; it must occur exactly once unless replace_all"`
	NewString  string `json:"new_string" jsonschema:"the text to put in its place (may be empty to delete old_string)"`
	ReplaceAll bool   `json:"replace_all,omitempty" jsonschema:"replace every occurrence of old_string instead of requiring exactly one"`
}

// EditResult is edit_file's output.
type EditResult struct {
	Path         string `json:"path"`
	Replacements int    `json:"replacements" jsonschema:"how many occurrences were replaced"`
	Bytes        int64  `json:"bytes" jsonschema:"the file's new size"`
}

func (t *tools) editFile(ctx context.Context, in *EditFileInput) (*EditResult, []mcp.Content, error) {
	if in.OldString == "" {
		return nil, nil, invalid("old_string must not be empty; to write a whole file use write_file")
	}
	if in.OldString == in.NewString {
		return nil, nil, invalid("old_string and new_string are the same: there is nothing to change")
	}
	rc, err := t.b.ReadFile(ctx, in.SessionID, in.Path)
	if err != nil {
		return nil, nil, err
	}
	data, err := io.ReadAll(io.LimitReader(rc, editMaxBytes+1))
	rc.Close()
	if err != nil {
		return nil, nil, readErr(in.Path, err)
	}
	if len(data) > editMaxBytes {
		return nil, nil, errdefs.New(errdefs.ErrTooLarge, "%s is larger than the %d bytes edit_file works on; use exec (sed, a script) instead", in.Path, editMaxBytes)
	}
	edited, n, err := replace(data, in.Path, in.OldString, in.NewString, in.ReplaceAll)
	if err != nil {
		return nil, nil, err
	}
	size, err := t.b.WriteFile(ctx, in.SessionID, in.Path, bytes.NewReader(edited), 0)
	if err != nil {
		return nil, nil, err
	}
	return &EditResult{Path: in.Path, Replacements: n, Bytes: size}, nil, nil
}

// replace replaces old by new in data: the one occurrence, or every one
// with all. It fails when old does not occur, or occurs more than once
// without all, naming the lines where it does.
func replace(data []byte, path, old, new string, all bool) ([]byte, int, error) {
	n := bytes.Count(data, []byte(old))
	switch {
	case n == 0:
		hint := "read the file again and copy the text exactly, including whitespace and indentation"
		if trimmed := strings.TrimSpace(old); trimmed != old && trimmed != "" && bytes.Contains(data, []byte(trimmed)) {
			hint = "it does occur without its leading or trailing whitespace: check the whitespace"
		}
		return nil, 0, invalid("old_string was not found in %s; %s", path, hint)
	case n > 1 && !all:
		return nil, 0, invalid("old_string occurs %d times in %s (at lines %s); include more of the surrounding text to make it unique, or set replace_all to replace every occurrence",
			n, path, matchLines(data, old, n, 10))
	}
	return bytes.ReplaceAll(data, []byte(old), []byte(new)), n, nil
}

// matchLines lists the line numbers where the n occurrences of old start,
// at most most of them.
func matchLines(data []byte, old string, n, most int) string {
	var lines []string
	line, pos := 1, 0
	for len(lines) < most {
		i := bytes.Index(data[pos:], []byte(old))
		if i < 0 {
			break
		}
		line += bytes.Count(data[pos:pos+i], []byte("\n"))
		lines = append(lines, strconv.Itoa(line))
		line += bytes.Count([]byte(old), []byte("\n"))
		pos += i + len(old)
	}
	s := strings.Join(lines, ", ")
	if n > len(lines) {
		s += ", ..."
	}
	return s
}

// ListFilesInput is list_files' input.
type ListFilesInput struct {
	SessionID string `json:"session_id" jsonschema:"the directory's session"`
	Path      string `json:"path,omitempty" jsonschema:"the directory: absolute, or relative to the session's working directory at creation (default: that directory)"`
}

// FileEntry describes a file.
type FileEntry struct {
	Name   string    `json:"name"`
	Type   string    `json:"type" jsonschema:"file, dir, symlink or other"`
	Size   int64     `json:"size"`
	Mode   string    `json:"mode" jsonschema:"permission bits in octal"`
	MTime  time.Time `json:"mtime"`
	Target string    `json:"target,omitempty" jsonschema:"a symlink's target"`
}

// FileList is list_files' output.
type FileList struct {
	Path      string      `json:"path" jsonschema:"the directory's absolute path"`
	Entries   []FileEntry `json:"entries"`
	Truncated bool        `json:"truncated" jsonschema:"the directory has more entries than were returned"`
}

func (t *tools) listFiles(ctx context.Context, in *ListFilesInput) (*FileList, []mcp.Content, error) {
	p := in.Path
	if p == "" {
		p = "."
	}
	entries, err := t.b.ListFiles(ctx, in.SessionID, p)
	if err != nil {
		return nil, nil, err
	}
	out := &FileList{Path: p, Entries: make([]FileEntry, 0, min(len(entries), listMaxEntries))}
	if len(entries) > 0 {
		out.Path = path.Dir(path.Clean(entries[0].Path))
	} else if e, err := t.b.StatFile(ctx, in.SessionID, p); err == nil {
		out.Path = path.Clean(e.Path)
	}
	for i, e := range entries {
		if i == listMaxEntries {
			out.Truncated = true
			break
		}
		out.Entries = append(out.Entries, FileEntry{Name: e.Name, Type: e.Type, Size: e.Size, Mode: e.Mode, MTime: e.MTime, Target: e.Target})
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %d entries\n", out.Path, len(entries))
	for _, e := range out.Entries {
		switch e.Type {
		case "dir":
			fmt.Fprintf(&b, "%s/\n", e.Name)
		case "symlink":
			fmt.Fprintf(&b, "%s -> %s\n", e.Name, e.Target)
		default:
			fmt.Fprintf(&b, "%s\t%d bytes\t%s\n", e.Name, e.Size, e.Mode)
		}
	}
	if out.Truncated {
		fmt.Fprintf(&b, "[only the first %d entries are shown]\n", listMaxEntries)
	}
	return out, text(b.String()), nil
}

// DeleteFileInput is delete_file's input.
type DeleteFileInput struct {
	SessionID string `json:"session_id" jsonschema:"the file's session"`
	Path      string `json:"path" jsonschema:"the path to delete: absolute, or relative to the session's working directory at creation"`
	Recursive bool   `json:"recursive,omitempty" jsonschema:"delete a directory and everything below it"`
}

func (t *tools) deleteFile(ctx context.Context, in *DeleteFileInput) (*Deleted, []mcp.Content, error) {
	if err := t.b.RemoveFile(ctx, in.SessionID, in.Path, in.Recursive); err != nil {
		return nil, nil, err
	}
	return &Deleted{Deleted: in.Path}, nil, nil
}
