package session

import (
	"context"
	"time"

	"github.com/warrenhq/warren/internal/errdefs"
)

// OpFS is the Observer.Op name of the filesystem calls of E2B's envd.
const OpFS = "fs"

// The operations of an FSRequest.
const (
	FSStat     = "stat"     // Path, not followed
	FSList     = "list"     // Path's tree, Depth levels deep
	FSMkdir    = "mkdir"    // Path and its parents
	FSMove     = "move"     // Path to Dest, creating Dest's parents
	FSRemove   = "remove"   // Path, a tree included; a missing path is no error
	FSMetadata = "metadata" // replace Path's user.e2b.* attributes by Metadata
	FSReadable = "readable" // whether User may open Path for reading
	FSHome     = "home"     // User's home directory
)

// FSRequest is one filesystem call of E2B's envd, run in the sandbox by
// its agent. Paths are absolute.
type FSRequest struct {
	Op   string
	Path string
	Dest string
	// Depth is a listing's depth: 1 lists the directory's own entries
	// (at most 64).
	Depth int
	// User acts as a user of the image ("root", a name, "uid" or
	// "uid:gid"): permission checks are theirs, and what is created is
	// theirs. "" is the session's user.
	User string
	// Metadata is the file's new user.e2b.* metadata (FSMetadata).
	Metadata map[string]string
	// Own gives the file to User first (FSMetadata).
	Own bool
}

// FSEntry describes one file with its owners and metadata.
type FSEntry struct {
	Entry
	UID, GID uint32
	// Owner and Group are the names of UID and GID in the image, else
	// their numbers.
	Owner, Group string
	// Resolved is a symlink's target made absolute, links in it followed.
	Resolved string
	Metadata map[string]string
}

// FSReply answers an FSRequest.
type FSReply struct {
	Entry   *FSEntry
	Entries []FSEntry
	// Existed says FSMkdir found a directory there already.
	Existed bool
	Home    string
}

// FSSandbox is a Sandbox whose agent serves FSRequest.
type FSSandbox interface {
	FS(ctx context.Context, req *FSRequest) (*FSReply, error)
}

// FS runs one filesystem call of E2B's envd in a session.
func (m *Manager) FS(ctx context.Context, tenant, id string, req *FSRequest) (rep *FSReply, err error) {
	defer m.observe(OpFS, time.Now(), &err)
	err = m.withSandbox(ctx, tenant, id, func(sb Sandbox) error {
		fs, ok := sb.(FSSandbox)
		if !ok {
			return errdefs.New(errdefs.ErrUnavailable, "this runtime's sandboxes serve no E2B filesystem calls")
		}
		rep, err = fs.FS(ctx, req)
		return err
	})
	return rep, err
}

// FSWatchRequest starts a watch of a directory (inotify).
type FSWatchRequest struct {
	Path      string
	Recursive bool
	// IncludeEntry describes each event's file.
	IncludeEntry bool
	// User as in FSRequest.
	User string
}

// FSWatchEvent is one event of a watch: Start once it is in place, then
// Type create, write, remove, rename or chmod on Name (relative to the
// watched path).
type FSWatchEvent struct {
	Start bool
	Name  string
	Type  string
	Entry *FSEntry
}

// FSWatcher is a Sandbox whose agent watches directories.
type FSWatcher interface {
	FSWatch(ctx context.Context, req *FSWatchRequest, fn func(FSWatchEvent) error) error
}

// FSWatch watches a directory of a session, calling fn for each event,
// until the directory goes away (nil), fn fails or ctx ends.
func (m *Manager) FSWatch(ctx context.Context, tenant, id string, req *FSWatchRequest, fn func(FSWatchEvent) error) error {
	return m.withSandbox(ctx, tenant, id, func(sb Sandbox) error {
		w, ok := sb.(FSWatcher)
		if !ok {
			return errdefs.New(errdefs.ErrUnavailable, "this runtime's sandboxes watch no directories")
		}
		return w.FSWatch(ctx, req, fn)
	})
}
