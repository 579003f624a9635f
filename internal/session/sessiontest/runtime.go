// Package sessiontest has fakes of what the session manager drives — a
// runtime whose sandboxes are plain Go values, a store and an image store
// in memory — so that the manager's own logic (pool, TTLs, quotas,
// idempotent create, reaper, state machine, adoption at start) is tested in
// milliseconds without root. Fakes test the layer above them only: the
// isolation the real runtime gives is tested on the real kernel
// (internal/sandbox, internal/daemon, test/).
package sessiontest

import (
	"bytes"
	"context"
	"errors"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/session"
)

// Runtime is a session.Runtime whose sandboxes run nothing: a sandbox is a
// record that lives until it is destroyed, removed or crashed (Crash). It
// keeps its "host" between managers, so a test can detach one manager and
// let another adopt what it left.
type Runtime struct {
	// Feat is what Features reports; Dir what StateDir reports.
	Feat session.Features
	Dir  string

	mu sync.Mutex
	// StartErr, if set, is asked before each Start: an error fails it.
	StartErr func(cfg *session.SandboxConfig) error
	// ExecFunc, if set, runs every Exec instead of the default (which
	// echoes the command on stdout, and follows "cd DIR").
	ExecFunc func(ctx context.Context, sb *Sandbox, req *session.ExecRequest) (*session.ExecResult, error)
	running  map[string]*Sandbox // by name: started or adopted, not yet gone
	host     map[string]bool     // names with anything left on the host
	starts   int
	removed  []string
	nextPid  int
}

// NewRuntime returns a runtime with user namespaces and disk quotas, whose
// state lies in dir (the manager checks its free space).
func NewRuntime(dir string) *Runtime {
	return &Runtime{Feat: session.Features{DiskQuota: true, UserNS: true}, Dir: dir, running: map[string]*Sandbox{},
		host: map[string]bool{}, nextPid: 1000}
}

var _ session.Runtime = (*Runtime)(nil)

// Start implements session.Runtime.
func (r *Runtime) Start(ctx context.Context, cfg *session.SandboxConfig) (session.Sandbox, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.StartErr != nil {
		if err := r.StartErr(cfg); err != nil {
			return nil, err
		}
	}
	if r.host[cfg.Name] {
		return nil, errors.New("sandbox " + cfg.Name + " exists")
	}
	r.starts++
	r.nextPid++
	sb := &Sandbox{rt: r, name: cfg.Name, pid: r.nextPid, cfg: *cfg, done: make(chan struct{}), claimed: !cfg.Deferred,
		hostname: cfg.Hostname, env: slices.Clone(cfg.Env), cwd: cfg.BaseDir, files: map[string][]byte{}}
	r.running[cfg.Name] = sb
	r.host[cfg.Name] = true
	return sb, nil
}

// Adopt implements session.Runtime: a sandbox still running with that pid
// is handed over; anything else is ErrNotFound.
func (r *Runtime) Adopt(ctx context.Context, name string, pid int) (session.Sandbox, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	sb := r.running[name]
	if sb == nil || sb.pid != pid {
		return nil, errdefs.New(errdefs.ErrNotFound, "sandbox %s is gone", name)
	}
	sb.mu.Lock()
	detached := sb.detached
	sb.detached = false
	sb.adopted++
	sb.mu.Unlock()
	if !detached {
		return nil, errors.New("sandbox " + name + " is still held by another manager")
	}
	return sb, nil
}

// Remove implements session.Runtime.
func (r *Runtime) Remove(name string) error {
	r.mu.Lock()
	sb := r.running[name]
	delete(r.running, name)
	delete(r.host, name)
	r.removed = append(r.removed, name)
	r.mu.Unlock()
	if sb != nil {
		sb.end("sandbox was removed")
	}
	return nil
}

// Leftovers implements session.Runtime.
func (r *Runtime) Leftovers() ([]string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Sorted(maps.Keys(r.host)), nil
}

// Wait implements session.Runtime.
func (r *Runtime) Wait() {}

