package envd

import (
	"context"
	"crypto/rand"
	_ "embed"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"path"
	"strings"
	"sync"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/warrenhq/warren/internal/e2b/envd/gen/filesystem"
	"github.com/warrenhq/warren/internal/session"
)

// maxWatcherEvents bounds the events a polling watcher holds between two
// GetWatcherEvents; past it the oldest are dropped.
const maxWatcherEvents = 10000

// fs runs one filesystem call in the sandbox, through warren's agent: as
// user where the session can switch users (a root session), else as the
// session's own user. Paths are absolute.
func (s *Server) fs(ctx context.Context, t Target, user string, req *session.FSRequest) (*session.FSReply, error) {
	if user != defaultUser(t) && canSwitch(t, user) {
		req.User = user
	}
	rep, err := s.mgr.FS(ctx, t.Tenant, t.Session, req)
	if err != nil {
		return nil, s.rpcErr(ctx, t, err)
	}
	return rep, nil
}

// home returns user's home directory in the sandbox (from its
// /etc/passwd), cached per session. A user the sandbox does not know is
// unauthenticated, as in E2B's envd.
func (s *Server) home(ctx context.Context, t Target, user string) (string, error) {
	st := s.state(t)
	st.mu.Lock()
	h := st.homes[user]
	st.mu.Unlock()
	if h != "" {
		return h, nil
	}
	rep, err := s.mgr.FS(ctx, t.Tenant, t.Session, &session.FSRequest{Op: session.FSHome, User: user})
	if err != nil {
		return "", s.rpcErr(ctx, t, err)
	}
	if rep.Home == "" {
		rep.Home = "/"
	}
	st.mu.Lock()
	st.homes[user] = rep.Home
	st.mu.Unlock()
	return rep.Home, nil
}

// absPath makes p absolute as E2B's envd does: "" is user's home, "~"
// stands for it, and a relative path is relative to it.
func (s *Server) absPath(ctx context.Context, t Target, user, p string) (string, error) {
	if p == "~" || strings.HasPrefix(p, "~/") {
		p = strings.TrimPrefix(strings.TrimPrefix(p, "~"), "/")
	}
	if path.IsAbs(p) {
		return path.Clean(p), nil
	}
	home, err := s.home(ctx, t, user)
	if err != nil {
		return "", err
	}
	return path.Join(home, p), nil
}

// fileMode renders a mode as ls does ("drwxr-xr-x").
func fileMode(e *session.FSEntry) string {
	var b [10]byte
	switch e.Type {
	case "dir":
		b[0] = 'd'
	case "symlink":
		b[0] = 'l'
	case "file":
		b[0] = '-'
	default:
		b[0] = '?'
	}
	const rwx = "rwxrwxrwx"
	for i := range 9 {
		if e.Mode&(1<<(8-i)) != 0 {
			b[1+i] = rwx[i]
		} else {
			b[1+i] = '-'
		}
	}
	special := func(bit uint32, at int, set, unset byte) {
		if e.Mode&bit != 0 {
			if b[at] == '-' {
				b[at] = unset
			} else {
				b[at] = set
			}
		}
	}
	special(0o4000, 3, 's', 'S')
	special(0o2000, 6, 's', 'S')
	special(0o1000, 9, 't', 'T')
	return string(b[:])
}

// entryInfo is an agent's entry as E2B's SDKs read it.
func entryInfo(e *session.FSEntry) *filesystem.EntryInfo {
	if e == nil {
		return nil
	}
	name := e.Name
	if e.Path == "/" {
		name = "/"
	}
	info := &filesystem.EntryInfo{Name: name, Path: e.Path, Size: e.Size, Mode: e.Mode, Permissions: fileMode(e),
		Owner: e.Owner, Group: e.Group, ModifiedTime: timestamppb.New(e.MTime), Metadata: e.Metadata}
	switch e.Type {
	case "file":
		info.Type = filesystem.FileType_FILE_TYPE_FILE
	case "dir":
		info.Type = filesystem.FileType_FILE_TYPE_DIRECTORY
	case "symlink":
		info.Type = filesystem.FileType_FILE_TYPE_SYMLINK
		r := e.Resolved
		info.SymlinkTarget = &r
	}
	if info.Metadata == nil {
		info.Metadata = map[string]string{}
	}
	return info
}

