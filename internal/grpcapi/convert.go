package grpcapi

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	warrenv1 "github.com/warrenhq/warren/api/gen/warren/v1"
	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/session"
	"github.com/warrenhq/warren/internal/wire"
)

// The conversions below mirror httpapi's (toAPISession, toAPIResult,
// toAPIProcess, toAPIEntry) field for field, and take text, chunking and
// signal names from internal/wire, so that the transports say the same
// thing.

func timestamp(t time.Time) *timestamppb.Timestamp {
	if t.IsZero() {
		return nil
	}
	return timestamppb.New(t)
}

func toLimits(l *warrenv1.Limits) session.Limits {
	return session.Limits{MemoryMB: l.GetMemoryMb(), CPUs: l.GetCpus(), Pids: l.GetPids(), DiskMB: l.GetDiskMb()}
}

// toSession is wire.Session (the rules every transport shares: the user
// "root" when none is named, usage while running) in proto form.
func toSession(in *session.Info) *warrenv1.Session {
	w := wire.Session(in)
	out := &warrenv1.Session{
		Id:         w.ID,
		Image:      w.Image,
		State:      w.State,
		CreatedAt:  timestamp(w.CreatedAt),
		LastUsedAt: timestamp(w.LastUsedAt),
		ExpiresAt:  timestamp(w.ExpiresAt),
		Cwd:        w.Cwd,
		Limits:     &warrenv1.Limits{MemoryMb: w.Limits.MemoryMB, Cpus: w.Limits.CPUs, Pids: w.Limits.Pids, DiskMb: w.Limits.DiskMB},
		Network:    w.Network,
		Labels:     w.Labels,
		Reason:     w.Reason,
		User:       w.User,
		Node:       w.Node,
	}
	if u := w.Usage; u != nil {
		out.Usage = &warrenv1.Usage{MemoryBytes: u.MemoryBytes, Pids: u.Pids, CpuSeconds: u.CPUSeconds, DiskBytes: u.DiskBytes,
			NetworkInBytes: u.NetworkInBytes, NetworkOutBytes: u.NetworkOutBytes}
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
		Timeout:   wire.Millis(m.GetTimeoutMs()),
		MaxOutput: m.GetMaxOutputBytes(),
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
	out.Stdout, out.StdoutBase64 = wire.Text(res.Stdout)
	out.Stderr, out.StderrBase64 = wire.Text(res.Stderr)
	if res.Signal > 0 {
		out.Signal = wire.SignalName(res.Signal)
	}
	return out
}

// toProcess is wire.Process in proto form.
func toProcess(in *session.ProcessInfo) *warrenv1.Process {
	w := wire.Process(in)
	out := &warrenv1.Process{
		Id: w.ID, Command: w.Command, Argv: w.Argv, Tty: w.TTY, State: w.State, Pid: int32(w.Pid),
		StartedAt: timestamp(w.StartedAt), OutputBytes: w.OutputBytes, OutputStart: w.OutputStart, Signal: w.Signal,
	}
	if w.ExitCode != nil {
		code := int32(*w.ExitCode)
		out.ExitCode = &code
	}
	if w.EndedAt != nil {
		out.EndedAt = timestamp(*w.EndedAt)
	}
	return out
}

func toEntry(e *session.Entry) *warrenv1.FileEntry {
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
