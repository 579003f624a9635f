package e2b

import (
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/warrenhq/warren/internal/audit"
	"github.com/warrenhq/warren/internal/edge"
)

// A sandbox's logs are what warren keeps of it: the records of its audit
// trail (created, paused, commands started, files written, killed ...),
// which every transport writes. E2B's own logs are its VM's and envd's,
// which warren does not have; a daemon without an audit log has none.

// logEntry is E2B's SandboxLogEntry.
type logEntry struct {
	Timestamp time.Time         `json:"timestamp"`
	Level     string            `json:"level"`
	Message   string            `json:"message"`
	Fields    map[string]string `json:"fields"`
}

// logLine is E2B's SandboxLog: the line is JSON, as envd's are (the E2B
// CLI parses it).
type logLine struct {
	Timestamp time.Time `json:"timestamp"`
	Line      string    `json:"line"`
}

var levels = map[string]int{"debug": 0, "info": 1, "warn": 2, "error": 3}

// entryOf turns an audit record into a log entry: info if it went well,
// warn for a refusal of the caller's (4xx), error otherwise.
func entryOf(r audit.Record) logEntry {
	level := "info"
	if r.Outcome != "ok" {
		level = "warn"
		if r.Status >= 500 || r.Outcome == "internal" || r.Outcome == "unavailable" {
			level = "error"
		}
	}
	msg := r.Op
	if r.Target != "" {
		msg += " " + r.Target
	}
	msg += ": " + r.Outcome
	f := map[string]string{"logger": "warren.audit", "op": r.Op, "outcome": r.Outcome,
		"duration_ms": strconv.FormatFloat(r.DurationMs, 'f', -1, 64)}
	if r.Target != "" {
		f["target"] = r.Target
	}
	if r.KeyID != "" {
		f["key_id"] = r.KeyID
	}
	if r.Status != 0 {
		f["status"] = strconv.Itoa(r.Status)
	}
	return logEntry{Timestamp: r.Time.UTC(), Level: level, Message: msg, Fields: f}
}

// sandboxLogs returns the audit records of the caller's sandbox id since
// since, oldest first; a sandbox that is not live is a 404.
func (s *Server) sandboxLogs(w http.ResponseWriter, r *http.Request, since time.Time) ([]audit.Record, bool) {
	rec, err := s.record(r.Context(), r.PathValue("id"))
	if err != nil {
		s.writeError(w, r, err)
		return nil, false
	}
	l := s.edge.AuditLog()
	if l == nil {
		return nil, true
	}
	recs, err := l.Query(r.Context(), audit.Filter{Tenant: edge.TenantOf(r.Context()), Session: rec.ID, Since: since, Limit: 10000})
	if err != nil {
		s.writeError(w, r, err)
		return nil, false
	}
	// A new session of an old id is another sandbox.
	recs = slices.DeleteFunc(recs, func(a audit.Record) bool { return a.Time.Before(rec.CreatedAt.Add(-time.Second)) })
	slices.SortStableFunc(recs, func(a, b audit.Record) int { return a.Time.Compare(b.Time) })
	return recs, true
}

// millis reads a query parameter of Unix milliseconds.
func millis(r *http.Request, name string) (time.Time, error) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return time.Time{}, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 {
		return time.Time{}, invalid("%s must be a Unix time in milliseconds", name)
	}
	return time.UnixMilli(n), nil
}

// logLimit reads limit: 1000 by default, at most 1000.
func logLimit(r *http.Request) (int, error) {
	v := r.URL.Query().Get("limit")
	if v == "" {
		return 1000, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 || n > 1000 {
		return 0, invalid("limit %q: want 0 to 1000", v)
	}
	return n, nil
}

// logsV1 serves the deprecated GET /sandboxes/{id}/logs (start, limit),
// which the E2B CLI calls.
func (s *Server) logsV1(w http.ResponseWriter, r *http.Request) {
	since, err := millis(r, "start")
	if err == nil {
		var limit int
		if limit, err = logLimit(r); err == nil {
			recs, ok := s.sandboxLogs(w, r, since)
			if !ok {
				return
			}
			recs = recs[:min(len(recs), limit)]
			out := struct {
				Logs       []logLine  `json:"logs"`
				LogEntries []logEntry `json:"logEntries"`
			}{Logs: []logLine{}, LogEntries: []logEntry{}}
			for _, a := range recs {
				e := entryOf(a)
				line := map[string]string{"level": e.Level, "message": e.Message}
				for k, v := range e.Fields {
					line[k] = v
				}
				b, _ := json.Marshal(line)
				out.Logs = append(out.Logs, logLine{Timestamp: e.Timestamp, Line: string(b)})
				out.LogEntries = append(out.LogEntries, e)
			}
			writeJSON(w, http.StatusOK, out)
			return
		}
	}
	s.writeError(w, r, err)
}

// logsV2 serves GET /v2/sandboxes/{id}/logs: cursor (ms), limit,
// direction, level (the least one shown) and search (a substring of the
// message).
func (s *Server) logsV2(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	cursor, err := millis(r, "cursor")
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	limit, err := logLimit(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	dir := q.Get("direction")
	if dir != "" && dir != "forward" && dir != "backward" {
		s.writeError(w, r, invalid("direction %q: want forward or backward", dir))
		return
	}
	minLevel := 0
	if v := q.Get("level"); v != "" {
		l, ok := levels[v]
		if !ok {
			s.writeError(w, r, invalid("level %q: want debug, info, warn or error", v))
			return
		}
		minLevel = l
	}
	var since time.Time
	if dir != "backward" {
		since = cursor
	}
	recs, ok := s.sandboxLogs(w, r, since)
	if !ok {
		return
	}
	out := []logEntry{}
	for _, a := range recs {
		e := entryOf(a)
		if levels[e.Level] < minLevel || !strings.Contains(e.Message, q.Get("search")) {
			continue
		}
		if dir == "backward" && !cursor.IsZero() && e.Timestamp.After(cursor) {
			continue
		}
		out = append(out, e)
	}
	if dir == "backward" {
		slices.Reverse(out)
	}
	writeJSON(w, http.StatusOK, map[string]any{"logs": out[:min(len(out), limit)]})
}
