package grpcapi

import (
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"google.golang.org/protobuf/types/known/timestamppb"

	warrenv1 "github.com/warrenhq/warren/api/gen/warren/v1"
	"github.com/warrenhq/warren/internal/agentproto"
	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/session"
)

// The conversions below mirror httpapi's (toAPISession, toAPIResult,
// toAPIProcess, toAPIEntry, textOf, utf8Chunker, signalName, parseSignal)
// field for field, so that both transports say the same thing.

func timestamp(t time.Time) *timestamppb.Timestamp {
	if t.IsZero() {
		return nil
	}
	return timestamppb.New(t)
}

func toLimits(l *warrenv1.Limits) session.Limits {
	return session.Limits{MemoryMB: l.GetMemoryMb(), CPUs: l.GetCpus(), Pids: l.GetPids(), DiskMB: l.GetDiskMb()}
}

func toSession(in *session.Info) *warrenv1.Session {
	out := &warrenv1.Session{
		Id:         in.ID,
		Image:      in.Image,
		State:      string(in.State),
		CreatedAt:  timestamp(in.CreatedAt),
		LastUsedAt: timestamp(in.LastUsedAt),
		ExpiresAt:  timestamp(in.ExpiresAt()),
		Cwd:        in.Cwd,
		Limits:     &warrenv1.Limits{MemoryMb: in.Limits.MemoryMB, Cpus: in.Limits.CPUs, Pids: in.Limits.Pids, DiskMb: in.Limits.DiskMB},
		Network:    in.Network,
		Labels:     in.Labels,
		Reason:     in.Reason,
		User:       in.User,
	}
	if out.User == "" {
		out.User = "root"
	}
	if in.Usage != nil {
		out.Usage = &warrenv1.Usage{MemoryBytes: in.Usage.MemoryBytes, Pids: in.Usage.Pids, CpuSeconds: in.Usage.CPUSeconds, DiskBytes: in.Usage.DiskBytes}
	}
	return out
}

// execMessage is what ExecRequest, ExecStreamRequest and RunRequest share.
type execMessage interface {
	GetCommand() string
	GetArgv() []string
	GetEnv() map[string]string
	GetCwd() string
	GetTimeoutMs() int64
	GetMaxOutputBytes() int64
}

// toExecRequest converts the exec fields of a request; stdin is the
// request's input (nil without one).
func toExecRequest(m execMessage, stdin []byte) *session.ExecRequest {
	out := &session.ExecRequest{
		Command:   m.GetCommand(),
		Argv:      m.GetArgv(),
		Stdin:     stdin,
		Env:       m.GetEnv(),
		Cwd:       m.GetCwd(),
		Timeout:   time.Duration(m.GetTimeoutMs()) * time.Millisecond,
		MaxOutput: m.GetMaxOutputBytes(),
	}
	if m.GetTimeoutMs() < 0 {
		out.Timeout = -1
	}
	return out
}

// stdinOf returns the bytes of a request's input oneof: nil when it is
// unset (an empty stdin), never nil when it is set, even to nothing.
func stdinOf(input any) []byte {
	var b []byte
	switch v := input.(type) {
	case *warrenv1.ExecRequest_Stdin:
		b = []byte(v.Stdin)
	case *warrenv1.ExecRequest_StdinBase64:
		b = v.StdinBase64
	case *warrenv1.ExecStreamRequest_Stdin:
		b = []byte(v.Stdin)
	case *warrenv1.ExecStreamRequest_StdinBase64:
		b = v.StdinBase64
	case *warrenv1.RunRequest_Stdin:
		b = []byte(v.Stdin)
	case *warrenv1.RunRequest_StdinBase64:
		b = v.StdinBase64
	default:
		return nil
	}
	if b == nil {
		b = []byte{}
	}
	return b
}

// toExecResult encodes output as text, with the exact bytes beside it when
// they are not valid UTF-8.
func toExecResult(res *session.ExecResult) *warrenv1.ExecResult {
	out := &warrenv1.ExecResult{
		ExitCode:       int32(res.ExitCode),
		DurationMs:     float64(res.Duration.Microseconds()) / 1000,
		TimedOut:       res.TimedOut,
		Truncated:      res.Truncated,
		ShellRestarted: res.ShellRestarted,
		OomKilled:      res.OOMKilled,
	}
	out.Stdout, out.StdoutBase64 = textOf(res.Stdout)
	out.Stderr, out.StderrBase64 = textOf(res.Stderr)
	if res.Signal > 0 {
		out.Signal = signalName(res.Signal)
	}
	return out
}

