// Package audit records every mutating call to the daemon (who, which
// tenant and session, what operation, the outcome and how long it took) as
// JSON lines, and answers queries over them. It never records secrets, file
// contents, command text or environment values: only what identifies the
// call.
package audit

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// Record is one audited call.
type Record struct {
	Time    time.Time `json:"time"`
	Tenant  string    `json:"tenant,omitempty"`
	KeyID   string    `json:"key_id,omitempty"`
	Subject string    `json:"subject,omitempty"` // a JWT's sub
	Session string    `json:"session,omitempty"`
	Op      string    `json:"op"`               // such as "POST /v1/sessions/{id}/exec"
	Target  string    `json:"target,omitempty"` // a file path, a process or key id; never contents
	// Status is the HTTP status REST answered; 0 for the calls of other
	// transports (gRPC, MCP), which answer none of their own.
	Status int `json:"status,omitempty"`
	// Outcome is "ok" or the class of the call's error (errdefs: such as
	// "not_found", "unauthenticated", "canceled"), alike on every
	// transport.
	Outcome    string  `json:"outcome"`
	DurationMs float64 `json:"duration_ms"`
	// Node is the fleet node that wrote the record (docs/FLEET.md); empty
	// on a single node. Each node keeps its own log.
	Node string `json:"node,omitempty"`
}

// DefaultMaxBytes is when the log rotates: the current file becomes
// audit.log.1 (replacing the older one).
const DefaultMaxBytes = 64 << 20

// Log is the append-only audit log.
type Log struct {
	path     string
	maxBytes int64
	// node is stamped on every record (SetNode); set before the first.
	node string

	mu   sync.Mutex // guards f and size
	f    *os.File
	size int64
}

// SetNode names the fleet node every record of the log comes from; call it
// before the log is in use.
func (l *Log) SetNode(name string) { l.node = name }

// Open opens (creating, mode 0600) the log at path.
func Open(path string) (*Log, error) {
	l := &Log{path: path, maxBytes: DefaultMaxBytes}
	if err := l.openLocked(); err != nil {
		return nil, err
	}
	return l, nil
}

func (l *Log) openLocked() error {
	f, err := os.OpenFile(l.path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("open audit log: %w", err)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return err
	}
	l.f, l.size = f, fi.Size()
	return nil
}

// Record appends r. A failure to write is returned for the caller to log;
// the audited call itself is not undone.
func (l *Log) Record(r Record) error {
	if r.Node == "" {
		r.Node = l.node
	}
	if r.Time.IsZero() {
		r.Time = time.Now()
	}
	r.Time = r.Time.UTC()
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	b = append(b, '\n')
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.f == nil {
		return fmt.Errorf("audit log closed")
	}
	if l.size+int64(len(b)) > l.maxBytes {
		l.f.Close()
		// A rotation that fails keeps the record: it goes on the end of
		// the current file, which then grows past its cap until a
		// rotation succeeds, and the error says so.
		rerr := os.Rename(l.path, l.path+".1")
		if err := l.openLocked(); err != nil {
			return err
		}
		if rerr != nil {
			n, err := l.f.Write(b)
			l.size += int64(n)
			return errors.Join(fmt.Errorf("rotate the audit log: %w", rerr), err)
		}
	}
	n, err := l.f.Write(b)
	l.size += int64(n)
	return err
}

// Close closes the log.
func (l *Log) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.f == nil {
		return nil
	}
	err := l.f.Close()
	l.f = nil
	return err
}

// Filter selects records; zero fields match everything.
type Filter struct {
	Tenant  string
	Session string
	Op      string
	Since   time.Time
	Until   time.Time
	// Limit keeps the newest Limit records (default 1000).
	Limit int
}

func (f *Filter) match(r *Record) bool {
	return (f.Tenant == "" || r.Tenant == f.Tenant) &&
		(f.Session == "" || r.Session == f.Session) &&
		(f.Op == "" || r.Op == f.Op) &&
		(f.Since.IsZero() || !r.Time.Before(f.Since)) &&
		(f.Until.IsZero() || r.Time.Before(f.Until))
}

// Query returns the matching records, oldest first, from the rotated file
// and the current one.
func (l *Log) Query(ctx context.Context, f Filter) ([]Record, error) {
	if f.Limit <= 0 {
		f.Limit = 1000
	}
	var out []Record
	for _, p := range []string{l.path + ".1", l.path} {
		file, err := os.Open(p)
		if err != nil {
			if os.IsNotExist(err) {
				continue
			}
			return nil, err
		}
		sc := bufio.NewScanner(file)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			if ctx.Err() != nil {
				file.Close()
				return nil, ctx.Err()
			}
			var r Record
			if json.Unmarshal(sc.Bytes(), &r) != nil || !f.match(&r) {
				continue
			}
			out = append(out, r)
			if len(out) > f.Limit {
				out = out[1:]
			}
		}
		file.Close()
		if err := sc.Err(); err != nil {
			return nil, fmt.Errorf("read %s: %w", filepath.Base(p), err)
		}
	}
	return out, nil
}
