package agent

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/warrenhq/warren/internal/agentproto"
	"github.com/warrenhq/warren/internal/errdefs"
)

// TestFSOpsRefuseMagicLinks: the envd calls reach paths as the file API
// does: never through a descriptor's /proc link.
func TestFSOpsRefuseMagicLinks(t *testing.T) {
	outside := t.TempDir()
	os.WriteFile(filepath.Join(outside, "secret"), []byte("s"), 0o644)
	fd, err := unix.Open(outside, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	base := "/proc/self/fd/" + strconv.Itoa(fd)
	a := &Agent{}
	for _, req := range []agentproto.FSRequest{
		{Op: agentproto.FSStat, Path: base + "/secret"},
		{Op: agentproto.FSList, Path: base},
		{Op: agentproto.FSMkdir, Path: base + "/new"},
		{Op: agentproto.FSMove, Path: base + "/secret", Dest: t.TempDir() + "/stolen"},
		{Op: agentproto.FSMove, Path: t.TempDir(), Dest: base + "/planted"},
		{Op: agentproto.FSMetadata, Path: base + "/secret", Metadata: map[string]string{"k": "v"}},
		{Op: agentproto.FSReadable, Path: base + "/secret"},
	} {
		var rep agentproto.FSReply
		if err := a.fsDo(&req, &rep); errdefs.ClassOf(err) != errdefs.ErrPermissionDenied {
			t.Errorf("%s %s: %v, want permission_denied", req.Op, req.Path, err)
		}
	}
	if ents, _ := os.ReadDir(outside); len(ents) != 1 {
		t.Errorf("the outside directory changed: %v", ents)
	}
	// A symlink to a magic link is described with its target as written,
	// never resolved through it.
	link := filepath.Join(t.TempDir(), "link")
	os.Symlink(base, link)
	e, err := fsStat(link)
	if err != nil || e.Type != "symlink" || e.Resolved != base {
		t.Errorf("stat of a link to a magic link: %+v, %v", e, err)
	}
}

// TestFSList: depth, order, owners' names, a symlink's resolved target.
func TestFSList(t *testing.T) {
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "a/b/c"), 0o755)
	os.WriteFile(filepath.Join(dir, "a/f"), []byte("xyz"), 0o640)
	os.Symlink("a/f", filepath.Join(dir, "l"))
	os.Symlink("missing", filepath.Join(dir, "dangling"))
	got := func(depth int) string {
		es, err := fsList(dir, depth)
		if err != nil {
			t.Fatalf("depth %d: %v", depth, err)
		}
		var out []string
		for _, e := range es {
			out = append(out, strings.TrimPrefix(e.Path, dir+"/"))
		}
		return strings.Join(out, " ")
	}
	if g := got(1); g != "a dangling l" {
		t.Errorf("depth 1: %s", g)
	}
	if g := got(2); g != "a a/b a/f dangling l" {
		t.Errorf("depth 2: %s", g)
	}
	if g := got(1000); g != "a a/b a/b/c a/f dangling l" {
		t.Errorf("depth past the limit: %s", g)
	}
	e, err := fsStat(filepath.Join(dir, "l"))
	if err != nil || e.Resolved != filepath.Join(dir, "a/f") || e.Target != "a/f" || e.Owner != "root" || e.Group != "root" {
		t.Errorf("stat of a symlink: %+v %v", e, err)
	}
	if e, err := fsStat(filepath.Join(dir, "dangling")); err != nil || e.Resolved != filepath.Join(dir, "missing") {
		t.Errorf("stat of a dangling symlink: %+v %v", e, err)
	}
	a := &Agent{}
	for p, want := range map[string]bool{"l": false, "a": true, "a/b": true} {
		var rep agentproto.FSReply
		err := a.fsDo(&agentproto.FSRequest{Op: agentproto.FSMkdir, Path: filepath.Join(dir, p)}, &rep)
		if want && (err != nil || !rep.Existed) || !want && errdefs.ClassOf(err) != errdefs.ErrInvalidArgument {
			t.Errorf("mkdir over %s: %+v %v", p, rep, err)
		}
	}
	os.Symlink("a", filepath.Join(dir, "la"))
	if rep := (agentproto.FSReply{}); a.fsDo(&agentproto.FSRequest{Op: agentproto.FSMkdir, Path: filepath.Join(dir, "la")}, &rep) != nil || !rep.Existed {
		t.Errorf("mkdir over a link to a directory: %+v", rep)
	}
	if _, err := fsList(filepath.Join(dir, "a/f"), 1); errdefs.ClassOf(err) != errdefs.ErrInvalidArgument {
		t.Errorf("list of a file: %v", err)
	}
	if err := fsError(dir+"/nope", unix.ENOENT); errdefs.ClassOf(err) != errdefs.ErrNotFound || !strings.Contains(err.Error(), "does not exist") {
		t.Errorf("a missing path: %v", err)
	}
}