// textOf returns b as text, and b itself when it is not valid UTF-8 (the
// text then has U+FFFD in place of the invalid bytes).
func textOf(b []byte) (text string, raw []byte) {
	if utf8.Valid(b) {
		return string(b), nil
	}
	return strings.ToValidUTF8(string(b), "\uFFFD"), b
}

// utf8Chunker turns a byte stream into chunks that never split a UTF-8
// character: an incomplete character at a chunk's end waits for the next.
type utf8Chunker struct{ pending []byte }

// next returns the chunk for p as text, or as raw bytes when it is not
// UTF-8.
func (u *utf8Chunker) next(p []byte) (text string, raw []byte) {
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

// flush returns what is still held back.
func (u *utf8Chunker) flush() []byte {
	b := u.pending
	u.pending = nil
	return b
}

func toProcess(in *session.ProcessInfo) *warrenv1.Process {
	out := &warrenv1.Process{
		Id: in.ID, Command: in.Command, Argv: in.Argv, Tty: in.TTY, State: "running", Pid: int32(in.Pid),
		StartedAt: timestamp(in.StartedAt), OutputBytes: in.OutputBytes, OutputStart: in.OutputStart,
	}
	if !in.Running {
		out.State = "exited"
		code := int32(in.ExitCode)
		out.ExitCode = &code
		if in.EndedAt != nil {
			out.EndedAt = timestamp(*in.EndedAt)
		}
		if in.Signal > 0 {
			out.Signal = signalName(in.Signal)
		}
	}
	return out
}

func toEntry(e *agentproto.Entry) *warrenv1.FileEntry {
	return &warrenv1.FileEntry{
		Name:   e.Name,
		Path:   e.Path,
		Type:   e.Type,
		Size:   e.Size,
		Mode:   fmt.Sprintf("%04o", e.Mode),
		Mtime:  timestamp(e.MTime),
		Target: e.Target,
	}
}

// checkPath refuses a missing path or one with a NUL byte, as REST's
// ?path= parameter does.
func checkPath(p string) error {
	if p == "" {
		return errdefs.New(errdefs.ErrInvalidArgument, "path is required")
	}
	if strings.IndexByte(p, 0) >= 0 {
		return errdefs.New(errdefs.ErrInvalidArgument, "path %q must not contain NUL", p)
	}
	return nil
}

// parseMode reads octal permission bits; "" is the default.
func parseMode(v string) (uint32, error) {
	if v == "" {
		return 0, nil
	}
	m, err := strconv.ParseUint(v, 8, 32)
	if err != nil || m > 0o7777 {
		return 0, errdefs.New(errdefs.ErrInvalidArgument, "mode %q: must be octal permission bits such as 0644", v)
	}
	return uint32(m), nil
}

func signalName(n int) string {
	names := map[int]string{1: "SIGHUP", 2: "SIGINT", 3: "SIGQUIT", 4: "SIGILL", 6: "SIGABRT", 7: "SIGBUS", 8: "SIGFPE", 9: "SIGKILL", 10: "SIGUSR1", 11: "SIGSEGV", 12: "SIGUSR2", 13: "SIGPIPE", 14: "SIGALRM", 15: "SIGTERM", 24: "SIGXCPU", 25: "SIGXFSZ", 31: "SIGSYS"}
	if s, ok := names[n]; ok {
		return s
	}
	return "signal " + strconv.Itoa(n)
}

var signalNumbers = map[string]int{"HUP": 1, "INT": 2, "QUIT": 3, "KILL": 9, "USR1": 10, "USR2": 12, "PIPE": 13, "ALRM": 14, "TERM": 15, "CONT": 18, "STOP": 19, "TSTP": 20, "WINCH": 28}

func parseSignal(v string) (int, error) {
	if n, err := strconv.Atoi(v); err == nil && n > 0 && n <= 64 {
		return n, nil
	}
	if n, ok := signalNumbers[strings.TrimPrefix(strings.ToUpper(v), "SIG")]; ok {
		return n, nil
	}
	return 0, errdefs.New(errdefs.ErrInvalidArgument, "signal %q is not a signal name or number", v)
}
