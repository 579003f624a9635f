// Package api holds the JSON types of warren's REST API (v1). The daemon's
// handlers and the Go client both use them; api/openapi.yaml documents the
// same shapes for other languages, and a test keeps the two in step.
package api

import (
	"encoding/json"
	"time"
)

// Limits are a session's hard resource limits. Zero fields take the daemon's
// defaults.
type Limits struct {
	MemoryMB int64   `json:"memory_mb,omitempty"`
	CPUs     float64 `json:"cpus,omitempty"`
	Pids     int64   `json:"pids,omitempty"`
	DiskMB   int64   `json:"disk_mb,omitempty"`
}

// CreateSessionRequest is the body of POST /v1/sessions. Every field is
// optional.
type CreateSessionRequest struct {
	// ID is chosen by the client ([a-z0-9][a-z0-9_-]{0,62}); creating an
	// existing id returns that session (200) instead of a new one (201).
	ID     string            `json:"id,omitempty"`
	Image  string            `json:"image,omitempty"`
	Env    map[string]string `json:"env,omitempty"`
	Cwd    string            `json:"cwd,omitempty"`
	Limits *Limits           `json:"limits,omitempty"`
	// Network is the session's egress: "none" (the default: loopback
	// only), "open", or {"mode": "allowlist", "allow": [...], "deny": [...]}
	// (docs/NETWORKING.md). A bare string is the mode.
	Network *NetworkPolicy `json:"network,omitempty"`
	// TTLSeconds is the idle time after which the session is deleted;
	// every call refreshes it.
	TTLSeconds int64 `json:"ttl_seconds,omitempty"`
	// MaxLifetimeSeconds bounds the session's age regardless of use.
	MaxLifetimeSeconds int64             `json:"max_lifetime_seconds,omitempty"`
	Labels             map[string]string `json:"labels,omitempty"`
	// User runs the session's processes as a user of the image: a name from
	// its /etc/passwd (the base image has "sandbox", uid 1000), "uid" or
	// "uid:gid". Default root (root of the session's own user namespace).
	User string `json:"user,omitempty"`
	// Workspace names a workspace of the caller to mount at /workspace,
	// WorkspaceMode "rw" (the default) or "ro". Only one session at a time
	// may mount a workspace read-write unless it was created shared.
	Workspace     string `json:"workspace,omitempty"`
	WorkspaceMode string `json:"workspace_mode,omitempty"`
	// Snapshot names a snapshot of the caller to start from: its files are
	// the snapshotted session's, its image the snapshot's (leave Image
	// unset or give the same).
	Snapshot string `json:"snapshot,omitempty"`
}

// NetworkPolicy is a session's egress policy: the body of PATCH and the
// answer of GET /v1/sessions/{id}/network.
type NetworkPolicy struct {
	// Mode is none, open or allowlist (the default when Allow is given).
	Mode string `json:"mode,omitempty"`
	// Allow are exact names, "*." wildcards, IPv4 addresses or CIDRs,
	// each with an optional ":port"; Deny are names, wildcards, addresses
	// or CIDRs without ports, and win over Allow.
	Allow []string `json:"allow,omitempty"`
	Deny  []string `json:"deny,omitempty"`
}

// UnmarshalJSON takes a policy object, or a bare mode string ("none",
// "open"), as the network field was before it had rules.
func (p *NetworkPolicy) UnmarshalJSON(b []byte) error {
	var mode string
	if err := json.Unmarshal(b, &mode); err == nil {
		*p = NetworkPolicy{Mode: mode}
		return nil
	}
	type plain NetworkPolicy
	return json.Unmarshal(b, (*plain)(p))
}

// GetMode, GetAllow and GetDeny read a policy that may be nil (none
// given), as protobuf's getters do.
func (p *NetworkPolicy) GetMode() string {
	if p == nil {
		return ""
	}
	return p.Mode
}

func (p *NetworkPolicy) GetAllow() []string {
	if p == nil {
		return nil
	}
	return p.Allow
}

func (p *NetworkPolicy) GetDeny() []string {
	if p == nil {
		return nil
	}
	return p.Deny
}

// NetworkDenial is one connection or name a session's policy refused.
type NetworkDenial struct {
	Time time.Time `json:"time"`
	// Host is the name asked for, or the address connected to.
	Host string `json:"host"`
	// Port is the port connected to, 0 for a DNS question.
	Port int `json:"port"`
	// Proto is dns, tcp, udp, icmp or ipv6.
	Proto  string `json:"proto"`
	Reason string `json:"reason"`
}