// filesystemService implements filesystem.Filesystem.
type filesystemService struct{ s *Server }

// call is the common shape of the unary calls: the target, the user, the
// path made absolute, one agent call.
func (f *filesystemService) call(ctx context.Context, h http.Header, req *session.FSRequest) (*session.FSReply, error) {
	t, err := target(ctx)
	if err != nil {
		return nil, err
	}
	user, err := userOf(t, h)
	if err != nil {
		return nil, f.s.rpcErr(ctx, t, err)
	}
	if req.Path, err = f.s.absPath(ctx, t, user, req.Path); err != nil {
		return nil, f.s.rpcErr(ctx, t, err)
	}
	if req.Op == session.FSMove {
		if req.Dest, err = f.s.absPath(ctx, t, user, req.Dest); err != nil {
			return nil, f.s.rpcErr(ctx, t, err)
		}
	}
	return f.s.fs(ctx, t, user, req)
}

func (f *filesystemService) Stat(ctx context.Context, req *connect.Request[filesystem.StatRequest]) (*connect.Response[filesystem.StatResponse], error) {
	rep, err := f.call(ctx, req.Header(), &session.FSRequest{Op: session.FSStat, Path: req.Msg.GetPath()})
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&filesystem.StatResponse{Entry: entryInfo(rep.Entry)}), nil
}

func (f *filesystemService) MakeDir(ctx context.Context, req *connect.Request[filesystem.MakeDirRequest]) (*connect.Response[filesystem.MakeDirResponse], error) {
	if req.Msg.GetPath() == "" {
		return nil, connect.NewError(connect.CodeInvalidArgument, errors.New("path is required"))
	}
	rep, err := f.call(ctx, req.Header(), &session.FSRequest{Op: session.FSMkdir, Path: req.Msg.GetPath()})
	if err != nil {
		return nil, err
	}
	if rep.Existed {
		return nil, connect.NewError(connect.CodeAlreadyExists, fmt.Errorf("directory '%s' already exists", rep.Entry.Path))
	}
	return connect.NewResponse(&filesystem.MakeDirResponse{Entry: entryInfo(rep.Entry)}), nil
}

func (f *filesystemService) Move(ctx context.Context, req *connect.Request[filesystem.MoveRequest]) (*connect.Response[filesystem.MoveResponse], error) {
	if req.Msg.GetSource() == "" || req.Msg.GetDestination() == "" {
		return nil, connect.NewError(connect.CodeInvalidArgument, errors.New("source and destination are required"))
	}
	rep, err := f.call(ctx, req.Header(), &session.FSRequest{Op: session.FSMove, Path: req.Msg.GetSource(), Dest: req.Msg.GetDestination()})
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&filesystem.MoveResponse{Entry: entryInfo(rep.Entry)}), nil
}

func (f *filesystemService) ListDir(ctx context.Context, req *connect.Request[filesystem.ListDirRequest]) (*connect.Response[filesystem.ListDirResponse], error) {
	depth := req.Msg.GetDepth()
	if depth == 0 {
		depth = 1
	}
	rep, err := f.call(ctx, req.Header(), &session.FSRequest{Op: session.FSList, Path: req.Msg.GetPath(), Depth: int(min(depth, 64))})
	if err != nil {
		return nil, err
	}
	out := &filesystem.ListDirResponse{Entries: make([]*filesystem.EntryInfo, 0, len(rep.Entries))}
	for i := range rep.Entries {
		out.Entries = append(out.Entries, entryInfo(&rep.Entries[i]))
	}
	return connect.NewResponse(out), nil
}

func (f *filesystemService) Remove(ctx context.Context, req *connect.Request[filesystem.RemoveRequest]) (*connect.Response[filesystem.RemoveResponse], error) {
	if req.Msg.GetPath() == "" {
		return nil, connect.NewError(connect.CodeInvalidArgument, errors.New("path is required"))
	}
	if _, err := f.call(ctx, req.Header(), &session.FSRequest{Op: session.FSRemove, Path: req.Msg.GetPath()}); err != nil {
		return nil, err
	}
	return connect.NewResponse(&filesystem.RemoveResponse{}), nil
}

