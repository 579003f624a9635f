package envd_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/warrenhq/warren/internal/daemon/daemontest"
	"github.com/warrenhq/warren/internal/e2b/envd"
	"github.com/warrenhq/warren/internal/e2b/envd/gen/filesystem"
	"github.com/warrenhq/warren/internal/e2b/envd/gen/filesystem/filesystemconnect"
	"github.com/warrenhq/warren/internal/e2b/envd/gen/process"
	"github.com/warrenhq/warren/internal/e2b/envd/gen/process/processconnect"
	"github.com/warrenhq/warren/internal/session"
	"github.com/warrenhq/warren/internal/testutil"
)

func TestMain(m *testing.M) {
	testutil.SandboxMain()
	os.Exit(m.Run())
}

// env is one real session served by an envd Server over loopback HTTP,
// with Connect clients speaking JSON as E2B's SDKs do.
type env struct {
	t    testing.TB
	mgr  *session.Manager
	tgt  envd.Target
	srv  *envd.Server
	url  string
	proc processconnect.ProcessClient
	fs   filesystemconnect.FilesystemClient
	// python says whether python3 is on the session's PATH (the
	// filesystem calls must work without it).
	python bool
}

func newEnv(t testing.TB, user string) *env {
	t.Helper()
	return newEnvWith(t, user, nil)
}