// NetworkDenials is the answer of GET /v1/sessions/{id}/network/denials:
// the latest denials, oldest first (at most 256 are kept).
type NetworkDenials struct {
	Denials []NetworkDenial `json:"denials"`
}

// Usage is a session's live resource use.
type Usage struct {
	MemoryBytes uint64  `json:"memory_bytes"`
	Pids        uint64  `json:"pids"`
	CPUSeconds  float64 `json:"cpu_seconds"`
	// DiskBytes is the size of the session's writable layer.
	DiskBytes int64 `json:"disk_bytes"`
	// NetworkInBytes and NetworkOutBytes are the bytes the session's
	// network link carried into and out of it (absent without a network).
	NetworkInBytes  uint64 `json:"network_in_bytes,omitempty"`
	NetworkOutBytes uint64 `json:"network_out_bytes,omitempty"`
}

// Session describes one session.
type Session struct {
	ID string `json:"id"`
	// Tenant owns the session; shown to admin callers listing across
	// tenants (GET /v1/sessions?all=true).
	Tenant     string    `json:"tenant,omitempty"`
	Image      string    `json:"image"`
	State      string    `json:"state"`
	CreatedAt  time.Time `json:"created_at"`
	LastUsedAt time.Time `json:"last_used_at"`
	// ExpiresAt is when the session will be deleted unless used again (the
	// earlier of idle expiry and end of its maximum lifetime).
	ExpiresAt time.Time         `json:"expires_at"`
	Cwd       string            `json:"cwd"`
	Limits    Limits            `json:"limits"`
	Network   string            `json:"network"`
	Labels    map[string]string `json:"labels,omitempty"`
	User      string            `json:"user"`
	Usage     *Usage            `json:"usage,omitempty"`
	// Reason says why a session is in state "failed".
	Reason string `json:"reason,omitempty"`
	// Node is the fleet node that holds the session, in a fleet's lists
	// (docs/FLEET.md); absent on a single node.
	Node string `json:"node,omitempty"`
}

// SessionList is the body of GET /v1/sessions.
type SessionList struct {
	Sessions []Session `json:"sessions"`
}

// ExecRequest is the body of POST /v1/sessions/{id}/exec. Exactly one of
// Command (run by the session's persistent shell) and Argv (run directly,
// changing no state) is required.
type ExecRequest struct {
	Command string   `json:"command,omitempty"`
	Argv    []string `json:"argv,omitempty"`
	// Stdin is text fed to the command; StdinBase64 takes exact bytes.
	Stdin       *string `json:"stdin,omitempty"`
	StdinBase64 *string `json:"stdin_base64,omitempty"`
	// Env and Cwd apply to this call only: in command mode the command
	// then runs in a subshell and changes no session state.
	Env       map[string]string `json:"env,omitempty"`
	Cwd       string            `json:"cwd,omitempty"`
	TimeoutMs int64             `json:"timeout_ms,omitempty"`
	// MaxOutputBytes caps each of stdout and stderr.
	MaxOutputBytes int64 `json:"max_output_bytes,omitempty"`
}

// RunRequest is the body of POST /v1/run: a fresh sandbox for one command,
// destroyed afterwards.
type RunRequest struct {
	Image  string  `json:"image,omitempty"`
	Limits *Limits `json:"limits,omitempty"`
	// Network is the run's egress, as CreateSessionRequest's.
	Network *NetworkPolicy `json:"network,omitempty"`
	ExecRequest
}

// ExecResult is the outcome of a command.
//
// Stdout and Stderr are text. When a stream's bytes are not valid UTF-8, the
// text has U+FFFD in place of the invalid bytes and StdoutBase64 (or
// StderrBase64) carries the exact bytes.
type ExecResult struct {
	Stdout       string  `json:"stdout"`
	Stderr       string  `json:"stderr"`
	StdoutBase64 string  `json:"stdout_base64,omitempty"`
	StderrBase64 string  `json:"stderr_base64,omitempty"`
	ExitCode     int     `json:"exit_code"`
	Signal       string  `json:"signal,omitempty"`
	DurationMs   float64 `json:"duration_ms"`
	TimedOut     bool    `json:"timed_out"`
	Truncated    bool    `json:"truncated"`
	// ShellRestarted says the session's shell ended (exit, exec, a kill, a
	// timeout in a builtin loop) and a new one took its place, with the last
	// known cwd and exported environment; other shell state was lost.
	ShellRestarted bool `json:"shell_restarted"`
	// OOMKilled says the kernel's OOM killer ended a process of the session
	// while the call ran, because the session hit its memory limit: the
	// command's own, any process of it (not only the last), or a background
	// process killed meanwhile. A kill before the call is not reported.
	OOMKilled bool `json:"oom_killed"`
}