// watcher is one running watch and the events it has reported
// and nobody has taken yet.
type watcher struct {
	cancel context.CancelFunc
	done   chan struct{}
	// ready is closed once the agent watches (or failed before).
	ready chan struct{}

	mu sync.Mutex
	// +checklocks:mu
	events []*filesystem.FilesystemEvent
	// +checklocks:mu
	err error
	// notify is signalled when events or err change.
	notify chan struct{}
}

func (w *watcher) stop() {
	w.cancel()
	<-w.done
}

// take returns and clears the pending events, and the error the watch
// ended with.
func (w *watcher) take() ([]*filesystem.FilesystemEvent, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	evs := w.events
	w.events = nil
	return evs, w.err
}

var eventTypes = map[string]filesystem.EventType{
	"create": filesystem.EventType_EVENT_TYPE_CREATE,
	"write":  filesystem.EventType_EVENT_TYPE_WRITE,
	"remove": filesystem.EventType_EVENT_TYPE_REMOVE,
	"rename": filesystem.EventType_EVENT_TYPE_RENAME,
	"chmod":  filesystem.EventType_EVENT_TYPE_CHMOD,
}

// watch starts an inotify watch of path in the sandbox's agent and returns
// once it watches, or with the error it failed with (not_found, a path that
// is no directory). The watch runs until ctx ends or stop is called.
func (s *Server) watch(ctx context.Context, t Target, user, p string, recursive, include bool) (*watcher, error) {
	p, err := s.absPath(ctx, t, user, p)
	if err != nil {
		return nil, s.rpcErr(ctx, t, err)
	}
	req := &session.FSWatchRequest{Path: p, Recursive: recursive, IncludeEntry: include}
	if user != defaultUser(t) && canSwitch(t, user) {
		req.User = user
	}
	// A watch lives as long as a command may (session.max_exec_timeout),
	// or its call's deadline.
	timeout := s.mgr.Config().MaxTimeout
	if d, ok := ctx.Deadline(); ok && time.Until(d) < timeout {
		timeout = max(time.Until(d), time.Second)
	}
	wctx, cancel := context.WithTimeout(ctx, timeout)
	w := &watcher{cancel: cancel, done: make(chan struct{}), ready: make(chan struct{}), notify: make(chan struct{}, 1)}
	var started sync.Once
	ready := false
	markReady := func() { started.Do(func() { close(w.ready) }) }
	on := func(ev session.FSWatchEvent) error {
		if ev.Start {
			ready = true
			markReady()
			return nil
		}
		typ, ok := eventTypes[ev.Type]
		if !ok {
			return nil
		}
		fe := &filesystem.FilesystemEvent{Name: ev.Name, Type: typ, Entry: entryInfo(ev.Entry)}
		w.mu.Lock()
		if len(w.events) >= maxWatcherEvents {
			w.events = w.events[1:]
		}
		w.events = append(w.events, fe)
		w.mu.Unlock()
		w.signal()
		return nil
	}
	go func() {
		defer close(w.done)
		err := s.mgr.FSWatch(wctx, t.Tenant, t.Session, req, on)
		switch {
		case err != nil && wctx.Err() != nil:
			err = nil // stopped, or ran its time
		case err != nil:
			err = s.rpcErr(wctx, t, err)
		case !ready:
			err = connect.NewError(connect.CodeInternal, errors.New("the watch ended before it started"))
		}
		w.mu.Lock()
		w.err = err
		w.mu.Unlock()
		w.signal()
		markReady()
	}()
	select {
	case <-w.ready:
	case <-ctx.Done():
		w.stop()
		return nil, s.rpcErr(ctx, t, ctx.Err())
	}
	if !ready {
		<-w.done
		_, err := w.take()
		if err == nil {
			err = connect.NewError(connect.CodeInternal, errors.New("the watch ended before it started"))
		}
		return nil, err
	}
	return w, nil
}

func (w *watcher) signal() {
	select {
	case w.notify <- struct{}{}:
	default:
	}
}