// newEnvWith is newEnv with the session's environment.
func newEnvWith(t testing.TB, user string, environ map[string]string) *env {
	t.Helper()
	h := daemontest.Start(t, nil)
	mgr := h.Daemon.Manager()
	ctx := context.Background()
	info, _, err := mgr.Create(ctx, "default", &session.CreateRequest{User: user, Env: environ})
	if err != nil {
		t.Fatal(err)
	}
	if user == "" {
		user = "root"
	}
	tgt := envd.Target{Tenant: "default", Session: info.ID, User: user}
	srv := envd.New(envd.Config{Manager: mgr})
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		srv.ServeHTTP(w, r.WithContext(envd.WithTarget(r.Context(), tgt)))
	}))
	t.Cleanup(ts.Close)
	t.Cleanup(func() { srv.Forget(info.Tenant, info.ID) })
	res, err := mgr.Exec(ctx, "default", info.ID, &session.ExecRequest{Command: "command -v python3"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return &env{t: t, mgr: mgr, tgt: tgt, srv: srv, url: ts.URL, python: res.ExitCode == 0,
		proc: processconnect.NewProcessClient(http.DefaultClient, ts.URL, connect.WithProtoJSON()),
		fs:   filesystemconnect.NewFilesystemClient(http.DefaultClient, ts.URL, connect.WithProtoJSON())}
}

// result is what a process stream delivered.
type result struct {
	pid            uint32
	stdout, stderr string
	pty            string
	end            *process.ProcessEvent_EndEvent
	keepalives     int
	err            error
}

// drain reads a Start or Connect stream to its end.
func drain[T interface{ GetEvent() *process.ProcessEvent }](s interface {
	Receive() bool
	Msg() T
	Err() error
}) result {
	var r result
	for s.Receive() {
		ev := s.Msg().GetEvent()
		switch e := ev.GetEvent().(type) {
		case *process.ProcessEvent_Start:
			r.pid = e.Start.GetPid()
		case *process.ProcessEvent_Data:
			r.stdout += string(e.Data.GetStdout())
			r.stderr += string(e.Data.GetStderr())
			r.pty += string(e.Data.GetPty())
		case *process.ProcessEvent_End:
			r.end = e.End
		case *process.ProcessEvent_Keepalive:
			r.keepalives++
		}
	}
	r.err = s.Err()
	return r
}

func bash(cmd string) *process.ProcessConfig {
	return &process.ProcessConfig{Cmd: "/bin/bash", Args: []string{"-l", "-c", cmd}}
}

func (e *env) run(ctx context.Context, req *process.StartRequest) result {
	e.t.Helper()
	s, err := e.proc.Start(ctx, connect.NewRequest(req))
	if err != nil {
		e.t.Fatal(err)
	}
	defer s.Close()
	return drain[*process.StartResponse](s)
}

func code(err error) connect.Code {
	var ce *connect.Error
	if errors.As(err, &ce) {
		return ce.Code()
	}
	return 0
}

// startBackground starts cmd and returns its pid once the start event came,
// leaving the stream to the caller.
func (e *env) startBackground(ctx context.Context, req *process.StartRequest) (uint32, *connect.ServerStreamForClient[process.StartResponse]) {
	e.t.Helper()
	s, err := e.proc.Start(ctx, connect.NewRequest(req))
	if err != nil {
		e.t.Fatal(err)
	}
	if !s.Receive() {
		e.t.Fatalf("no start event: %v", s.Err())
	}
	return s.Msg().GetEvent().GetStart().GetPid(), s
}

func sel(pid uint32) *process.ProcessSelector {
	return &process.ProcessSelector{Selector: &process.ProcessSelector_Pid{Pid: pid}}
}

func TestEnvd(t *testing.T) {
	testutil.RequiresRoot(t)
	e := newEnv(t, "")
	ctx := context.Background()
	goroutines := runtime.NumGoroutine()

	t.Run("StartOutputExit", func(t *testing.T) {
		envs := map[string]string{"GREETING": "hi there"}
		cfg := bash(`echo "$GREETING"; echo oops >&2; pwd; exit 3`)
		cfg.Envs, cfg.Cwd = envs, ptr("/tmp")
		r := e.run(ctx, &process.StartRequest{Process: cfg})
		if r.err != nil {
			t.Fatal(r.err)
		}
		if r.pid == 0 || r.stdout != "hi there\n/tmp\n" || r.stderr != "oops\n" {
			t.Errorf("pid %d stdout %q stderr %q", r.pid, r.stdout, r.stderr)
		}
		if r.end == nil || r.end.ExitCode != 3 || !r.end.Exited || r.end.Status != "exit status 3" || r.end.GetError() != "exit status 3" {
			t.Errorf("end %+v", r.end)
		}
		// A durable process of warren's, with its output kept.
		procs, err := e.mgr.ListProcesses(ctx, e.tgt.Tenant, e.tgt.Session)
		if err != nil || len(procs) == 0 {
			t.Fatalf("warren's process list: %v %v", procs, err)
		}
	})

	t.Run("DefaultCwdIsHome", func(t *testing.T) {
		r := e.run(ctx, &process.StartRequest{Process: bash("pwd")})
		if r.stdout != "/root\n" || r.end.GetExitCode() != 0 {
			t.Errorf("stdout %q end %+v", r.stdout, r.end)
		}
		e.exec(t, "mkdir -p /root/sub")
		cfg := bash("pwd")
		cfg.Cwd = ptr("sub")
		if r := e.run(ctx, &process.StartRequest{Process: cfg}); r.stdout != "/root/sub\n" {
			t.Errorf("a relative cwd: stdout %q end %+v", r.stdout, r.end)
		}
	})

	t.Run("StdinAndCloseStdin", func(t *testing.T) {
		pid, s := e.startBackground(ctx, &process.StartRequest{Process: bash("cat"), Stdin: ptr(true)})
		defer s.Close()
		for _, in := range []string{"one\n", "two\n"} {
			if _, err := e.proc.SendInput(ctx, connect.NewRequest(&process.SendInputRequest{Process: sel(pid),
				Input: &process.ProcessInput{Input: &process.ProcessInput_Stdin{Stdin: []byte(in)}}})); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := e.proc.CloseStdin(ctx, connect.NewRequest(&process.CloseStdinRequest{Process: sel(pid)})); err != nil {
			t.Fatal(err)
		}
		r := drain[*process.StartResponse](s)
		if r.stdout != "one\ntwo\n" || r.end.GetExitCode() != 0 {
			t.Errorf("stdout %q end %+v err %v", r.stdout, r.end, r.err)
		}
	})

	t.Run("StreamInput", func(t *testing.T) {
		pid, s := e.startBackground(ctx, &process.StartRequest{Process: bash("head -c 6"), Stdin: ptr(true)})
		defer s.Close()
		in := e.proc.StreamInput(ctx)
		in.Send(&process.StreamInputRequest{Event: &process.StreamInputRequest_Start{Start: &process.StreamInputRequest_StartEvent{Process: sel(pid)}}})
		for _, b := range []string{"abc", "def"} {
			in.Send(&process.StreamInputRequest{Event: &process.StreamInputRequest_Data{Data: &process.StreamInputRequest_DataEvent{
				Input: &process.ProcessInput{Input: &process.ProcessInput_Stdin{Stdin: []byte(b)}}}}})
		}
		if _, err := in.CloseAndReceive(); err != nil {
			t.Fatal(err)
		}
		if r := drain[*process.StartResponse](s); r.stdout != "abcdef" {
			t.Errorf("stdout %q err %v", r.stdout, r.err)
		}
	})

	t.Run("PTY", func(t *testing.T) {
		pid, s := e.startBackground(ctx, &process.StartRequest{Process: &process.ProcessConfig{Cmd: "/bin/bash", Args: []string{"-i", "-l"},
			Envs: map[string]string{"TERM": "xterm"}}, Pty: &process.PTY{Size: &process.PTY_Size{Cols: 91, Rows: 27}}})
		defer s.Close()
		if _, err := e.proc.Update(ctx, connect.NewRequest(&process.UpdateRequest{Process: sel(pid), Pty: &process.PTY{Size: &process.PTY_Size{Cols: 123, Rows: 45}}})); err != nil {
			t.Fatal(err)
		}
		if _, err := e.proc.SendInput(ctx, connect.NewRequest(&process.SendInputRequest{Process: sel(pid),
			Input: &process.ProcessInput{Input: &process.ProcessInput_Pty{Pty: []byte("stty size; exit 7\n")}}})); err != nil {
			t.Fatal(err)
		}
		r := drain[*process.StartResponse](s)
		if !strings.Contains(r.pty, "45 123") || r.stdout != "" || r.end.GetExitCode() != 7 {
			t.Errorf("pty %q stdout %q end %+v err %v", r.pty, r.stdout, r.end, r.err)
		}
		// Closing a PTY's stdin is refused: Ctrl-D is its EOF.
		pid2, s2 := e.startBackground(ctx, &process.StartRequest{Process: bash("sleep 30"), Pty: &process.PTY{Size: &process.PTY_Size{Cols: 80, Rows: 24}}})
		defer s2.Close()
		if _, err := e.proc.CloseStdin(ctx, connect.NewRequest(&process.CloseStdinRequest{Process: sel(pid2)})); code(err) != connect.CodeInvalidArgument {
			t.Errorf("CloseStdin of a PTY: %v", err)
		}
		e.proc.SendSignal(ctx, connect.NewRequest(&process.SendSignalRequest{Process: sel(pid2), Signal: process.Signal_SIGNAL_SIGKILL}))
	})

	t.Run("ConnectListTagKill", func(t *testing.T) {
		sctx, cancel := context.WithCancel(ctx)
		pid, s := e.startBackground(sctx, &process.StartRequest{Process: bash("for i in $(seq 1 300); do echo tick; sleep 0.1; done"), Tag: ptr("ticker")})
		// The client goes away: the process carries on.
		cancel()
		s.Close()
		list, err := e.proc.List(ctx, connect.NewRequest(&process.ListRequest{}))
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, p := range list.Msg.Processes {
			if p.Pid == pid {
				found = p.GetTag() == "ticker" && p.Config.GetCmd() == "/bin/bash"
			}
		}
		if !found {
			t.Errorf("pid %d with tag ticker not in %v", pid, list.Msg.Processes)
		}
		c, err := e.proc.Connect(ctx, connect.NewRequest(&process.ConnectRequest{Process: &process.ProcessSelector{Selector: &process.ProcessSelector_Tag{Tag: "ticker"}}}))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if !c.Receive() || c.Msg().GetEvent().GetStart().GetPid() != pid {
			t.Fatalf("connect: no start event with pid %d: %v", pid, c.Err())
		}
		if !c.Receive() || !strings.Contains(string(c.Msg().GetEvent().GetData().GetStdout()), "tick") {
			t.Fatalf("connect: no output: %v", c.Err())
		}
		if _, err := e.proc.SendSignal(ctx, connect.NewRequest(&process.SendSignalRequest{Process: sel(pid), Signal: process.Signal_SIGNAL_SIGKILL})); err != nil {
			t.Fatal(err)
		}
		r := drain[*process.ConnectResponse](c)
		if r.end == nil || r.end.Exited || r.end.ExitCode != -1 || r.end.Status != "signal: killed" {
			t.Errorf("end after SIGKILL %+v err %v", r.end, r.err)
		}
		// An ended process is gone, as in E2B: not_found, which the SDK's
		// kill reads as false.
		_, err = e.proc.SendSignal(ctx, connect.NewRequest(&process.SendSignalRequest{Process: sel(pid), Signal: process.Signal_SIGNAL_SIGKILL}))
		if code(err) != connect.CodeNotFound {
			t.Errorf("signal to an ended process: %v", err)
		}
	})

	t.Run("Timeout", func(t *testing.T) {
		tctx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		start := time.Now()
		r := e.run(tctx, &process.StartRequest{Process: bash("sleep 20")})
		if code(r.err) != connect.CodeDeadlineExceeded || time.Since(start) > 5*time.Second {
			t.Errorf("err %v after %v", r.err, time.Since(start))
		}
		if r.pid == 0 {
			t.Fatal("no start event")
		}
		// The command was killed with its timeout.
		waitFor(t, func() bool {
			list, err := e.proc.List(ctx, connect.NewRequest(&process.ListRequest{}))
			if err != nil {
				return false
			}
			for _, p := range list.Msg.Processes {
				if p.Pid == r.pid {
					return false
				}
			}
			return true
		})
	})

	t.Run("KeepAlive", func(t *testing.T) {
		req := connect.NewRequest(&process.StartRequest{Process: bash("sleep 2.5; echo done")})
		req.Header().Set("Keepalive-Ping-Interval", "1")
		s, err := e.proc.Start(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		r := drain[*process.StartResponse](s)
		if r.keepalives < 1 || r.stdout != "done\n" {
			t.Errorf("keepalives %d stdout %q err %v", r.keepalives, r.stdout, r.err)
		}
	})

	t.Run("BadInput", func(t *testing.T) {
		for name, err := range map[string]error{
			"no cmd": func() error {
				s, err := e.proc.Start(ctx, connect.NewRequest(&process.StartRequest{}))
				if err == nil {
					err = drain[*process.StartResponse](s).err
				}
				return err
			}(),
			"unknown pid connect": func() error {
				s, err := e.proc.Connect(ctx, connect.NewRequest(&process.ConnectRequest{Process: sel(999999)}))
				if err == nil {
					for s.Receive() {
					}
					err = s.Err()
				}
				return err
			}(),
			"unknown pid input": func() error {
				_, err := e.proc.SendInput(ctx, connect.NewRequest(&process.SendInputRequest{Process: sel(999999),
					Input: &process.ProcessInput{Input: &process.ProcessInput_Stdin{Stdin: []byte("x")}}}))
				return err
			}(),
			"bad signal": func() error {
				_, err := e.proc.SendSignal(ctx, connect.NewRequest(&process.SendSignalRequest{Process: sel(1), Signal: 3}))
				return err
			}(),
			"no selector": func() error {
				_, err := e.proc.CloseStdin(ctx, connect.NewRequest(&process.CloseStdinRequest{}))
				return err
			}(),
			"missing cwd": func() error {
				cfg := bash("true")
				cfg.Cwd = ptr("/no/such/dir")
				s, err := e.proc.Start(ctx, connect.NewRequest(&process.StartRequest{Process: cfg}))
				if err == nil {
					err = drain[*process.StartResponse](s).err
				}
				return err
			}(),
			"bad user": func() error {
				req := connect.NewRequest(&process.StartRequest{Process: bash("true")})
				req.Header().Set("Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte("-rf:")))
				s, err := e.proc.Start(ctx, req)
				if err == nil {
					err = drain[*process.StartResponse](s).err
				}
				return err
			}(),
		} {
			c := code(err)
			want := map[string]connect.Code{"no cmd": connect.CodeInvalidArgument, "unknown pid connect": connect.CodeNotFound,
				"unknown pid input": connect.CodeNotFound, "bad signal": connect.CodeInvalidArgument,
				"no selector": connect.CodeInvalidArgument, "bad user": connect.CodeUnauthenticated,
				"missing cwd": connect.CodeInvalidArgument}[name]
			if c != want {
				t.Errorf("%s: %v, want %v", name, err, want)
			}
		}
	})

	t.Run("Filesystem", func(t *testing.T) {
		if _, err := e.fs.MakeDir(ctx, connect.NewRequest(&filesystem.MakeDirRequest{Path: "work/a/b"})); err != nil {
			t.Fatal(err)
		}
		if _, err := e.fs.MakeDir(ctx, connect.NewRequest(&filesystem.MakeDirRequest{Path: "/root/work/a/b"})); code(err) != connect.CodeAlreadyExists {
			t.Errorf("MakeDir of an existing directory: %v", err)
		}
		e.upload(t, "/root/work/a/f.txt", "hello", nil)
		st, err := e.fs.Stat(ctx, connect.NewRequest(&filesystem.StatRequest{Path: "work/a/f.txt"}))
		if err != nil {
			t.Fatal(err)
		}
		ent := st.Msg.Entry
		if ent.Name != "f.txt" || ent.Path != "/root/work/a/f.txt" || ent.Type != filesystem.FileType_FILE_TYPE_FILE || ent.Size != 5 ||
			ent.Mode != 0o644 || ent.Permissions != "-rw-r--r--" || ent.Owner != "root" || ent.Group != "root" ||
			time.Since(ent.ModifiedTime.AsTime()) > time.Minute {
			t.Errorf("stat %+v", ent)
		}
		e.exec(t, "ln -s /root/work/a/f.txt /root/work/link")
		st, err = e.fs.Stat(ctx, connect.NewRequest(&filesystem.StatRequest{Path: "/root/work/link"}))
		if err != nil || st.Msg.Entry.Type != filesystem.FileType_FILE_TYPE_SYMLINK || st.Msg.Entry.GetSymlinkTarget() != "/root/work/a/f.txt" {
			t.Errorf("stat of a symlink: %v %v", st, err)
		}
		ls, err := e.fs.ListDir(ctx, connect.NewRequest(&filesystem.ListDirRequest{Path: "/root/work", Depth: 1}))
		if err != nil || names(ls.Msg.Entries) != "/root/work/a /root/work/link" {
			t.Errorf("ListDir depth 1: %v %v", names(ls.Msg.GetEntries()), err)
		}
		ls, err = e.fs.ListDir(ctx, connect.NewRequest(&filesystem.ListDirRequest{Path: "/root/work", Depth: 3}))
		if err != nil || names(ls.Msg.Entries) != "/root/work/a /root/work/a/b /root/work/a/f.txt /root/work/link" {
			t.Errorf("ListDir depth 3: %v %v", names(ls.Msg.GetEntries()), err)
		}
		mv, err := e.fs.Move(ctx, connect.NewRequest(&filesystem.MoveRequest{Source: "/root/work/a/f.txt", Destination: "/root/work/g.txt"}))
		if err != nil || mv.Msg.Entry.Path != "/root/work/g.txt" {
			t.Errorf("Move: %v %v", mv, err)
		}
		if _, err := e.fs.Remove(ctx, connect.NewRequest(&filesystem.RemoveRequest{Path: "/root/work/a"})); err != nil {
			t.Fatal(err)
		}
		for name, err := range map[string]error{
			"stat missing": errOf(e.fs.Stat(ctx, connect.NewRequest(&filesystem.StatRequest{Path: "/root/work/a"}))),
			"move missing": errOf(e.fs.Move(ctx, connect.NewRequest(&filesystem.MoveRequest{Source: "/nope", Destination: "/nope2"}))),
			"list missing": errOf(e.fs.ListDir(ctx, connect.NewRequest(&filesystem.ListDirRequest{Path: "/nope"}))),
		} {
			if code(err) != connect.CodeNotFound {
				t.Errorf("%s: %v", name, err)
			}
		}
		// Removing what is not there succeeds, as in E2B's envd.
		if _, err := e.fs.Remove(ctx, connect.NewRequest(&filesystem.RemoveRequest{Path: "/nope"})); err != nil {
			t.Errorf("remove of a missing file: %v", err)
		}
		for name, err := range map[string]error{
			"list a file":  errOf(e.fs.ListDir(ctx, connect.NewRequest(&filesystem.ListDirRequest{Path: "/root/work/g.txt"}))),
			"mkdir empty":  errOf(e.fs.MakeDir(ctx, connect.NewRequest(&filesystem.MakeDirRequest{}))),
			"move empty":   errOf(e.fs.Move(ctx, connect.NewRequest(&filesystem.MoveRequest{}))),
			"watch a file": errOf(e.fs.CreateWatcher(ctx, connect.NewRequest(&filesystem.CreateWatcherRequest{Path: "/root/work/g.txt"}))),
		} {
			if code(err) != connect.CodeInvalidArgument {
				t.Errorf("%s: %v", name, err)
			}
		}
	})

	t.Run("WatchDir", func(t *testing.T) {
		e.exec(t, "mkdir -p /root/w/nested")
		wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		s, err := e.fs.WatchDir(wctx, connect.NewRequest(&filesystem.WatchDirRequest{Path: "/root/w", Recursive: true, IncludeEntry: true}))
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		if !s.Receive() || s.Msg().GetStart() == nil {
			t.Fatalf("no start event: %v", s.Err())
		}
		var got []string
		// expect reads events until it has n more.
		expect := func(n int) {
			for want := len(got) + n; len(got) < want && s.Receive(); {
				ev := s.Msg().GetFilesystem()
				if ev == nil {
					continue
				}
				got = append(got, strings.ToLower(strings.TrimPrefix(ev.Type.String(), "EVENT_TYPE_"))+" "+ev.Name)
				if ev.Name == "nested/x.txt" && ev.Type == filesystem.EventType_EVENT_TYPE_WRITE && ev.Entry.GetPath() != "/root/w/nested/x.txt" {
					t.Errorf("write event without its entry: %+v", ev)
				}
			}
		}
		e.upload(t, "/root/w/nested/x.txt", "1", nil)
		e.upload(t, "/root/w/nested/x.txt", "2", nil)
		expect(3)
		// A directory made while watching is watched too.
		e.exec(t, "mkdir /root/w/newdir")
		expect(1)
		e.exec(t, "echo hi > /root/w/newdir/y && rm /root/w/nested/x.txt")
		expect(3)
		want := []string{"create nested/x.txt", "write nested/x.txt", "write nested/x.txt", "create newdir", "create newdir/y", "write newdir/y", "remove nested/x.txt"}
		if strings.Join(got, ",") != strings.Join(want, ",") {
			t.Errorf("events %q, want %q (stream: %v)", got, want, s.Err())
		}
		_, err = e.fs.WatchDir(ctx, connect.NewRequest(&filesystem.WatchDirRequest{Path: "/root/nope"}))
		if err == nil {
			st, _ := e.fs.WatchDir(ctx, connect.NewRequest(&filesystem.WatchDirRequest{Path: "/root/nope"}))
			st.Receive()
			err = st.Err()
		}
		if code(err) != connect.CodeNotFound {
			t.Errorf("watch of a missing directory: %v", err)
		}
	})

	t.Run("PollingWatcher", func(t *testing.T) {
		e.exec(t, "mkdir -p /root/pw")
		cw, err := e.fs.CreateWatcher(ctx, connect.NewRequest(&filesystem.CreateWatcherRequest{Path: "/root/pw"}))
		if err != nil {
			t.Fatal(err)
		}
		id := cw.Msg.WatcherId
		e.exec(t, "echo x > /root/pw/a && chmod 600 /root/pw/a && mv /root/pw/a /root/pw/b")
		var got []string
		waitFor(t, func() bool {
			evs, err := e.fs.GetWatcherEvents(ctx, connect.NewRequest(&filesystem.GetWatcherEventsRequest{WatcherId: id}))
			if err != nil {
				t.Fatal(err)
			}
			for _, ev := range evs.Msg.Events {
				got = append(got, strings.ToLower(strings.TrimPrefix(ev.Type.String(), "EVENT_TYPE_"))+" "+ev.Name)
			}
			return len(got) >= 5
		})
		if strings.Join(got, ",") != "create a,write a,chmod a,rename a,create b" {
			t.Errorf("events %q", got)
		}
		// A watcher whose directory goes away says so once drained.
		e.exec(t, "mkdir -p /root/pw2")
		cw2, err := e.fs.CreateWatcher(ctx, connect.NewRequest(&filesystem.CreateWatcherRequest{Path: "/root/pw2"}))
		if err != nil {
			t.Fatal(err)
		}
		e.exec(t, "rmdir /root/pw2")
		waitFor(t, func() bool {
			_, err := e.fs.GetWatcherEvents(ctx, connect.NewRequest(&filesystem.GetWatcherEventsRequest{WatcherId: cw2.Msg.WatcherId}))
			return code(err) == connect.CodeNotFound
		})
		e.fs.RemoveWatcher(ctx, connect.NewRequest(&filesystem.RemoveWatcherRequest{WatcherId: cw2.Msg.WatcherId}))
		if _, err := e.fs.RemoveWatcher(ctx, connect.NewRequest(&filesystem.RemoveWatcherRequest{WatcherId: id})); err != nil {
			t.Fatal(err)
		}
		if _, err := e.fs.GetWatcherEvents(ctx, connect.NewRequest(&filesystem.GetWatcherEventsRequest{WatcherId: id})); code(err) != connect.CodeNotFound {
			t.Errorf("events of a removed watcher: %v", err)
		}
		// Removed watchers and ended WatchDir streams leave no watch
		// running in the agent: more come and go than it runs at once.
		for i := range 80 {
			var id string
			waitFor(t, func() bool {
				cw, err := e.fs.CreateWatcher(ctx, connect.NewRequest(&filesystem.CreateWatcherRequest{Path: "/root/pw"}))
				if err != nil {
					if code(err) != connect.CodeResourceExhausted {
						t.Fatalf("watcher %d: %v", i, err)
					}
					return false
				}
				id = cw.Msg.WatcherId
				return true
			})
			e.fs.RemoveWatcher(ctx, connect.NewRequest(&filesystem.RemoveWatcherRequest{WatcherId: id}))
		}
	})

	t.Run("Files", func(t *testing.T) {
		// Multipart, two files, parents created, metadata on both.
		var body bytes.Buffer
		mw := multipart.NewWriter(&body)
		for name, content := range map[string]string{"/root/up/one.txt": "first", "up/deep/two.txt": "second"} {
			w, _ := mw.CreateFormFile("file", name)
			w.Write([]byte(content))
		}
		mw.Close()
		req, _ := http.NewRequest("POST", e.url+"/files", &body)
		req.Header.Set("Content-Type", mw.FormDataContentType())
		req.Header.Set("X-Metadata-Owner-Team", "Blue")
		var written []map[string]any
		status := e.do(t, req, &written)
		if status != 200 || len(written) != 2 {
			t.Fatalf("multipart upload: %d %v", status, written)
		}
		st, err := e.fs.Stat(ctx, connect.NewRequest(&filesystem.StatRequest{Path: "/root/up/deep/two.txt"}))
		if err != nil || st.Msg.Entry.Metadata["owner-team"] != "Blue" || st.Msg.Entry.Size != 6 {
			t.Errorf("stat after upload: %v %v", st, err)
		}
		// Overwriting without metadata clears it.
		e.upload(t, "/root/up/deep/two.txt", "third", nil)
		if st, _ := e.fs.Stat(ctx, connect.NewRequest(&filesystem.StatRequest{Path: "/root/up/deep/two.txt"})); len(st.Msg.Entry.Metadata) != 0 {
			t.Errorf("metadata after an overwrite without: %v", st.Msg.Entry.Metadata)
		}
		// Octet-stream, gzip-compressed.
		var gz bytes.Buffer
		zw := gzip.NewWriter(&gz)
		zw.Write([]byte("zipped content"))
		zw.Close()
		req, _ = http.NewRequest("POST", e.url+"/files?path=zipped.txt", &gz)
		req.Header.Set("Content-Type", "application/octet-stream")
		req.Header.Set("Content-Encoding", "gzip")
		if status := e.do(t, req, &written); status != 200 || written[0]["path"] != "/root/zipped.txt" {
			t.Fatalf("octet-stream upload: %d %v", status, written)
		}
		// Download, plain then gzip.
		if got := e.download(t, "zipped.txt", false); got != "zipped content" {
			t.Errorf("download %q", got)
		}
		if got := e.download(t, "/root/zipped.txt", true); got != "zipped content" {
			t.Errorf("gzip download %q", got)
		}
		// An empty file has Content-Length 0.
		e.upload(t, "/root/empty", "", nil)
		// (A client that asks for none: Go's transport asks for gzip.)
		req, _ = http.NewRequest("GET", e.url+"/files?path=/root/empty", nil)
		req.Header.Set("Accept-Encoding", "identity")
		resp, err := http.DefaultClient.Do(req)
		if err != nil || resp.StatusCode != 200 || resp.Header.Get("Content-Length") != "0" {
			t.Errorf("empty file: %v %v", resp, err)
		}
		resp.Body.Close()
		// Errors in envd's shape.
		for _, c := range []struct {
			method, path, ctype string
			hdr                 map[string]string
			status              int
		}{
			{"GET", "/files?path=/root/missing", "", nil, 404},
			{"GET", "/files?path=/root", "", nil, 400},
			{"GET", "/files", "", nil, 400},
			{"POST", "/files?path=/root/x", "text/plain", nil, 400},
			{"POST", "/files", "application/octet-stream", nil, 400},
			{"POST", "/files?path=/root/x", "application/octet-stream", map[string]string{"X-Metadata-K": "caf\u00e9"}, 400},
			{"POST", "/files?path=/root/x", "application/octet-stream", map[string]string{"Content-Encoding": "br"}, 400},
			{"POST", "/files?path=/root/x", "application/octet-stream", map[string]string{"Content-Encoding": "gzip"}, 400},
			{"POST", "/files?path=/root", "application/octet-stream", nil, 400},
			{"GET", "/files?path=x&username=-u", "", nil, 401},
			{"GET", "/files?path=x&username=nosuchuser", "", nil, 401},
			{"DELETE", "/files", "", nil, 404},
		} {
			req, _ := http.NewRequest(c.method, e.url+c.path, strings.NewReader("data"))
			if c.ctype != "" {
				req.Header.Set("Content-Type", c.ctype)
			}
			for k, v := range c.hdr {
				req.Header.Set(k, v)
			}
			var envErr struct {
				Code    int    `json:"code"`
				Message string `json:"message"`
			}
			if got := e.do(t, req, &envErr); got != c.status || envErr.Code != c.status || envErr.Message == "" {
				t.Errorf("%s %s: %d %+v, want %d", c.method, c.path, got, envErr, c.status)
			}
		}
	})

	t.Run("Health", func(t *testing.T) {
		resp, err := http.Get(e.url + "/health")
		if err != nil || resp.StatusCode != 204 {
			t.Fatalf("health: %v %v", resp, err)
		}
		resp.Body.Close()
	})

	// Last: the session goes away under a running stream.
	t.Run("SessionGone", func(t *testing.T) {
		_, s := e.startBackground(ctx, &process.StartRequest{Process: bash("sleep 60")})
		defer s.Close()
		if err := e.mgr.Delete(ctx, e.tgt.Tenant, e.tgt.Session); err != nil {
			t.Fatal(err)
		}
		// The stream is cut (as a dead sandbox's connection is), which
		// the SDK tells apart from an error of the process.
		r := drain[*process.StartResponse](s)
		if r.err == nil || code(r.err) == connect.CodeNotFound || r.end != nil {
			t.Errorf("a stream outlived its session: %+v", r)
		}
		resp, err := http.Get(e.url + "/health")
		if err != nil || resp.StatusCode != 502 {
			t.Fatalf("health of a deleted session: %v %v", resp, err)
		}
		resp.Body.Close()
		_, err = e.proc.List(ctx, connect.NewRequest(&process.ListRequest{}))
		if code(err) != connect.CodeUnavailable {
			t.Errorf("List in a deleted session: %v", err)
		}
		_, err = e.fs.Stat(ctx, connect.NewRequest(&filesystem.StatRequest{Path: "/"}))
		if code(err) != connect.CodeUnavailable {
			t.Errorf("Stat in a deleted session: %v", err)
		}
	})

	http.DefaultClient.CloseIdleConnections()
	waitFor(t, func() bool { return runtime.NumGoroutine() <= goroutines+2 })
}

func ptr[T any](v T) *T { return &v }

func errOf[T any](_ T, err error) error { return err }

func names(es []*filesystem.EntryInfo) string {
	var out []string
	for _, e := range es {
		out = append(out, e.Path)
	}
	return strings.Join(out, " ")
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met in 10s")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// exec runs a shell command in the session through warren's own API.
func (e *env) exec(t *testing.T, cmd string) {
	t.Helper()
	res, err := e.mgr.Exec(context.Background(), e.tgt.Tenant, e.tgt.Session, &session.ExecRequest{Command: cmd}, nil)
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("%s: %v %+v", cmd, err, res)
	}
}

func (e *env) do(t *testing.T, req *http.Request, out any) int {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if out != nil {
		json.Unmarshal(b, out)
	}
	return resp.StatusCode
}

func (e *env) upload(t *testing.T, path, content string, hdr map[string]string) {
	t.Helper()
	req, _ := http.NewRequest("POST", e.url+"/files?path="+path, strings.NewReader(content))
	req.Header.Set("Content-Type", "application/octet-stream")
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	if status := e.do(t, req, nil); status != 200 {
		t.Fatalf("upload %s: %d", path, status)
	}
}

func (e *env) download(t *testing.T, path string, gz bool) string {
	t.Helper()
	req, _ := http.NewRequest("GET", e.url+"/files?path="+path, nil)
	tr := &http.Transport{DisableCompression: true}
	defer tr.CloseIdleConnections()
	if gz {
		req.Header.Set("Accept-Encoding", "gzip")
	}
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var r io.Reader = resp.Body
	if gz {
		if resp.Header.Get("Content-Encoding") != "gzip" {
			t.Fatalf("no gzip: %v", resp.Header)
		}
		zr, err := gzip.NewReader(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		r = zr
	}
	b, _ := io.ReadAll(r)
	return string(b)
}

// TestOtherUser: a session of a user other than root (the base image's
// "sandbox"), as E2B's base template runs as "user": commands and relative
// paths are the user's; a command as root runs as root of the sandbox (the
// agent starts it so, with root's HOME), and root's file calls go through
// warren's agent.
func TestOtherUser(t *testing.T) {
	testutil.RequiresRoot(t)
	e := newEnv(t, "sandbox")
	ctx := context.Background()
	r := e.run(ctx, &process.StartRequest{Process: bash("id -un; pwd")})
	if r.stdout != "sandbox\n/home/sandbox\n" {
		t.Errorf("stdout %q end %+v", r.stdout, r.end)
	}
	e.upload(t, "rel.txt", "mine", nil)
	st, err := e.fs.Stat(ctx, connect.NewRequest(&filesystem.StatRequest{Path: "rel.txt"}))
	if err != nil || st.Msg.Entry.Path != "/home/sandbox/rel.txt" || st.Msg.Entry.Owner != "sandbox" || st.Msg.Entry.Group != "sandbox" {
		t.Errorf("stat: %v %v", st, err)
	}
	// The filesystem calls run as the session's user: what they create is
	// theirs, and the kernel's permission checks are theirs (the agent,
	// root of the sandbox, could create in /etc).
	md, err := e.fs.MakeDir(ctx, connect.NewRequest(&filesystem.MakeDirRequest{Path: "made/deep"}))
	if err != nil || md.Msg.Entry.Owner != "sandbox" || md.Msg.Entry.Path != "/home/sandbox/made/deep" {
		t.Errorf("MakeDir as the session's user: %v %v", md, err)
	}
	for name, err := range map[string]error{
		"mkdir in /etc":      errOf(e.fs.MakeDir(ctx, connect.NewRequest(&filesystem.MakeDirRequest{Path: "/etc/not-mine"}))),
		"move into /etc":     errOf(e.fs.Move(ctx, connect.NewRequest(&filesystem.MoveRequest{Source: "rel.txt", Destination: "/etc/rel.txt"}))),
		"remove /etc/passwd": errOf(e.fs.Remove(ctx, connect.NewRequest(&filesystem.RemoveRequest{Path: "/etc/passwd"}))),
		"list /root":         errOf(e.fs.ListDir(ctx, connect.NewRequest(&filesystem.ListDirRequest{Path: "/root"}))),
	} {
		if code(err) != connect.CodePermissionDenied {
			t.Errorf("%s as the session's user: %v, want permission_denied", name, err)
		}
	}
	req := connect.NewRequest(&process.StartRequest{Process: bash("id -un; echo $HOME; pwd; touch /etc/by-root && stat -c %U /etc/by-root")})
	req.Header().Set("Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte("root:")))
	s, err := e.proc.Start(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if r := drain[*process.StartResponse](s); r.stdout != "root\n/root\n/root\nroot\n" || r.end.GetExitCode() != 0 {
		t.Errorf("a command as root from a user's session: %+v (%v)", r, r.err)
	}
	// The session's own user is still who runs the next command.
	if r := e.run(ctx, &process.StartRequest{Process: bash("id -un")}); r.stdout != "sandbox\n" {
		t.Errorf("after a root command: %q", r.stdout)
	}
	// Files as root: relative to root's home, through the agent.
	var written []map[string]any
	up, _ := http.NewRequest("POST", e.url+"/files?path=hello.txt&username=root", strings.NewReader("hello"))
	up.Header.Set("Content-Type", "application/octet-stream")
	if status := e.do(t, up, &written); status != 200 || len(written) != 1 || written[0]["path"] != "/root/hello.txt" {
		t.Fatalf("upload as root: %d %v", status, written)
	}
	if got := e.download(t, "hello.txt&username=root", false); got != "hello" {
		t.Errorf("download as root: %q", got)
	}
}

// TestFilesystemWithoutPython: the filesystem calls are the agent's, so an
// image without python3 (node, distroless) lists, stats, creates, moves,
// removes, tags and watches files.
func TestFilesystemWithoutPython(t *testing.T) {
	testutil.RequiresRoot(t)
	// No python3 on the session's PATH: to what runs in it, the image has
	// none (the test's image is the host's, which cannot be changed).
	e := newEnvWith(t, "", map[string]string{"PATH": "/no-python"})
	if e.python {
		t.Fatal("python3 is still found")
	}
	ctx := context.Background()
	if _, err := e.fs.MakeDir(ctx, connect.NewRequest(&filesystem.MakeDirRequest{Path: "np/sub"})); err != nil {
		t.Fatal(err)
	}
	e.upload(t, "/root/np/sub/f.txt", "data", map[string]string{"X-Metadata-Color": "blue"})
	st, err := e.fs.Stat(ctx, connect.NewRequest(&filesystem.StatRequest{Path: "np/sub/f.txt"}))
	if err != nil || st.Msg.Entry.Size != 4 || st.Msg.Entry.Owner != "root" || st.Msg.Entry.Metadata["color"] != "blue" {
		t.Fatalf("stat: %v %v", st, err)
	}
	ls, err := e.fs.ListDir(ctx, connect.NewRequest(&filesystem.ListDirRequest{Path: "np", Depth: 2}))
	if err != nil || names(ls.Msg.Entries) != "/root/np/sub /root/np/sub/f.txt" {
		t.Errorf("ListDir: %v %v", names(ls.Msg.GetEntries()), err)
	}
	mv, err := e.fs.Move(ctx, connect.NewRequest(&filesystem.MoveRequest{Source: "np/sub/f.txt", Destination: "np/other/g.txt"}))
	if err != nil || mv.Msg.Entry.Path != "/root/np/other/g.txt" || mv.Msg.Entry.Metadata["color"] != "blue" {
		t.Errorf("Move: %v %v", mv, err)
	}
	if _, err := e.fs.Remove(ctx, connect.NewRequest(&filesystem.RemoveRequest{Path: "np"})); err != nil {
		t.Fatal(err)
	}
	if _, err := e.fs.Stat(ctx, connect.NewRequest(&filesystem.StatRequest{Path: "np"})); code(err) != connect.CodeNotFound {
		t.Errorf("stat after remove: %v", err)
	}
	// (mkdir is not on this PATH either; echo is bash's own.)
	if _, err := e.fs.MakeDir(ctx, connect.NewRequest(&filesystem.MakeDirRequest{Path: "/root/npw"})); err != nil {
		t.Fatal(err)
	}
	cw, err := e.fs.CreateWatcher(ctx, connect.NewRequest(&filesystem.CreateWatcherRequest{Path: "/root/npw"}))
	if err != nil {
		t.Fatalf("a watch without python3: %v", err)
	}
	e.exec(t, "echo x > /root/npw/f")
	var got []string
	waitFor(t, func() bool {
		evs, err := e.fs.GetWatcherEvents(ctx, connect.NewRequest(&filesystem.GetWatcherEventsRequest{WatcherId: cw.Msg.WatcherId}))
		if err != nil {
			t.Fatal(err)
		}
		for _, ev := range evs.Msg.Events {
			got = append(got, strings.ToLower(strings.TrimPrefix(ev.Type.String(), "EVENT_TYPE_"))+" "+ev.Name)
		}
		return slices.Contains(got, "create f") && slices.Contains(got, "write f")
	})
}

// BenchmarkEnvd measures the round trips E2B's SDK makes most: a command
// (Start to its end event), a Stat, a ListDir of /etc, a MakeDir and a
// small upload.
func BenchmarkEnvd(b *testing.B) {
	testutil.RequiresRoot(b)
	e := newEnv(b, "")
	ctx := context.Background()
	b.Run("RunEcho", func(b *testing.B) {
		for b.Loop() {
			s, err := e.proc.Start(ctx, connect.NewRequest(&process.StartRequest{Process: bash("echo hi")}))
			if err != nil {
				b.Fatal(err)
			}
			if r := drain[*process.StartResponse](s); r.stdout != "hi\n" {
				b.Fatalf("%+v", r)
			}
		}
	})
	b.Run("Stat", func(b *testing.B) {
		for b.Loop() {
			if _, err := e.fs.Stat(ctx, connect.NewRequest(&filesystem.StatRequest{Path: "/etc/passwd"})); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("ListDir", func(b *testing.B) {
		for b.Loop() {
			if _, err := e.fs.ListDir(ctx, connect.NewRequest(&filesystem.ListDirRequest{Path: "/etc", Depth: 1})); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("MakeDir", func(b *testing.B) {
		i := 0
		for b.Loop() {
			i++
			if _, err := e.fs.MakeDir(ctx, connect.NewRequest(&filesystem.MakeDirRequest{Path: fmt.Sprintf("/tmp/bench/d%d", i)})); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("Upload", func(b *testing.B) {
		for b.Loop() {
			req, _ := http.NewRequest("POST", e.url+"/files?path=/tmp/bench.txt", strings.NewReader("hello"))
			req.Header.Set("Content-Type", "application/octet-stream")
			resp, err := http.DefaultClient.Do(req)
			if err != nil || resp.StatusCode != 200 {
				b.Fatal(resp, err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	})
}

// Session ids are unique per tenant only: two tenants' sessions of one id,
// served by one Server, never share E2B pids, tags or processes.
func TestTenantsApart(t *testing.T) {
	testutil.RequiresRoot(t)
	h := daemontest.Start(t, nil)
	mgr := h.Daemon.Manager()
	ctx := context.Background()
	srv := envd.New(envd.Config{Manager: mgr})
	clients := map[string]processconnect.ProcessClient{}
	for _, tenant := range []string{"default", "other"} {
		if _, _, err := mgr.Create(ctx, tenant, &session.CreateRequest{ID: "same"}); err != nil {
			t.Fatalf("create in %s: %v", tenant, err)
		}
		tgt := envd.Target{Tenant: tenant, Session: "same", User: "root"}
		ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			srv.ServeHTTP(w, r.WithContext(envd.WithTarget(r.Context(), tgt)))
		}))
		t.Cleanup(ts.Close)
		t.Cleanup(func() { srv.Forget(tenant, "same") })
		clients[tenant] = processconnect.NewProcessClient(http.DefaultClient, ts.URL, connect.WithProtoJSON())
	}
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	s, err := clients["default"].Start(sctx, connect.NewRequest(&process.StartRequest{Process: bash("sleep 30"), Tag: ptr("mine")}))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if !s.Receive() {
		t.Fatalf("no start event: %v", s.Err())
	}
	list, err := clients["other"].List(ctx, connect.NewRequest(&process.ListRequest{}))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range list.Msg.Processes {
		if p.GetTag() == "mine" {
			t.Errorf("tenant other lists tenant default's process %v", p)
		}
	}
	c, err := clients["other"].Connect(ctx, connect.NewRequest(&process.ConnectRequest{Process: &process.ProcessSelector{Selector: &process.ProcessSelector_Tag{Tag: "mine"}}}))
	if err == nil {
		defer c.Close()
		for c.Receive() {
			t.Fatalf("tenant other reads tenant default's process: %v", c.Msg())
		}
		err = c.Err()
	}
	if code(err) != connect.CodeNotFound {
		t.Errorf("tenant other connects to tenant default's tag: %v", err)
	}
}