// FileEntry describes one file in a session.
type FileEntry struct {
	Name string `json:"name"`
	Path string `json:"path"`
	// Type is "file", "dir", "symlink" or "other".
	Type string `json:"type"`
	Size int64  `json:"size"`
	// Mode is the permission bits in octal, such as "0644".
	Mode   string    `json:"mode"`
	MTime  time.Time `json:"mtime"`
	Target string    `json:"target,omitempty"`
}

// FileList is the body of GET /v1/sessions/{id}/files/list.
type FileList struct {
	Entries []FileEntry `json:"entries"`
}

// FileWritten answers PUT /v1/sessions/{id}/files and the archive upload.
type FileWritten struct {
	Path string `json:"path"`
	Size int64  `json:"size"`
}

// Image describes a stored image.
type Image struct {
	// Name is what sessions name the image by: lowercase letters, digits,
	// '.', '_' and '-', optionally with ":tag", such as "python:3.12-slim".
	Name string `json:"name"`
	// Digest is warren's digest of the root filesystem and the config.
	Digest string `json:"digest"`
	// Size is the size of the root filesystem's regular files.
	Size      int64     `json:"size"`
	CreatedAt time.Time `json:"created_at"`
	// Source is where the content came from: "host" (the built-in base
	// image), "rootfs" (a tar or a directory), "oci-layout",
	// "docker-archive", or the fully qualified reference of a pull.
	Source string `json:"source,omitempty"`
	// RepoDigest is the pulled manifest, "<repository>@sha256:<hex>".
	RepoDigest string `json:"repo_digest,omitempty"`
	// ImageID is the digest of the OCI image config the content came from.
	ImageID string `json:"image_id,omitempty"`
	// Platform is the OCI image's "os/arch[/variant]".
	Platform string `json:"platform,omitempty"`
	// Layers is the number of layers flattened into the root filesystem.
	Layers int `json:"layers,omitempty"`
	// Env ("K=V", under a session's own env), WorkingDir (a session's cwd
	// unless it names one) and User (who a session runs as unless it names
	// someone) are the defaults of sessions of the image.
	Env        []string `json:"env,omitempty"`
	WorkingDir string   `json:"working_dir,omitempty"`
	User       string   `json:"user,omitempty"`
	// Entrypoint and Cmd are the OCI image's default command; `warren run
	// --image NAME` without a command runs them, nothing else does.
	Entrypoint []string `json:"entrypoint,omitempty"`
	Cmd        []string `json:"cmd,omitempty"`
}

// ImageList is the body of GET /v1/images.
type ImageList struct {
	Images []Image `json:"images"`
}

// PullImageRequest is the body of POST /v1/images/pull.
type PullImageRequest struct {
	// Ref is the image reference, as docker takes it: "python:3.12-slim"
	// (Docker Hub), "ghcr.io/org/tool:v1", "busybox@sha256:<hex>".
	Ref string `json:"ref"`
	// Platform is "os/arch[/variant]"; default the daemon host's.
	Platform string `json:"platform,omitempty"`
	// Name is the local name; default the reference's last path component
	// with ":tag" unless the tag is latest.
	Name string `json:"name,omitempty"`
}

// PullProgress is one "progress" event of a streamed pull.
type PullProgress struct {
	// Status is "resolving", "waiting", "downloading", "downloaded",
	// "exists" (the content was stored already), "extracting" or
	// "storing".
	Status string `json:"status"`
	// Layer is the layer's index (1 is the bottom layer) of Layers; 0 for a
	// step of the whole image.
	Layer  int `json:"layer,omitempty"`
	Layers int `json:"layers,omitempty"`
	// Digest is the layer's digest.
	Digest string `json:"digest,omitempty"`
	// Current of Total bytes of the layer (compressed) are downloaded.
	Current int64 `json:"current"`
	Total   int64 `json:"total"`
}

// ImagePruneResult answers POST /v1/images/prune.
type ImagePruneResult struct {
	// Deleted are the digests of the content removed.
	Deleted []string `json:"deleted"`
	// ReclaimedBytes is the size of the removed content's regular files.
	ReclaimedBytes int64 `json:"reclaimed_bytes"`
}