// Features implements session.Runtime.
func (r *Runtime) Features() session.Features { return r.Feat }

// StateDir implements session.Runtime.
func (r *Runtime) StateDir() string { return r.Dir }

// Starts is how many sandboxes were started.
func (r *Runtime) Starts() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.starts
}

// Removed are the names Remove was called with, in order.
func (r *Runtime) Removed() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.removed)
}

// Running are the names of the sandboxes that run, sorted.
func (r *Runtime) Running() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Sorted(maps.Keys(r.running))
}

// Sandbox returns the running sandbox name, or nil.
func (r *Runtime) Sandbox(name string) *Sandbox {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.running[name]
}

// AddLeftover leaves debris of a sandbox name on the "host".
func (r *Runtime) AddLeftover(name string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.host[name] = true
}

// Crash ends the sandbox name on its own, as a killed PID 1 would; its
// debris stays until it is removed.
func (r *Runtime) Crash(name, why string) {
	r.mu.Lock()
	sb := r.running[name]
	delete(r.running, name)
	r.mu.Unlock()
	if sb != nil {
		sb.end(why)
	}
}

// Sandbox is a fake sandbox. Files live in a map; processes are records.
type Sandbox struct {
	rt   *Runtime
	name string
	pid  int
	cfg  session.SandboxConfig
	done chan struct{}

	mu       sync.Mutex // guards the fields below
	exitErr  error
	claimed  bool
	hostname string
	env      []string
	cwd      string
	detached bool
	adopted  int
	execs    int
	files    map[string][]byte
	procs    []session.ProcessInfo
	ports    map[int]string // sandbox port -> host address that serves it (ServePort)
}

var _ session.Sandbox = (*Sandbox)(nil)

func (sb *Sandbox) end(why string) {
	sb.mu.Lock()
	defer sb.mu.Unlock()
	if sb.exitErr == nil {
		sb.exitErr = errors.New(why)
		close(sb.done)
	}
}

// Config is what the sandbox was started with.
func (sb *Sandbox) Config() session.SandboxConfig { return sb.cfg }

// Claimed reports whether the sandbox's shell started (it was not
// deferred, or was claimed), with the hostname and environment it has.
func (sb *Sandbox) Claimed() (ok bool, hostname string, env []string) {
	sb.mu.Lock()
	defer sb.mu.Unlock()
	return sb.claimed, sb.hostname, slices.Clone(sb.env)
}

// Adopted is how many times a manager adopted the sandbox.
func (sb *Sandbox) Adopted() int {
	sb.mu.Lock()
	defer sb.mu.Unlock()
	return sb.adopted
}

// Execs is how many commands ran.
func (sb *Sandbox) Execs() int {
	sb.mu.Lock()
	defer sb.mu.Unlock()
	return sb.execs
}

// Name implements session.Sandbox.
func (sb *Sandbox) Name() string { return sb.name }

// Pid implements session.Sandbox.
func (sb *Sandbox) Pid() int { return sb.pid }

// Done implements session.Sandbox.
func (sb *Sandbox) Done() <-chan struct{} { return sb.done }

// ExitErr implements session.Sandbox.
func (sb *Sandbox) ExitErr() error {
	sb.mu.Lock()
	defer sb.mu.Unlock()
	return sb.exitErr
}

// Usage implements session.Sandbox: the memory limit is "used".
func (sb *Sandbox) Usage() (session.Usage, error) {
	if err := sb.alive(); err != nil {
		return session.Usage{}, err
	}
	return session.Usage{MemoryBytes: uint64(sb.cfg.MemoryBytes), Pids: 1}, nil
}

// Claim implements session.Sandbox.
func (sb *Sandbox) Claim(ctx context.Context, hostname string, env []string) error {
	if err := sb.alive(); err != nil {
		return err
	}
	sb.mu.Lock()
	defer sb.mu.Unlock()
	if sb.claimed {
		return errors.New("sandbox " + sb.name + " is claimed already")
	}
	sb.claimed, sb.hostname, sb.env = true, hostname, slices.Clone(env)
	return nil
}

