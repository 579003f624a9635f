// Package api holds the JSON types of warren's REST API (v1). The daemon's
// handlers and the Go client both use them; api/openapi.yaml documents the
// same shapes for other languages, and a test keeps the two in step.
package api

import "time"

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
	// Network is "none" (the only mode so far: loopback only).
	Network string `json:"network,omitempty"`
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
}

// Usage is a session's live resource use.
type Usage struct {
	MemoryBytes uint64  `json:"memory_bytes"`
	Pids        uint64  `json:"pids"`
	CPUSeconds  float64 `json:"cpu_seconds"`
	// DiskBytes is the size of the session's writable layer.
	DiskBytes int64 `json:"disk_bytes"`
}

// Session describes one session.
type Session struct {
	ID         string    `json:"id"`
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
	// OOMKilled says the kernel's OOM killer ended a process of the command
	// because the session hit its memory limit.
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
	Name      string    `json:"name"`
	Digest    string    `json:"digest"`
	Size      int64     `json:"size"`
	CreatedAt time.Time `json:"created_at"`
}

// ImageList is the body of GET /v1/images.
type ImageList struct {
	Images []Image `json:"images"`
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
