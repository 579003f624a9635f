package agent

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/warrenhq/warren/internal/agentproto"
	"github.com/warrenhq/warren/internal/errdefs"
)

// fsWatches counts the watches running (agentproto.MaxFSWatches).
var fsWatches atomic.Int32

// fsWatch serves OpFSWatch: an inotify watch of a directory, as the user
// the call names, its events sent as JSON lines until the directory goes
// away or the caller cancels.
func (a *Agent) fsWatch(ctx context.Context, s *agentproto.Stream, req *agentproto.FSWatchRequest) {
	acct, err := a.fsAccount(&agentproto.FSRequest{Op: agentproto.FSStat, User: req.User})
	if err != nil {
		s.Fail(err)
		return
	}
	p, err := fsPath(req.Path)
	if err != nil {
		s.Fail(err)
		return
	}
	if fsWatches.Add(1) > agentproto.MaxFSWatches {
		fsWatches.Add(-1)
		s.Fail(errdefs.New(errdefs.ErrResourceExhausted, "at most %d watches run at once in a sandbox", agentproto.MaxFSWatches))
		return
	}
	defer fsWatches.Add(-1)
	// The whole watch runs as the user: their permissions decide which
	// directories it may watch and describe.
	err = asAccount(acct, func() error {
		w := &inotifyWatch{root: p, recursive: req.Recursive, include: req.IncludeEntry, wds: map[int32]string{}, known: map[string]bool{}, uploads: map[uint32]bool{},
			send: func(ev agentproto.FSWatchEvent) error {
				js, err := json.Marshal(ev)
				if err != nil {
					return err
				}
				return s.WriteData(ctx, agentproto.ChanData, append(js, '\n'))
			}}
		return w.run(ctx)
	})
	if err != nil {
		s.Fail(err)
		return
	}
	s.Reply(struct{}{}, nil)
}

// The events a watch asks for.
const watchMask = unix.IN_MODIFY | unix.IN_ATTRIB | unix.IN_MOVED_FROM | unix.IN_MOVED_TO | unix.IN_CREATE |
	unix.IN_DELETE | unix.IN_DELETE_SELF | unix.IN_MOVE_SELF

type inotifyWatch struct {
	root               string
	recursive, include bool
	fd                 int
	wds                map[int32]string
	// known holds the paths reported or seen, so a directory's contents
	// found when its watch is added are reported once.
	known map[string]bool
	// uploads holds the rename cookies of the agent's own upload files.
	uploads map[uint32]bool
	send    func(agentproto.FSWatchEvent) error
}