// Destroy implements session.Sandbox.
func (sb *Sandbox) Destroy(ctx context.Context) error {
	r := sb.rt
	r.mu.Lock()
	if r.running[sb.name] == sb {
		delete(r.running, sb.name)
	}
	delete(r.host, sb.name)
	r.mu.Unlock()
	sb.end("sandbox was deleted")
	return nil
}

// Detach implements session.Sandbox: the sandbox runs on, for Adopt.
func (sb *Sandbox) Detach() {
	sb.mu.Lock()
	defer sb.mu.Unlock()
	sb.detached = true
}

func (sb *Sandbox) alive() error {
	select {
	case <-sb.done:
		return errdefs.New(errdefs.ErrUnavailable, "the sandbox is gone: %v", sb.ExitErr())
	default:
		return nil
	}
}

// Cwd implements session.Sandbox.
func (sb *Sandbox) Cwd(ctx context.Context) (string, error) {
	if err := sb.alive(); err != nil {
		return "", err
	}
	sb.mu.Lock()
	defer sb.mu.Unlock()
	return sb.cwd, nil
}

// Exec implements session.Sandbox.
func (sb *Sandbox) Exec(ctx context.Context, req *session.ExecRequest, stream session.OutputFunc) (*session.ExecResult, error) {
	if err := sb.alive(); err != nil {
		return nil, err
	}
	sb.mu.Lock()
	sb.execs++
	sb.mu.Unlock()
	sb.rt.mu.Lock()
	f := sb.rt.ExecFunc
	sb.rt.mu.Unlock()
	if f != nil {
		return f(ctx, sb, req)
	}
	res := &session.ExecResult{Stdout: sb.run(req), Stderr: []byte{}, Duration: time.Millisecond}
	res.Cwd, _ = sb.Cwd(ctx)
	if stream != nil {
		if err := stream(session.ChanStdout, res.Stdout); err != nil {
			return nil, err
		}
		res.Stdout = nil
	}
	return res, nil
}

// run is the fake's whole shell: "cd DIR", "echo WORDS" ($NAME expanded
// from the environment), "cat FILE" (and the hostname at
// /proc/sys/kernel/hostname); anything else succeeds silently.
func (sb *Sandbox) run(req *session.ExecRequest) []byte {
	sb.mu.Lock()
	defer sb.mu.Unlock()
	words := req.Argv
	if len(words) == 0 {
		words = strings.Fields(req.Command)
		for i, w := range words {
			if name, ok := strings.CutPrefix(w, "$"); ok {
				words[i] = ""
				for _, kv := range sb.env {
					if v, ok := strings.CutPrefix(kv, name+"="); ok {
						words[i] = v
					}
				}
			}
		}
	}
	if len(words) == 0 {
		return []byte{}
	}
	switch {
	case words[0] == "cd" && len(words) == 2 && len(req.Argv) == 0:
		sb.cwd = words[1]
	case words[0] == "echo":
		return []byte(strings.Join(words[1:], " ") + "\n")
	case words[0] == "cat" && len(words) == 2 && words[1] == "/proc/sys/kernel/hostname":
		return []byte(sb.hostname + "\n")
	case words[0] == "cat" && len(words) == 2:
		return slices.Clone(sb.files[words[1]])
	}
	return []byte{}
}

func (sb *Sandbox) entry(path string) (*session.Entry, error) {
	data, ok := sb.files[path]
	if !ok {
		return nil, errdefs.New(errdefs.ErrNotFound, "%s: no such file or directory", path)
	}
	e := &session.Entry{Name: path[strings.LastIndexByte(path, '/')+1:], Path: path, Type: "file", Size: int64(len(data)), Mode: 0o644}
	if data == nil {
		e.Type, e.Mode, e.Size = "dir", 0o755, 0
	}
	return e, nil
}

// Stat implements session.Sandbox.
func (sb *Sandbox) Stat(ctx context.Context, path string) (*session.Entry, error) {
	if err := sb.alive(); err != nil {
		return nil, err
	}
	sb.mu.Lock()
	defer sb.mu.Unlock()
	return sb.entry(path)
}