// Stats is the body of GET /v1/stats.
type Stats struct {
	Sessions    int    `json:"sessions"`
	MaxSessions int    `json:"max_sessions"`
	CgroupMode  string `json:"cgroup_mode"`
	Version     string `json:"version"`
}

// Error is the envelope of every error response.
type Error struct {
	Error ErrorBody `json:"error"`
}

// ErrorBody carries an error's class and a sentence for people.
type ErrorBody struct {
	// Code is one of invalid_argument, unauthenticated, permission_denied,
	// not_found, conflict, too_large, resource_exhausted, unavailable,
	// internal.
	Code    string `json:"code"`
	Message string `json:"message"`
}

// StartProcessRequest is the body of POST /v1/sessions/{id}/processes: a
// command that runs on its own, independent of any connection, with its
// output kept for clients that come and go. Exactly one of Command (run by
// bash -c, or sh -c, in the session's current cwd and exported environment)
// and Argv is required.
type StartProcessRequest struct {
	Command string            `json:"command,omitempty"`
	Argv    []string          `json:"argv,omitempty"`
	Env     map[string]string `json:"env,omitempty"`
	Cwd     string            `json:"cwd,omitempty"`
	// TTY runs the process on a pseudo-terminal (stdout and stderr are then
	// one stream), Cols x Rows (default 80 x 24).
	TTY  bool `json:"tty,omitempty"`
	Cols int  `json:"cols,omitempty"`
	Rows int  `json:"rows,omitempty"`
	// Stdin keeps the process's stdin open for POST .../stdin; without it
	// the process reads an empty stdin. A TTY process always has one.
	Stdin bool `json:"stdin,omitempty"`
	// User runs the process as a user of the image other than the
	// session's: "root", a name of the image's /etc/passwd, "uid" or
	// "uid:gid". Its HOME, USER and LOGNAME follow.
	User string `json:"user,omitempty"`
}

// Process describes a process started through the processes API.
type Process struct {
	ID      string   `json:"id"`
	Command string   `json:"command,omitempty"`
	Argv    []string `json:"argv,omitempty"`
	TTY     bool     `json:"tty"`
	// State is "running" or "exited".
	State string `json:"state"`
	// Pid is the process id inside the sandbox.
	Pid       int        `json:"pid"`
	ExitCode  *int       `json:"exit_code,omitempty"`
	Signal    string     `json:"signal,omitempty"`
	StartedAt time.Time  `json:"started_at"`
	EndedAt   *time.Time `json:"ended_at,omitempty"`
	// OutputBytes is how many bytes of output the process produced so far:
	// the offset the next byte will have.
	OutputBytes int64 `json:"output_bytes"`
	// OutputStart is the oldest offset still kept; older bytes were dropped
	// from the bounded buffer.
	OutputStart int64 `json:"output_start"`
}

// ProcessList is the body of GET /v1/sessions/{id}/processes.
type ProcessList struct {
	Processes []Process `json:"processes"`
}

// SignalRequest is the body of POST .../processes/{pid}/signal. Signal is a
// name with or without "SIG" ("TERM", "SIGINT") or a number ("9").
type SignalRequest struct {
	Signal string `json:"signal"`
}

// ResizeRequest is the body of POST .../processes/{pid}/resize, for TTY
// processes; over the shell WebSocket the same fields travel as a text
// message {"type":"resize","cols":C,"rows":R}.
type ResizeRequest struct {
	Cols int `json:"cols"`
	Rows int `json:"rows"`
}

// StdinWritten answers POST .../processes/{pid}/stdin.
type StdinWritten struct {
	Written int64 `json:"written"`
}

// OutputChunk is the data of a server-sent event carrying output: "stdout"
// and "stderr" events of a streamed exec, "output" events of a process. The
// bytes are Text when they are valid UTF-8, else Base64.
type OutputChunk struct {
	// Offset is the position of the chunk's first byte in the process's
	// output (process output only).
	Offset *int64 `json:"offset,omitempty"`
	// Stream is "stdout" or "stderr" (process output only; a TTY process
	// writes only "stdout").
	Stream string `json:"stream,omitempty"`
	Text   string `json:"text,omitempty"`
	Base64 string `json:"base64,omitempty"`
}

// OutputGap is the data of a "gap" event: the bytes [From, To) were dropped
// from the bounded buffer before this client read them.
type OutputGap struct {
	From int64 `json:"from"`
	To   int64 `json:"to"`
}

// ProcessExit is the data of an "exit" event of a process's output.
type ProcessExit struct {
	ExitCode int    `json:"exit_code"`
	Signal   string `json:"signal,omitempty"`
}