func (w *inotifyWatch) run(ctx context.Context) error {
	// The root must be a directory, reached as the file API reaches paths.
	dfd, err := openIn(unix.AT_FDCWD, w.root, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if errors.Is(err, unix.ENOTDIR) {
		return errdefs.New(errdefs.ErrInvalidArgument, "path '%s' is not a directory", w.root)
	}
	if err != nil {
		return fsError(w.root, err)
	}
	unix.Close(dfd)
	w.fd, err = unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err != nil {
		return errdefs.New(errdefs.ErrResourceExhausted, "inotify: %v", err)
	}
	defer unix.Close(w.fd)
	if err := w.add(w.root, false); err != nil {
		return fsError(w.root, err)
	}
	if err := w.send(agentproto.FSWatchEvent{Start: true}); err != nil {
		return err
	}
	// A cancelled call wakes the poll below through an eventfd, so the
	// watch (and its slot of MaxFSWatches) ends at once.
	efd, err := unix.Eventfd(0, unix.EFD_CLOEXEC)
	if err != nil {
		return errdefs.New(errdefs.ErrResourceExhausted, "eventfd: %v", err)
	}
	stopped := make(chan struct{})
	woken := make(chan struct{})
	defer func() {
		// The waker is done with efd before it is closed (a closed
		// number may be reused at once).
		close(stopped)
		<-woken
		unix.Close(efd)
	}()
	go func() {
		defer close(woken)
		select {
		case <-ctx.Done():
			var one [8]byte
			one[0] = 1
			_, _ = unix.Write(efd, one[:])
		case <-stopped:
		}
	}()
	buf := make([]byte, 64<<10)
	for {
		pfd := []unix.PollFd{{Fd: int32(w.fd), Events: unix.POLLIN}, {Fd: int32(efd), Events: unix.POLLIN}}
		if _, err := unix.Poll(pfd, -1); err != nil && err != unix.EINTR {
			return err
		}
		if ctx.Err() != nil {
			return nil
		}
		n, err := unix.Read(w.fd, buf)
		if err == unix.EAGAIN || err == unix.EINTR {
			continue
		}
		if err != nil {
			return err
		}
		done, err := w.events(buf[:n])
		if err != nil || done {
			return err
		}
	}
}

// add watches d (and, recursive, the directories below it). late: d
// appeared while watching, so what it holds already was created unseen
// and is reported as created.
func (w *inotifyWatch) add(d string, late bool) error { return w.addThen(d, late, nil) }

// addThen is add calling then (when set) once d's watch is in place and
// before its contents are listed: a directory's create is reported after
// its watch exists, so whoever reacts to it by writing inside is seen.
func (w *inotifyWatch) addThen(d string, late bool, then func() error) error {
	if len(w.wds) >= agentproto.MaxFSWatchDirs {
		return nil
	}
	// The directory is opened as the file API opens paths, and watched
	// through its descriptor's /proc link (the agent's own descriptor,
	// reached on purpose), so no magic link in d is followed.
	// The root may be a symlink to a directory; below it nothing is
	// followed.
	flags := unix.O_RDONLY | unix.O_DIRECTORY | unix.O_NOFOLLOW
	if d == w.root {
		flags &^= unix.O_NOFOLLOW
	}
	fd, err := openIn(unix.AT_FDCWD, d, flags, 0)
	if err != nil {
		if d == w.root {
			return err
		}
		return nil
	}
	f := os.NewFile(uintptr(fd), d)
	defer f.Close()
	wd, err := unix.InotifyAddWatch(w.fd, "/proc/self/fd/"+strconv.Itoa(fd), watchMask)
	if err != nil {
		if d == w.root {
			return err
		}
		return nil
	}
	w.wds[int32(wd)] = d
	if then != nil {
		if err := then(); err != nil {
			return err
		}
	}
	names, _ := f.Readdirnames(maxFSEntries)
	sort.Strings(names)
	for _, n := range names {
		c := path.Join(d, n)
		if w.known[c] {
			continue
		}
		if len(w.known) < maxFSEntries {
			w.known[c] = true
		}
		if late {
			if err := w.event("create", c); err != nil {
				return err
			}
		}
		var st unix.Stat_t
		if w.recursive && unix.Fstatat(fd, n, &st, unix.AT_SYMLINK_NOFOLLOW) == nil && st.Mode&unix.S_IFMT == unix.S_IFDIR {
			if err := w.add(c, late); err != nil {
				return err
			}
		}
	}
	return nil
}

func (w *inotifyWatch) event(kind, p string) error {
	rel := strings.TrimPrefix(strings.TrimPrefix(p, w.root), "/")
	if w.root == "/" {
		rel = strings.TrimPrefix(p, "/")
	}
	ev := agentproto.FSWatchEvent{Name: rel, Type: kind}
	if w.include {
		if e, err := fsStat(p); err == nil {
			ev.Entry = e
		}
	}
	return w.send(ev)
}

// events handles one read of the inotify descriptor; done says the
// watched directory went away.
func (w *inotifyWatch) events(buf []byte) (done bool, err error) {
	for len(buf) >= unix.SizeofInotifyEvent {
		raw := (*unix.InotifyEvent)(unsafe.Pointer(&buf[0]))
		end := unix.SizeofInotifyEvent + int(raw.Len)
		if end > len(buf) {
			return false, nil
		}
		name := strings.TrimRight(string(buf[unix.SizeofInotifyEvent:end]), "\x00")
		wd, m, cookie := raw.Wd, raw.Mask, raw.Cookie
		buf = buf[end:]
		if m&unix.IN_Q_OVERFLOW != 0 {
			continue
		}
		d, ok := w.wds[wd]
		if !ok {
			continue
		}
		if m&unix.IN_IGNORED != 0 {
			delete(w.wds, wd)
			continue
		}
		if name == "" {
			if m&(unix.IN_DELETE_SELF|unix.IN_MOVE_SELF) != 0 && d == w.root {
				return true, nil
			}
			continue
		}
		p := path.Join(d, name)
		// The agent writes an upload to a hidden temporary file and
		// renames it over the target: that rename is the write it
		// stands for.
		if strings.HasPrefix(name, ".warren-upload-") {
			if m&unix.IN_MOVED_FROM != 0 && len(w.uploads) < maxFSEntries {
				w.uploads[cookie] = true
			}
			continue
		}
		if m&unix.IN_MOVED_TO != 0 && w.uploads[cookie] {
			delete(w.uploads, cookie)
			if !w.known[p] {
				w.known[p] = true
				if err := w.event("create", p); err != nil {
					return false, err
				}
			}
			if err := w.event("write", p); err != nil {
				return false, err
			}
			continue
		}
		switch {
		case m&unix.IN_CREATE != 0 && w.known[p]:
			// Reported already: the listing of its directory, new and
			// just watched, found it before this event was read.
			continue
		case m&(unix.IN_CREATE|unix.IN_MOVED_TO) != 0:
			if len(w.known) < maxFSEntries {
				w.known[p] = true
			}
			create := func() error { return w.event("create", p) }
			if w.recursive && m&unix.IN_ISDIR != 0 {
				// Reported once watched (or found unwatchable).
				sent := false
				err = w.addThen(p, true, func() error { sent = true; return create() })
				if err == nil && !sent {
					err = create()
				}
			} else {
				err = create()
			}
			if err != nil {
				return false, err
			}
		case m&unix.IN_MODIFY != 0:
			err = w.event("write", p)
		case m&unix.IN_ATTRIB != 0:
			err = w.event("chmod", p)
		case m&unix.IN_DELETE != 0:
			delete(w.known, p)
			err = w.event("remove", p)
		case m&unix.IN_MOVED_FROM != 0:
			delete(w.known, p)
			err = w.event("rename", p)
		}
		if err != nil {
			return false, err
		}
	}
	return false, nil
}