// List implements session.Sandbox: the entries directly under path.
func (sb *Sandbox) List(ctx context.Context, path string) ([]session.Entry, error) {
	if err := sb.alive(); err != nil {
		return nil, err
	}
	sb.mu.Lock()
	defer sb.mu.Unlock()
	out := []session.Entry{}
	for _, p := range slices.Sorted(maps.Keys(sb.files)) {
		if rest, ok := strings.CutPrefix(p, strings.TrimSuffix(path, "/")+"/"); ok && rest != "" && !strings.Contains(rest, "/") {
			e, _ := sb.entry(p)
			out = append(out, *e)
		}
	}
	return out, nil
}

// Mkdir implements session.Sandbox.
func (sb *Sandbox) Mkdir(ctx context.Context, path string) error {
	if err := sb.alive(); err != nil {
		return err
	}
	sb.mu.Lock()
	defer sb.mu.Unlock()
	if _, ok := sb.files[path]; !ok {
		sb.files[path] = nil
	}
	return nil
}

// Remove implements session.Sandbox.
func (sb *Sandbox) Remove(ctx context.Context, path string, recursive bool) error {
	if err := sb.alive(); err != nil {
		return err
	}
	sb.mu.Lock()
	defer sb.mu.Unlock()
	if _, ok := sb.files[path]; !ok {
		return errdefs.New(errdefs.ErrNotFound, "%s: no such file or directory", path)
	}
	delete(sb.files, path)
	return nil
}

// WriteFile implements session.Sandbox.
func (sb *Sandbox) WriteFile(ctx context.Context, path string, mode uint32, max int64, r io.Reader) (int64, error) {
	if err := sb.alive(); err != nil {
		return 0, err
	}
	b, err := io.ReadAll(io.LimitReader(r, max+1))
	if err != nil {
		return 0, err
	}
	if int64(len(b)) > max {
		return 0, errdefs.New(errdefs.ErrTooLarge, "the file is larger than %d bytes", max)
	}
	sb.mu.Lock()
	defer sb.mu.Unlock()
	sb.files[path] = append([]byte{}, b...)
	return int64(len(b)), nil
}

// PutArchive implements session.Sandbox: the archive is stored as one file
// named after the directory.
func (sb *Sandbox) PutArchive(ctx context.Context, path string, max int64, r io.Reader) (int64, error) {
	return sb.WriteFile(ctx, path+"/.tar", 0, max, r)
}

type download struct{ r io.Reader }

func (d download) Read(p []byte) (int, error) { return d.r.Read(p) }
func (download) Err() error                   { return nil }
func (download) Close() error                 { return nil }

// ReadFile implements session.Sandbox.
func (sb *Sandbox) ReadFile(ctx context.Context, path string, max int64) (session.DownloadStream, []byte, error) {
	if err := sb.alive(); err != nil {
		return nil, nil, err
	}
	sb.mu.Lock()
	defer sb.mu.Unlock()
	b, ok := sb.files[path]
	if !ok || b == nil {
		return nil, nil, errdefs.New(errdefs.ErrNotFound, "%s: no such file", path)
	}
	if int64(len(b)) > max {
		return nil, nil, errdefs.New(errdefs.ErrTooLarge, "%s is larger than %d bytes", path, max)
	}
	return download{bytes.NewReader(nil)}, slices.Clone(b), nil
}

// GetArchive implements session.Sandbox: what PutArchive stored there.
func (sb *Sandbox) GetArchive(ctx context.Context, path string, max int64) (session.DownloadStream, []byte, error) {
	return sb.ReadFile(ctx, path+"/.tar", max)
}

// StartProcess implements session.Sandbox: the process is a record, and
// "exits" when killed.
func (sb *Sandbox) StartProcess(ctx context.Context, req *session.StartProcessRequest) (*session.ProcessInfo, error) {
	if err := sb.alive(); err != nil {
		return nil, err
	}
	sb.mu.Lock()
	defer sb.mu.Unlock()
	p := session.ProcessInfo{ID: "p" + string(rune('0'+len(sb.procs)%10)), Command: req.Command, Argv: req.Argv, TTY: req.TTY,
		Running: true, Pid: 100 + len(sb.procs), StartedAt: time.Now()}
	sb.procs = append(sb.procs, p)
	return &p, nil
}