// ShellMessage is a text message on the shell WebSocket. From the client:
// {"type":"resize","cols":C,"rows":R}; any other text message (one that is
// not a JSON object with a type) is terminal input. From the daemon:
// {"type":"process","id":"p1"} when the shell starts or is attached
// (reattach with ?process=ID), {"type":"exit","exit_code":N} before it
// closes, and {"type":"error","error":{...}} when the shell could not
// start, before it closes.
type ShellMessage struct {
	Type     string     `json:"type"`
	Cols     int        `json:"cols,omitempty"`
	Rows     int        `json:"rows,omitempty"`
	ID       string     `json:"id,omitempty"`
	ExitCode *int       `json:"exit_code,omitempty"`
	Signal   string     `json:"signal,omitempty"`
	Error    *ErrorBody `json:"error,omitempty"`
}

// CreateKeyRequest is the body of POST /v1/keys (admin).
type CreateKeyRequest struct {
	Tenant string `json:"tenant"`
	Name   string `json:"name,omitempty"`
	Admin  bool   `json:"admin,omitempty"`
	// ExpiresInSeconds, when set, makes the key stop working after that
	// long.
	ExpiresInSeconds int64 `json:"expires_in_seconds,omitempty"`
}

// Key describes an API key. The secret is never stored or shown again after
// creation.
type Key struct {
	ID        string     `json:"id"`
	Tenant    string     `json:"tenant"`
	Name      string     `json:"name,omitempty"`
	Admin     bool       `json:"admin"`
	CreatedAt time.Time  `json:"created_at"`
	ExpiresAt *time.Time `json:"expires_at,omitempty"`
	RevokedAt *time.Time `json:"revoked_at,omitempty"`
}

// KeyCreated answers POST /v1/keys: the key, with its secret this once.
type KeyCreated struct {
	Key
	// Secret is the whole key to send as "Authorization: Bearer <secret>".
	Secret string `json:"secret"`
}

// KeyList is the body of GET /v1/keys.
type KeyList struct {
	Keys []Key `json:"keys"`
}

// TokenRequest is the body of POST /v1/tokens: a short-lived token for the
// caller, for clients that cannot send headers (a browser's WebSocket or
// EventSource pass it as ?token=).
type TokenRequest struct {
	TTLSeconds int64 `json:"ttl_seconds,omitempty"`
}

// Token answers POST /v1/tokens.
type Token struct {
	Token     string    `json:"token"`
	ExpiresAt time.Time `json:"expires_at"`
}

// TenantQuota caps a tenant's use; zero fields take the daemon's defaults.
type TenantQuota struct {
	MaxSessions           int     `json:"max_sessions,omitempty"`
	MaxMemoryMB           int64   `json:"max_memory_mb,omitempty"`
	MaxCPUs               float64 `json:"max_cpus,omitempty"`
	MaxLifetimeSeconds    int64   `json:"max_lifetime_seconds,omitempty"`
	MaxExecTimeoutSeconds int64   `json:"max_exec_timeout_seconds,omitempty"`
	MaxWorkspaces         int     `json:"max_workspaces,omitempty"`
	MaxSnapshots          int     `json:"max_snapshots,omitempty"`
}

// TenantPolicy limits which programs exec may start: a convenience for
// operators, not a security boundary (the sandbox is the boundary).
type TenantPolicy struct {
	Allow []string `json:"allow,omitempty"`
	Deny  []string `json:"deny,omitempty"`
	// AllowPublicPorts lets the tenant's sessions serve ports without
	// authentication (PUT /v1/sessions/{id}/ports/{port}); absent: the
	// daemon's tenant_defaults.allow_public_ports.
	AllowPublicPorts *bool `json:"allow_public_ports,omitempty"`
	// Network is the ceiling of the tenant's sessions' network; absent:
	// none (every mode may be asked for).
	Network *TenantNetwork `json:"network,omitempty"`
}

// TenantNetwork is a tenant's network ceiling: a session asking beyond it
// (at create or PATCH) is refused with 403 permission_denied and the
// reason.
type TenantNetwork struct {
	// MaxMode is the widest mode: "none", "allowlist" or "open"; absent:
	// open, or allowlist when Allow is given.
	MaxMode string `json:"max_mode,omitempty"`
	// Allow, when given, is the maximum allow-list: each allow rule of a
	// session must fall within one of these (a name it matches, a
	// narrower wildcard, a range inside, the same port or one with every
	// port).
	Allow []string `json:"allow,omitempty"`
}

