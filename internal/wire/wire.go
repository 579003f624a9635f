// Package wire is what every transport (REST, gRPC, MCP) says the same way:
// sessions and processes as API types, output as text or exact bytes,
// signals by name. One place, so the transports cannot drift.
package wire

import (
	"cmp"
	"encoding/base64"
	"fmt"
	"math"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unicode/utf8"

	"golang.org/x/sys/unix"

	"github.com/warrenhq/warren/api"
	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/session"
)

// Seconds is a count of seconds from a request as a duration. A count
// past what a time.Duration holds (about 292 years) does not wrap around
// into a small or negative duration, it saturates: the manager then
// refuses it as over its maximum, naming the field. Every transport
// converts its seconds and milliseconds here.
func Seconds(n int64) time.Duration { return scaled(n, time.Second) }

// Millis is a count of milliseconds from a request as a duration,
// saturating like Seconds.
func Millis(n int64) time.Duration { return scaled(n, time.Millisecond) }

func scaled(n int64, unit time.Duration) time.Duration {
	switch {
	case n > int64(math.MaxInt64/unit):
		return math.MaxInt64
	case n < int64(math.MinInt64/unit):
		return math.MinInt64
	}
	return time.Duration(n) * unit
}

// CreateRequest is a create request in the API's JSON shape (REST and MCP
// alike) for the manager; durations saturate (Seconds), so a value past a
// maximum is refused by the manager's check instead of wrapping around.
func CreateRequest(req *api.CreateSessionRequest) *session.CreateRequest {
	return &session.CreateRequest{
		ID:            req.ID,
		Image:         req.Image,
		Env:           req.Env,
		Cwd:           req.Cwd,
		Limits:        Limits(req.Limits),
		Network:       req.Network.GetMode(),
		NetworkAllow:  req.Network.GetAllow(),
		NetworkDeny:   req.Network.GetDeny(),
		IdleTTL:       Seconds(req.TTLSeconds),
		MaxLifetime:   Seconds(req.MaxLifetimeSeconds),
		Labels:        req.Labels,
		User:          req.User,
		Workspace:     req.Workspace,
		WorkspaceMode: req.WorkspaceMode,
		Snapshot:      req.Snapshot,
	}
}

// Limits is a request's limits for the manager (zero fields: defaults).
func Limits(l *api.Limits) session.Limits {
	if l == nil {
		return session.Limits{}
	}
	return session.Limits{MemoryMB: l.MemoryMB, CPUs: l.CPUs, Pids: l.Pids, DiskMB: l.DiskMB}
}

// Session is a session as the API shows it. The user is "root" when the
// session names none.
func Session(in *session.Info) api.Session {
	out := api.Session{
		ID:         in.ID,
		Image:      in.Image,
		State:      string(in.State),
		CreatedAt:  in.CreatedAt,
		LastUsedAt: in.LastUsedAt,
		ExpiresAt:  in.ExpiresAt(),
		Cwd:        in.Cwd,
		Limits:     api.Limits{MemoryMB: in.Limits.MemoryMB, CPUs: in.Limits.CPUs, Pids: in.Limits.Pids, DiskMB: in.Limits.DiskMB},
		Network:    in.Network,
		Labels:     in.Labels,
		Reason:     in.Reason,
		User:       in.User,
		Node:       in.Node,
	}
	if out.User == "" {
		out.User = "root"
	}
	if in.Usage != nil {
		out.Usage = &api.Usage{MemoryBytes: in.Usage.MemoryBytes, Pids: in.Usage.Pids, CPUSeconds: in.Usage.CPUSeconds, DiskBytes: in.Usage.DiskBytes,
			NetworkInBytes: in.Usage.NetworkInBytes, NetworkOutBytes: in.Usage.NetworkOutBytes}
	}
	return out
}

// SessionInfo is Session's inverse, for a session another fleet node
// listed: what the API shows of it, as the core's Info (its expiry kept as
// LastUsedAt plus IdleTTL; tenant is the owner when s names none).
func SessionInfo(s *api.Session, tenant, node string) *session.Info {
	in := &session.Info{Session: session.Session{
		ID: s.ID, Tenant: cmp.Or(s.Tenant, tenant), Image: s.Image, State: session.State(s.State), Reason: s.Reason,
		CreatedAt: s.CreatedAt, LastUsedAt: s.LastUsedAt, IdleTTL: s.ExpiresAt.Sub(s.LastUsedAt),
		Limits:  session.Limits{MemoryMB: s.Limits.MemoryMB, CPUs: s.Limits.CPUs, Pids: s.Limits.Pids, DiskMB: s.Limits.DiskMB},
		Network: s.Network, Labels: s.Labels, User: s.User,
	}, Cwd: s.Cwd, Node: cmp.Or(s.Node, node)}
	if in.User == "root" {
		in.User = ""
	}
	if u := s.Usage; u != nil {
		in.Usage = &session.Usage{MemoryBytes: u.MemoryBytes, Pids: u.Pids, CPUSeconds: u.CPUSeconds, DiskBytes: u.DiskBytes,
			NetworkInBytes: u.NetworkInBytes, NetworkOutBytes: u.NetworkOutBytes}
	}
	return in
}

// Process is a durable process as the API shows it.
func Process(in *session.ProcessInfo) api.Process {
	out := api.Process{
		ID: in.ID, Command: in.Command, Argv: in.Argv, TTY: in.TTY, State: "running", Pid: in.Pid,
		StartedAt: in.StartedAt, OutputBytes: in.OutputBytes, OutputStart: in.OutputStart,
	}
	if !in.Running {
		out.State = "exited"
		code := in.ExitCode
		out.ExitCode = &code
		out.EndedAt = in.EndedAt
		if in.Signal > 0 {
			out.Signal = SignalName(in.Signal)
		}
	}
	return out
}

