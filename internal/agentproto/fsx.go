package agentproto

// OpFS is a filesystem call of E2B's envd (internal/e2b/envd): what the
// plain file operations lack (owners by name, extended attributes, rename,
// a listing with a depth), run as a given user of the image.
const OpFS Op = 12

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

// Bounds of the FS calls.
const (
	// MaxFSDepth bounds a listing's depth.
	MaxFSDepth = 64
	// MaxMetadata bounds the user.e2b.* attributes read from, or written
	// to, one file.
	MaxMetadata = 64
	// MaxMetadataKey and MaxMetadataValue bound one attribute's name
	// (after the prefix: a Linux xattr name is at most 255 bytes) and
	// value, in bytes.
	MaxMetadataKey   = 246
	MaxMetadataValue = 16 << 10
)

// MetadataPrefix is the prefix of the extended attributes that hold E2B's
// file metadata.
const MetadataPrefix = "user.e2b."

// FSRequest is one OpFS call.
type FSRequest struct {
	Op   string `json:"op"`
	Path string `json:"path,omitempty"`
	Dest string `json:"dest,omitempty"`
	// Depth is a listing's depth: 1 lists the directory's own entries.
	Depth int `json:"depth,omitempty"`
	// User acts as a user of the image ("root", a name of its /etc/passwd,
	// "uid" or "uid:gid"): permission checks are that user's and what is
	// created is theirs. "" is the session's user.
	User string `json:"user,omitempty"`
	// Metadata is the file's new user.e2b.* attributes (metadata).
	Metadata map[string]string `json:"metadata,omitempty"`
	// Own gives the file to User first (metadata).
	Own bool `json:"own,omitempty"`
}

// FSEntry describes one file with its owners and metadata.
type FSEntry struct {
	Entry
	UID   uint32 `json:"uid"`
	GID   uint32 `json:"gid"`
	Owner string `json:"owner"` // the name of UID in the image, else the number
	Group string `json:"group"` // the name of GID in the image, else the number
	// Resolved is a symlink's target, absolute and with every link in it
	// followed as far as it resolves.
	Resolved string            `json:"resolved,omitempty"`
	Metadata map[string]string `json:"metadata,omitempty"`
}

// FSReply answers OpFS.
type FSReply struct {
	Entry   *FSEntry  `json:"entry,omitempty"`
	Entries []FSEntry `json:"entries,omitempty"`
	// EntriesStreamed says a listing too large for one frame came as Data:
	// the JSON array of its entries.
	EntriesStreamed bool `json:"entries_streamed,omitempty"`
	// Existed says mkdir found a directory there already.
	Existed bool   `json:"existed,omitempty"`
	Home    string `json:"home,omitempty"`
}

// OpFSWatch watches a directory (inotify) for E2B's envd. The agent sends
// FSWatchEvent as JSON lines on ChanData (flow-controlled: a slow reader
// holds the agent back, and the kernel's queue drops what overflows), the
// first one Start once the watch is in place; the stream ends with an
// empty Reply when the directory goes away, or is cancelled by the caller.
const OpFSWatch Op = 13

// FSWatchRequest starts a watch.
type FSWatchRequest struct {
	Path      string `json:"path"`
	Recursive bool   `json:"recursive,omitempty"`
	// IncludeEntry describes each event's file (as FSStat) when it is
	// still there.
	IncludeEntry bool `json:"include_entry,omitempty"`
	// User as in FSRequest.
	User string `json:"user,omitempty"`
}

// FSWatchEvent is one line of a watch: Start, or an event of Type create,
// write, remove, rename or chmod on Name (relative to the watched path).
type FSWatchEvent struct {
	Start bool     `json:"start,omitempty"`
	Name  string   `json:"name,omitempty"`
	Type  string   `json:"type,omitempty"`
	Entry *FSEntry `json:"entry,omitempty"`
}

// Bounds of a watch.
const (
	// MaxFSWatches bounds the watches one agent runs at once.
	MaxFSWatches = 64
	// MaxFSWatchDirs bounds the directories one recursive watch follows.
	MaxFSWatchDirs = 8192
)