// Tenant is a tenant's settings (body of PUT /v1/tenants/{name}, and the
// answer of the tenant endpoints).
type Tenant struct {
	Name      string       `json:"name,omitempty"`
	Quota     TenantQuota  `json:"quota"`
	Policy    TenantPolicy `json:"policy"`
	UpdatedAt *time.Time   `json:"updated_at,omitempty"`
}

// TenantList is the body of GET /v1/tenants.
type TenantList struct {
	Tenants []Tenant `json:"tenants"`
}

// AuditRecord is one audited call: who, which tenant and session, what, the
// outcome and how long it took. Never secrets, file contents, command text
// or environment values.
type AuditRecord struct {
	Time       time.Time `json:"time"`
	Tenant     string    `json:"tenant,omitempty"`
	KeyID      string    `json:"key_id,omitempty"`
	Subject    string    `json:"subject,omitempty"`
	Session    string    `json:"session,omitempty"`
	Op         string    `json:"op"`
	Target     string    `json:"target,omitempty"`
	Status     int       `json:"status"`
	Outcome    string    `json:"outcome"`
	DurationMs float64   `json:"duration_ms"`
	// Node is the fleet node that served the call (docs/FLEET.md); absent
	// on a single node.
	Node string `json:"node,omitempty"`
}

// AuditList is the body of GET /v1/audit.
type AuditList struct {
	Records []AuditRecord `json:"records"`
}

// CreateWorkspaceRequest is the body of POST /v1/workspaces.
type CreateWorkspaceRequest struct {
	// Name is chosen by the client ([a-z0-9][a-z0-9_-]{0,62}).
	Name string `json:"name"`
	// SizeMB caps the workspace's files (default: the default disk limit
	// of a session).
	SizeMB int64 `json:"size_mb,omitempty"`
	// Shared workspaces may be mounted read-write by several sessions at
	// once.
	Shared bool `json:"shared,omitempty"`
}

// Workspace describes a workspace: a named directory that outlives
// sessions, mounted at /workspace in the sessions that name it.
type Workspace struct {
	Name      string    `json:"name"`
	SizeMB    int64     `json:"size_mb"`
	Shared    bool      `json:"shared"`
	UsedBytes int64     `json:"used_bytes"`
	CreatedAt time.Time `json:"created_at"`
	// MountedBy are the sessions that have it mounted.
	MountedBy []WorkspaceMount `json:"mounted_by"`
}

// WorkspaceMount is one session's mount of a workspace.
type WorkspaceMount struct {
	Session string `json:"session"`
	// Mode is "rw" or "ro".
	Mode string `json:"mode"`
}

// WorkspaceList is the body of GET /v1/workspaces.
type WorkspaceList struct {
	Workspaces []Workspace `json:"workspaces"`
}

// SnapshotRequest is the body of POST /v1/sessions/{id}/snapshot.
type SnapshotRequest struct {
	Name string `json:"name"`
}

// Snapshot describes a snapshot: the files of a session at one moment, a
// read-only layer that new sessions start from.
type Snapshot struct {
	Name        string `json:"name"`
	Image       string `json:"image"`
	ImageDigest string `json:"image_digest"`
	// Session is the session it was taken from ("" if imported).
	Session   string    `json:"session,omitempty"`
	SizeBytes int64     `json:"size_bytes"`
	CreatedAt time.Time `json:"created_at"`
	// AutoDelete marks the snapshot a fork took: it is deleted with the
	// last session that uses it.
	AutoDelete bool `json:"auto_delete"`
	// UsedBy are the sessions started from it.
	UsedBy []string `json:"used_by"`
}

// SnapshotList is the body of GET /v1/snapshots.
type SnapshotList struct {
	Snapshots []Snapshot `json:"snapshots"`
}

// ForkRequest is the body of POST /v1/sessions/{id}/fork.
type ForkRequest struct {
	// Count is the number of new sessions, 1 to 10 (default: one per id
	// in IDs, else 1).
	Count int `json:"count,omitempty"`
	// IDs are the new sessions' ids (default: generated).
	IDs []string `json:"ids,omitempty"`
	// Snapshot names the snapshot the forks start from, kept until
	// deleted; without it the fork's snapshot goes with the last fork.
	Snapshot string `json:"snapshot,omitempty"`
}

// ForkResult is the answer to POST /v1/sessions/{id}/fork.
type ForkResult struct {
	Snapshot Snapshot  `json:"snapshot"`
	Sessions []Session `json:"sessions"`
}