// Result is a finished command as the API shows it.
func Result(res *session.ExecResult) api.ExecResult {
	out := api.ExecResult{
		ExitCode:       res.ExitCode,
		DurationMs:     float64(res.Duration.Microseconds()) / 1000,
		TimedOut:       res.TimedOut,
		Truncated:      res.Truncated,
		ShellRestarted: res.ShellRestarted,
		OOMKilled:      res.OOMKilled,
	}
	out.Stdout, out.StdoutBase64 = TextBase64(res.Stdout)
	out.Stderr, out.StderrBase64 = TextBase64(res.Stderr)
	if res.Signal > 0 {
		out.Signal = SignalName(res.Signal)
	}
	return out
}

// Entry is a file's entry as the API shows it; the mode in octal.
func Entry(e *session.Entry) api.FileEntry {
	return api.FileEntry{
		Name:   e.Name,
		Path:   e.Path,
		Type:   e.Type,
		Size:   e.Size,
		Mode:   fmt.Sprintf("%04o", e.Mode),
		MTime:  e.MTime,
		Target: e.Target,
	}
}

// TextBase64 is output as text, with the exact bytes in base64 beside it
// when they are not valid UTF-8.
func TextBase64(b []byte) (text, b64 string) {
	text, raw := Text(b)
	return text, Base64(raw)
}

// Text returns b as text, and b itself when it is not valid UTF-8 (the
// text then has U+FFFD in place of the invalid bytes).
func Text(b []byte) (text string, raw []byte) {
	if utf8.Valid(b) {
		return string(b), nil
	}
	return strings.ToValidUTF8(string(b), "\uFFFD"), b
}

// Base64 encodes raw bytes as the API's *_base64 fields do ("" for none).
func Base64(raw []byte) string {
	if raw == nil {
		return ""
	}
	return base64.StdEncoding.EncodeToString(raw)
}

// Chunker turns a byte stream into chunks that never split a UTF-8
// character: an incomplete character at a chunk's end waits for the next.
type Chunker struct{ pending []byte }

// Next returns the chunk for p as text, or as raw bytes when it is not
// UTF-8 (then everything held back goes with it).
func (u *Chunker) Next(p []byte) (text string, raw []byte) {
	data := append(u.pending, p...)
	u.pending = nil
	// Hold back a trailing incomplete character (at most 3 bytes).
	cut := len(data)
	for i := len(data) - 1; i >= 0 && i >= len(data)-3; i-- {
		if utf8.RuneStart(data[i]) {
			if !utf8.FullRune(data[i:]) {
				cut = i
			}
			break
		}
	}
	body := data[:cut]
	if utf8.Valid(body) {
		u.pending = append(u.pending, data[cut:]...)
		return string(body), nil
	}
	// Not text anyway: send everything as it is.
	return "", data
}

// Flush returns what is still held back (nil for nothing).
func (u *Chunker) Flush() []byte {
	if len(u.pending) == 0 {
		return nil
	}
	b := u.pending
	u.pending = nil
	return b
}

// SignalName names the signal that ended a process ("SIGKILL", or
// "signal 40" for one without a name).
func SignalName(n int) string {
	if s := unix.SignalName(syscall.Signal(n)); s != "" {
		return s
	}
	return "signal " + strconv.Itoa(n)
}

var signalNumbers = map[string]int{"HUP": 1, "INT": 2, "QUIT": 3, "KILL": 9, "USR1": 10, "USR2": 12, "PIPE": 13,
	"ALRM": 14, "TERM": 15, "CONT": 18, "STOP": 19, "TSTP": 20, "WINCH": 28}

// ParseSignal reads a signal a client names: a number from 1 to 64, or a
// name with or without SIG, in any case.
func ParseSignal(v string) (int, error) {
	if n, err := strconv.Atoi(v); err == nil && n > 0 && n <= 64 {
		return n, nil
	}
	if n, ok := signalNumbers[strings.TrimPrefix(strings.ToUpper(v), "SIG")]; ok {
		return n, nil
	}
	return 0, errdefs.New(errdefs.ErrInvalidArgument, "signal %q is not a signal name or number", v)
}

// ExecRequest is an API exec request for the manager: the timeout
// saturates (Millis), and stdin comes as text or base64, not both.
func ExecRequest(req *api.ExecRequest) (*session.ExecRequest, error) {
	out := &session.ExecRequest{
		Command:   req.Command,
		Argv:      req.Argv,
		Env:       req.Env,
		Cwd:       req.Cwd,
		Timeout:   Millis(req.TimeoutMs),
		MaxOutput: req.MaxOutputBytes,
	}
	switch {
	case req.Stdin != nil && req.StdinBase64 != nil:
		return nil, errdefs.New(errdefs.ErrInvalidArgument, "give either stdin or stdin_base64, not both")
	case req.Stdin != nil:
		out.Stdin = []byte(*req.Stdin)
	case req.StdinBase64 != nil:
		b, err := base64.StdEncoding.DecodeString(*req.StdinBase64)
		if err != nil {
			return nil, errdefs.New(errdefs.ErrInvalidArgument, "stdin_base64 is not valid base64: %v", err)
		}
		out.Stdin = b
	}
	return out, nil
}