func (f *filesystemService) WatchDir(ctx context.Context, req *connect.Request[filesystem.WatchDirRequest], stream *connect.ServerStream[filesystem.WatchDirResponse]) error {
	s := f.s
	t, err := target(ctx)
	if err != nil {
		return err
	}
	user, err := userOf(t, req.Header())
	if err != nil {
		return s.rpcErr(ctx, t, err)
	}
	w, err := s.watch(ctx, t, user, req.Msg.GetPath(), req.Msg.GetRecursive(), req.Msg.GetIncludeEntry())
	if err != nil {
		return err
	}
	defer w.stop()
	if err := stream.Send(&filesystem.WatchDirResponse{Event: &filesystem.WatchDirResponse_Start{Start: &filesystem.WatchDirResponse_StartEvent{}}}); err != nil {
		return err
	}
	tick := time.NewTicker(keepaliveEvery(req.Header()))
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return connect.NewError(connect.CodeDeadlineExceeded, errors.New("the watch's timeout passed"))
			}
			return nil
		case <-tick.C:
			if err := stream.Send(&filesystem.WatchDirResponse{Event: &filesystem.WatchDirResponse_Keepalive{Keepalive: &filesystem.WatchDirResponse_KeepAlive{}}}); err != nil {
				return err
			}
		case <-w.notify:
			evs, err := w.take()
			for _, ev := range evs {
				if err := stream.Send(&filesystem.WatchDirResponse{Event: &filesystem.WatchDirResponse_Filesystem{Filesystem: ev}}); err != nil {
					return err
				}
			}
			if err != nil {
				return err
			}
			select {
			case <-w.done:
				// The watch ended (its directory went away): so does
				// the stream.
				if evs, err := w.take(); len(evs) == 0 {
					return err
				}
				w.signal()
			default:
			}
		}
	}
}

func (f *filesystemService) CreateWatcher(ctx context.Context, req *connect.Request[filesystem.CreateWatcherRequest]) (*connect.Response[filesystem.CreateWatcherResponse], error) {
	s := f.s
	t, err := target(ctx)
	if err != nil {
		return nil, err
	}
	user, err := userOf(t, req.Header())
	if err != nil {
		return nil, s.rpcErr(ctx, t, err)
	}
	// The watcher outlives this call, until RemoveWatcher or the end of
	// the session.
	w, err := s.watch(context.WithoutCancel(ctx), t, user, req.Msg.GetPath(), req.Msg.GetRecursive(), req.Msg.GetIncludeEntry())
	if err != nil {
		return nil, err
	}
	var b [12]byte
	rand.Read(b[:])
	id := hex.EncodeToString(b[:])
	st := s.state(t)
	st.mu.Lock()
	st.watchers[id] = w
	st.mu.Unlock()
	return connect.NewResponse(&filesystem.CreateWatcherResponse{WatcherId: id}), nil
}

func (f *filesystemService) watcher(ctx context.Context, id string) (*sessionState, *watcher, error) {
	t, err := target(ctx)
	if err != nil {
		return nil, nil, err
	}
	st := f.s.state(t)
	st.mu.Lock()
	w := st.watchers[id]
	st.mu.Unlock()
	if w == nil {
		return nil, nil, connect.NewError(connect.CodeNotFound, fmt.Errorf("watcher %q not found", id))
	}
	return st, w, nil
}

func (f *filesystemService) GetWatcherEvents(ctx context.Context, req *connect.Request[filesystem.GetWatcherEventsRequest]) (*connect.Response[filesystem.GetWatcherEventsResponse], error) {
	_, w, err := f.watcher(ctx, req.Msg.GetWatcherId())
	if err != nil {
		return nil, err
	}
	evs, err := w.take()
	if len(evs) == 0 {
		if err != nil {
			return nil, err
		}
		select {
		case <-w.done:
			// Its directory went away, or it ran as long as a command
			// may (session.max_exec_timeout).
			return nil, connect.NewError(connect.CodeNotFound, fmt.Errorf("watcher %q has ended: its directory was removed or it ran for the longest time a command may", req.Msg.GetWatcherId()))
		default:
		}
	}
	return connect.NewResponse(&filesystem.GetWatcherEventsResponse{Events: evs}), nil
}

func (f *filesystemService) RemoveWatcher(ctx context.Context, req *connect.Request[filesystem.RemoveWatcherRequest]) (*connect.Response[filesystem.RemoveWatcherResponse], error) {
	st, w, err := f.watcher(ctx, req.Msg.GetWatcherId())
	if err != nil {
		return nil, err
	}
	st.mu.Lock()
	delete(st.watchers, req.Msg.GetWatcherId())
	st.mu.Unlock()
	w.stop()
	return connect.NewResponse(&filesystem.RemoveWatcherResponse{}), nil
}