// ListProcesses implements session.Sandbox.
func (sb *Sandbox) ListProcesses(ctx context.Context) ([]session.ProcessInfo, error) {
	if err := sb.alive(); err != nil {
		return nil, err
	}
	sb.mu.Lock()
	defer sb.mu.Unlock()
	return slices.Clone(sb.procs), nil
}

func (sb *Sandbox) proc(id string) (*session.ProcessInfo, error) {
	if err := sb.alive(); err != nil {
		return nil, err
	}
	for i := range sb.procs {
		if sb.procs[i].ID == id {
			return &sb.procs[i], nil
		}
	}
	return nil, errdefs.New(errdefs.ErrNotFound, "process %q not found", id)
}

// GetProcess implements session.Sandbox.
func (sb *Sandbox) GetProcess(ctx context.Context, id string) (*session.ProcessInfo, error) {
	sb.mu.Lock()
	defer sb.mu.Unlock()
	p, err := sb.proc(id)
	if err != nil {
		return nil, err
	}
	c := *p
	return &c, nil
}

// ProcessOutput implements session.Sandbox: a process has no output; an
// ended one reports its exit.
func (sb *Sandbox) ProcessOutput(ctx context.Context, id string, offset int64, follow bool, fn func(session.OutputEvent) error) (*session.ProcessInfo, error) {
	info, err := sb.GetProcess(ctx, id)
	if err != nil {
		return nil, err
	}
	if !info.Running {
		if err := fn(session.OutputEvent{Kind: "exit", ExitCode: info.ExitCode, Signal: info.Signal}); err != nil {
			return nil, err
		}
	}
	return info, nil
}

// WriteStdin implements session.Sandbox: the input is counted.
func (sb *Sandbox) WriteStdin(ctx context.Context, id string, r io.Reader, eof bool) (int64, error) {
	if _, err := sb.GetProcess(ctx, id); err != nil {
		return 0, err
	}
	return io.Copy(io.Discard, r)
}

// SignalProcess implements session.Sandbox: any signal ends the process.
func (sb *Sandbox) SignalProcess(ctx context.Context, id string, sig int) error {
	sb.mu.Lock()
	defer sb.mu.Unlock()
	p, err := sb.proc(id)
	if err != nil {
		return err
	}
	p.Running, p.Signal = false, sig
	return nil
}

// ResizeProcess implements session.Sandbox.
func (sb *Sandbox) ResizeProcess(ctx context.Context, id string, cols, rows int) error {
	sb.mu.Lock()
	defer sb.mu.Unlock()
	_, err := sb.proc(id)
	return err
}

// KillProcess implements session.Sandbox.
func (sb *Sandbox) KillProcess(ctx context.Context, id string) error {
	sb.mu.Lock()
	defer sb.mu.Unlock()
	if _, err := sb.proc(id); err != nil {
		return err
	}
	sb.procs = slices.DeleteFunc(sb.procs, func(p session.ProcessInfo) bool { return p.ID == id })
	return nil
}

// CopyLayers implements session.Sandbox: the layers it makes are empty
// directories (root/ and ov/<i>/), as a sandbox that changed nothing has.
func (sb *Sandbox) CopyLayers(ctx context.Context, dir string, overlays int) (session.LayerCopy, error) {
	if err := sb.alive(); err != nil {
		return session.LayerCopy{}, err
	}
	dirs := []string{filepath.Join(dir, "root")}
	for i := range overlays {
		dirs = append(dirs, filepath.Join(dir, "ov", strconv.Itoa(i)))
	}
	for _, d := range dirs {
		if err := os.Mkdir(d, 0o755); err != nil {
			return session.LayerCopy{}, err
		}
	}
	return session.LayerCopy{Dirs: int64(len(dirs))}, nil
}