// TestFSMetadata: user.e2b.* attributes replace what was there, read back
// bounded, and refuse what is past the limits.
func TestFSMetadata(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "f")
	os.WriteFile(p, []byte("x"), 0o644)
	if err := unix.Setxattr(p, "user.other", []byte("kept"), 0); err != nil {
		t.Skipf("no user xattrs on %s: %v", dir, err)
	}
	unix.Setxattr(p, "user.e2b.old", []byte("gone"), 0)
	if err := fsSetMetadata(p, map[string]string{"a": "1", "b": "2"}); err != nil {
		t.Fatal(err)
	}
	e, err := fsStat(p)
	if err != nil || len(e.Metadata) != 2 || e.Metadata["a"] != "1" || e.Metadata["b"] != "2" {
		t.Errorf("metadata: %v %v", e.Metadata, err)
	}
	if v := make([]byte, 16); func() bool { n, err := unix.Getxattr(p, "user.other", v); return err != nil || string(v[:n]) != "kept" }() {
		t.Error("an attribute outside user.e2b. was touched")
	}
	too := map[string]string{}
	for i := range agentproto.MaxMetadata + 1 {
		too[strconv.Itoa(i)] = "v"
	}
	for name, md := range map[string]map[string]string{
		"too many":   too,
		"long key":   {strings.Repeat("k", agentproto.MaxMetadataKey+1): "v"},
		"long value": {"k": strings.Repeat("v", agentproto.MaxMetadataValue+1)},
		"empty key":  {"": "v"},
	} {
		if err := fsSetMetadata(p, md); errdefs.ClassOf(err) != errdefs.ErrInvalidArgument {
			t.Errorf("%s: %v, want invalid_argument", name, err)
		}
	}
	os.Symlink(p, filepath.Join(dir, "l"))
	if err := fsSetMetadata(filepath.Join(dir, "l"), map[string]string{"a": "1"}); errdefs.ClassOf(err) != errdefs.ErrInvalidArgument {
		t.Errorf("metadata on a symlink: %v", err)
	}
}

// TestFSAsAccount: a call as another user has that user's permission
// checks, on a thread of its own; the agent's other threads keep theirs.
func TestFSAsAccount(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("needs root: it acts as another user")
	}
	// Not t.TempDir: its parent is 0700, which nobody cannot enter.
	dir, err := os.MkdirTemp("", "warren-fs-account-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	os.Chmod(dir, 0o755)
	private := filepath.Join(dir, "private")
	os.Mkdir(private, 0o700)
	nobody := &account{name: "nobody", uid: 65534, gid: 65534, groups: []uint32{}}
	err = asAccount(nobody, func() error {
		_, err := fsList(private, 1)
		return fsError(private, err)
	})
	if errdefs.ClassOf(err) != errdefs.ErrPermissionDenied {
		t.Errorf("list of a 0700 root directory as nobody: %v, want permission_denied", err)
	}
	shared := filepath.Join(dir, "shared")
	os.Mkdir(shared, 0o777)
	os.Chmod(shared, 0o777) // past the umask
	var made *agentproto.FSEntry
	err = asAccount(nobody, func() error {
		fd, err := mkdirAllFor(filepath.Join(shared, "x/y"), nil)
		if err != nil {
			return err
		}
		unix.Close(fd)
		made, err = fsStat(filepath.Join(shared, "x/y"))
		return err
	})
	if err != nil || made.UID != 65534 || made.GID != 65534 {
		t.Errorf("mkdir as nobody: %+v %v", made, err)
	}
	// This goroutine's thread, and the process, are still root's.
	if uid, _ := unix.SetfsuidRetUid(-1); uid != 0 || os.Getuid() != 0 {
		t.Errorf("after the call: fsuid %d uid %d", uid, os.Getuid())
	}
	if _, err := fsList(private, 1); err != nil {
		t.Errorf("root lists its own directory: %v", err)
	}
}

// TestFSWatch: a recursive watch reports creates (in a directory made
// while watching too), writes, renames and removes, and ends when its
// directory goes.
func TestFSWatch(t *testing.T) {
	dir := t.TempDir()
	events := make(chan agentproto.FSWatchEvent, 100)
	w := &inotifyWatch{root: dir, recursive: true, wds: map[int32]string{}, known: map[string]bool{}, uploads: map[uint32]bool{},
		send: func(ev agentproto.FSWatchEvent) error { events <- ev; return nil }}
	done := make(chan error, 1)
	go func() { done <- w.run(t.Context()) }()
	if ev := <-events; !ev.Start {
		t.Fatalf("first event %+v", ev)
	}
	next := func(want ...string) {
		t.Helper()
		for _, w := range want {
			select {
			case ev := <-events:
				if got := ev.Type + " " + ev.Name; got != w {
					t.Errorf("event %q, want %q", got, w)
				}
			case <-time.After(5 * time.Second):
				t.Fatalf("no event, want %q", w)
			}
		}
	}
	// One step at a time: a directory's watch is added when its create
	// is read, and what happens in it before is seen by the listing only.
	os.Mkdir(filepath.Join(dir, "sub"), 0o755)
	next("create sub")
	os.WriteFile(filepath.Join(dir, "sub", "f"), []byte("x"), 0o644)
	next("create sub/f", "write sub/f")
	os.Rename(filepath.Join(dir, "sub", "f"), filepath.Join(dir, "g"))
	next("rename sub/f", "create g")
	os.Remove(filepath.Join(dir, "g"))
	next("remove g")
	os.RemoveAll(dir)
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("the watch ended with %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the watch did not end with its directory")
	}
}
