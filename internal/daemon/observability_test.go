package daemon_test

import (
	"bufio"
	"bytes"
	"database/sql"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	_ "modernc.org/sqlite"

	"github.com/warrenhq/warren/api"
	"github.com/warrenhq/warren/client"
	"github.com/warrenhq/warren/internal/config"
	"github.com/warrenhq/warren/internal/daemon/daemontest"
	"github.com/warrenhq/warren/internal/testutil"
)

// scrape reads the daemon's metrics with the admin key: "name{labels}" to
// value.
func scrape(t *testing.T, h *daemontest.Harness) map[string]float64 {
	t.Helper()
	r := as(t, h, bearer(h.AdminKey), "GET", "/metrics", "")
	if r.status != http.StatusOK {
		t.Fatalf("GET /metrics = %d %s", r.status, r.body)
	}
	out := map[string]float64{}
	sc := bufio.NewScanner(bytes.NewReader(r.body))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			t.Fatalf("metrics line %q: %v", line, err)
		}
		out[line[:i]] = v
	}
	return out
}

func TestMetrics(t *testing.T) {
	h := daemontest.Start(t, nil)
	c := h.Client

	// Only admins read them: they name tenants.
	if r := as(t, h, nil, "GET", "/metrics", ""); r.status != http.StatusUnauthorized {
		t.Errorf("GET /metrics without a credential = %d, want 401", r.status)
	}
	alice := newKey(t, h, api.CreateKeyRequest{Tenant: "alice"})
	if r := as(t, h, bearer(alice.Secret), "GET", "/metrics", ""); r.status != http.StatusForbidden || r.err.Error.Code != "permission_denied" {
		t.Errorf("GET /metrics with a tenant's key = %d %s, want 403 permission_denied", r.status, r.body)
	}

	before := scrape(t, h)
	for _, name := range []string{
		`warren_sessions{state="running"}`, `warren_session_creates_total{outcome="ok"}`,
		`warren_reconciler_actions_total{action="adopted"}`, `warren_reaper_deletions_total{reason="idle"}`,
		"warren_sessions_max", "warren_data_dir_free_bytes", "go_goroutines", "process_open_fds",
	} {
		if _, ok := before[name]; !ok {
			t.Errorf("the metrics lack %s", name)
		}
	}
	if _, err := c.CreateSession(bg, &api.CreateSessionRequest{ID: "m1"}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateSession(bg, &api.CreateSessionRequest{ID: "Not Valid"}); client.Code(err) != "invalid_argument" {
		t.Fatalf("create with a bad id = %v", err)
	}
	if _, err := c.Exec(bg, "m1", &api.ExecRequest{Command: "echo hi; exit 3"}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Exec(bg, "nosuch", &api.ExecRequest{Command: "true"}); !client.IsNotFound(err) {
		t.Fatalf("exec in a missing session = %v", err)
	}
	if _, err := c.WriteFile(bg, "m1", "/tmp/f", strings.NewReader("x"), 0); err != nil {
		t.Fatal(err)
	}
	if _, err := c.StartProcess(bg, "m1", &api.StartProcessRequest{Command: "sleep 100"}); err != nil {
		t.Fatal(err)
	}
	during := scrape(t, h)
	if err := c.DeleteSession(bg, "m1"); err != nil {
		t.Fatal(err)
	}
	after := scrape(t, h)

	if got := during[`warren_sessions{state="running"}`]; got != 1 {
		t.Errorf("running sessions with m1 = %v, want 1", got)
	}
	if got := during[`warren_tenant_sessions{tenant="default"}`]; got != 1 {
		t.Errorf("sessions of tenant default with m1 = %v, want 1", got)
	}
	if got := after[`warren_sessions{state="running"}`]; got != 0 {
		t.Errorf("running sessions after the delete = %v, want 0", got)
	}
	if _, ok := after[`warren_tenant_sessions{tenant="default"}`]; ok {
		t.Errorf("a tenant without sessions is still listed")
	}
	moved := []struct {
		name string
		want float64
	}{
		{`warren_session_creates_total{outcome="ok"}`, 1},
		{`warren_session_creates_total{outcome="invalid_argument"}`, 1},
		{"warren_session_create_duration_seconds_count", 1},
		{`warren_execs_total{outcome="ok"}`, 1},
		{`warren_execs_total{outcome="not_found"}`, 1},
		{"warren_exec_duration_seconds_count", 1},
		{`warren_file_operations_total{op="write",outcome="ok"}`, 1},
		{`warren_process_starts_total{outcome="ok"}`, 1},
		{`warren_session_deletes_total{outcome="ok"}`, 1},
	}
	for _, m := range moved {
		if got := after[m.name] - before[m.name]; got != m.want {
			t.Errorf("%s moved by %v, want %v", m.name, got, m.want)
		}
	}
	// No session id ever becomes a label.
	for name := range after {
		if strings.Contains(name, "m1") {
			t.Errorf("a metric names the session: %s", name)
		}
	}
}

// syncBuffer is a log destination the daemon and the test share.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// lines returns the JSON log lines written so far.
func (s *syncBuffer) lines() []map[string]any {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []map[string]any
	for _, l := range bytes.Split(s.b.Bytes(), []byte("\n")) {
		var m map[string]any
		if json.Unmarshal(l, &m) == nil {
			out = append(out, m)
		}
	}
	return out
}

// waitLine waits for a log line with msg and the given attributes.
func (s *syncBuffer) waitLine(t *testing.T, msg string, attrs map[string]any) map[string]any {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
	lines:
		for _, l := range s.lines() {
			if l["msg"] != msg {
				continue
			}
			for k, v := range attrs {
				if l[k] != v {
					continue lines
				}
			}
			return l
		}
		if time.Now().After(deadline) {
			t.Fatalf("no log line %q with %v", msg, attrs)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestRequestIDs(t *testing.T) {
	logs := &syncBuffer{}
	h := daemontest.StartWithLog(t, nil, slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})))
	send := func(method, path, body, id string) *http.Response {
		t.Helper()
		req, _ := http.NewRequest(method, h.URL+path, strings.NewReader(body))
		if id != "" {
			req.Header.Set("X-Request-ID", id)
		}
		resp, err := h.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp
	}

	// A sane id from the client is echoed, and every line about the request
	// carries it: the access log and the session manager's.
	resp := send("POST", "/v1/sessions", `{"id":"r1"}`, "client-id-1")
	if resp.StatusCode != http.StatusCreated || resp.Header.Get("X-Request-ID") != "client-id-1" {
		t.Fatalf("create = %d, X-Request-ID %q; want 201 and the client's id", resp.StatusCode, resp.Header.Get("X-Request-ID"))
	}
	access := logs.waitLine(t, "request", map[string]any{"request_id": "client-id-1"})
	want := map[string]any{"method": "POST", "route": "POST /v1/sessions", "status": float64(201), "tenant": "default", "session_id": "r1", "level": "INFO"}
	for k, v := range want {
		if access[k] != v {
			t.Errorf("access log %s = %v, want %v (line %v)", k, access[k], v, access)
		}
	}
	if _, ok := access["duration"]; !ok {
		t.Errorf("the access log has no duration: %v", access)
	}
	logs.waitLine(t, "session created", map[string]any{"request_id": "client-id-1", "tenant": "default", "session_id": "r1"})

	// Without an id, or with one that is not sane, the daemon makes one up.
	generated := regexp.MustCompile(`^[0-9a-f]{24}$`)
	for _, id := range []string{"", "has space", strings.Repeat("a", 129), "-leading-dash"} {
		resp := send("GET", "/v1/sessions/r1", "", id)
		if got := resp.Header.Get("X-Request-ID"); !generated.MatchString(got) {
			t.Errorf("X-Request-ID for a request with %q = %q, want a fresh id", id, got)
		}
	}

	// A refused request is logged too, without a tenant.
	req, _ := http.NewRequest("GET", h.URL+"/v1/sessions", nil)
	req.Header.Set("X-Request-ID", "anonymous-1")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized || resp.Header.Get("X-Request-ID") != "anonymous-1" {
		t.Errorf("unauthenticated list = %d, X-Request-ID %q", resp.StatusCode, resp.Header.Get("X-Request-ID"))
	}
	if l := logs.waitLine(t, "request", map[string]any{"request_id": "anonymous-1"}); l["status"] != float64(401) || l["tenant"] != nil {
		t.Errorf("access log of a refused request = %v", l)
	}

	// The path names the session of a delete.
	send("DELETE", "/v1/sessions/r1", "", "client-id-2")
	logs.waitLine(t, "request", map[string]any{"request_id": "client-id-2", "session_id": "r1", "route": "DELETE /v1/sessions/{id}", "status": float64(204)})
	logs.waitLine(t, "session deleted", map[string]any{"request_id": "client-id-2", "session_id": "r1", "tenant": "default"})

	// The other transports get ids and access lines as well.
	resp = send("POST", "/mcp", `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, "mcp-1")
	if resp.Header.Get("X-Request-ID") != "mcp-1" {
		t.Errorf("MCP X-Request-ID = %q", resp.Header.Get("X-Request-ID"))
	}
	logs.waitLine(t, "request", map[string]any{"request_id": "mcp-1", "path": "/mcp", "tenant": "default"})

	// Probes that succeed are logged at debug level only.
	send("GET", "/healthz", "", "probe-1")
	if l := logs.waitLine(t, "request", map[string]any{"request_id": "probe-1"}); l["level"] != "DEBUG" {
		t.Errorf("a healthy probe is logged at %v, want DEBUG", l["level"])
	}
}

// readyz calls /readyz through the daemon's handler, which keeps answering
// while the listener is closed for shutdown.
func readyz(h *daemontest.Harness) (int, api.Error) {
	rec := httptest.NewRecorder()
	h.Daemon.API().Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/readyz", nil))
	var e api.Error
	json.Unmarshal(rec.Body.Bytes(), &e)
	return rec.Code, e
}

// waitReady waits until /readyz answers status, and returns its error.
func waitReady(t *testing.T, h *daemontest.Harness, status int) api.Error {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		got, e := readyz(h)
		if got == status {
			return e
		}
		if time.Now().After(deadline) {
			t.Fatalf("/readyz = %d %+v, want %d", got, e, status)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestReadyz(t *testing.T) {
	h := daemontest.Start(t, nil)
	if r := as(t, h, nil, "GET", "/readyz", ""); r.status != http.StatusOK || !strings.Contains(string(r.body), `"ready"`) {
		t.Fatalf("GET /readyz = %d %s, want 200 ready", r.status, r.body)
	}

	// The store stops taking writes: another process holds its write lock.
	db, err := sql.Open("sqlite", "file:"+filepath.Join(h.DataDir, "warren.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	conn, err := db.Conn(bg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.ExecContext(bg, "BEGIN IMMEDIATE"); err != nil {
		t.Fatal(err)
	}
	e := waitReady(t, h, http.StatusServiceUnavailable)
	if e.Error.Code != "unavailable" || !strings.Contains(e.Error.Message, "store") {
		t.Errorf("/readyz with the store locked = %+v, want unavailable naming the store", e)
	}
	if r := as(t, h, nil, "GET", "/healthz", ""); r.status != http.StatusOK {
		t.Errorf("/healthz while not ready = %d, want 200: liveness is not readiness", r.status)
	}
	if _, err := conn.ExecContext(bg, "ROLLBACK"); err != nil {
		t.Fatal(err)
	}
	conn.Close()
	waitReady(t, h, http.StatusOK)

	// Shutdown: a command in flight holds the daemon in its grace period,
	// and /readyz says it is going away.
	if _, err := h.Client.CreateSession(bg, &api.CreateSessionRequest{ID: "busy"}); err != nil {
		t.Fatal(err)
	}
	execDone := make(chan struct{})
	go func() {
		defer close(execDone)
		h.Client.Exec(bg, "busy", &api.ExecRequest{Command: "sleep 30"})
	}()
	time.Sleep(200 * time.Millisecond)
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		h.Stop()
	}()
	e = waitReady(t, h, http.StatusServiceUnavailable)
	if e.Error.Code != "unavailable" || !strings.Contains(e.Error.Message, "shutting down") {
		t.Errorf("/readyz during shutdown = %+v, want unavailable: shutting down", e)
	}
	select {
	case <-stopped:
		t.Errorf("the daemon had stopped before /readyz was asked; the test did not see shutdown in progress")
	default:
	}
	<-stopped
	<-execDone
}

// freeBytes is the free space of dir's filesystem.
func freeBytes(t *testing.T, dir string) int64 {
	t.Helper()
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	return int64(st.Bavail) * st.Bsize
}

// fillTo writes path until dir's filesystem has at most left bytes free
// (0: until it is full).
func fillTo(t *testing.T, dir, path string, left int64) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 1<<20)
	for freeBytes(t, dir) > left {
		n := min(int64(len(buf)), max(freeBytes(t, dir)-left, 4096))
		if _, err := f.Write(buf[:n]); err != nil {
			if errors.Is(err, syscall.ENOSPC) {
				return
			}
			t.Fatal(err)
		}
	}
}

func TestDiskFull(t *testing.T) {
	var dataDir string
	h := daemontest.Start(t, func(c *config.Config) {
		dataDir = testutil.Tmpfs(t, 128)
		c.DataDir = dataDir
		c.Session.MinFreeDiskMB = 16
		// Limits are backed by free space (disk.overcommit off): the
		// default 1 GiB does not fit on this filesystem.
		c.Session.DefaultLimits.DiskMB = 16
	})
	c := h.Client
	if _, err := c.CreateSession(bg, &api.CreateSessionRequest{ID: "a"}); err != nil {
		t.Fatal(err)
	}
	filler := filepath.Join(dataDir, "filler")
	fillTo(t, dataDir, filler, 8<<20)

	// New sessions are refused with the reason; the running one works on.
	_, err := c.CreateSession(bg, &api.CreateSessionRequest{ID: "b"})
	if client.Code(err) != "unavailable" || !strings.Contains(err.Error(), "disk is nearly full") {
		t.Errorf("create with 8 MiB free of the 16 kept = %v, want unavailable: disk is nearly full", err)
	}
	if r, err := c.Exec(bg, "a", &api.ExecRequest{Command: "echo still here"}); err != nil || r.Stdout != "still here\n" {
		t.Errorf("exec in a running session on a nearly full disk = %+v, %v", r, err)
	}
	e := waitReady(t, h, http.StatusServiceUnavailable)
	if !strings.Contains(e.Error.Message, "disk is nearly full") {
		t.Errorf("/readyz on a nearly full disk = %+v", e)
	}
	m := scrape(t, h)
	if m[`warren_session_creates_total{outcome="unavailable"}`] != 1 || m["warren_data_dir_free_bytes"] > 16<<20 || m["warren_data_dir_min_free_bytes"] != 16<<20 {
		t.Errorf("metrics on a nearly full disk: creates unavailable %v, free %v, min %v", m[`warren_session_creates_total{outcome="unavailable"}`],
			m["warren_data_dir_free_bytes"], m["warren_data_dir_min_free_bytes"])
	}

	// Completely full: the running session still answers.
	fillTo(t, dataDir, filler, 0)
	if r, err := c.Exec(bg, "a", &api.ExecRequest{Command: "echo full"}); err != nil || r.Stdout != "full\n" {
		t.Errorf("exec in a running session on a full disk = %+v, %v", r, err)
	}
	if _, err := c.CreateSession(bg, &api.CreateSessionRequest{ID: "b"}); client.Code(err) != "unavailable" {
		t.Errorf("create on a full disk = %v, want unavailable", err)
	}

	// Room again: creates and readiness come back.
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateSession(bg, &api.CreateSessionRequest{ID: "b"}); err != nil {
		t.Errorf("create once there is room again = %v", err)
	}
	waitReady(t, h, http.StatusOK)

	// The store came through sound.
	h.Stop()
	db, err := sql.Open("sqlite", "file:"+filepath.Join(dataDir, "warren.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var check string
	if err := db.QueryRow("PRAGMA integrity_check").Scan(&check); err != nil || check != "ok" {
		t.Errorf("integrity_check of the store = %q, %v; want ok", check, err)
	}
}

// TestUsageDisk checks that a session's usage follows what it writes.
func TestUsageDisk(t *testing.T) {
	h := daemontest.Start(t, nil)
	c := h.Client
	if _, err := c.CreateSession(bg, &api.CreateSessionRequest{ID: "u"}); err != nil {
		t.Fatal(err)
	}
	usage := func() int64 {
		t.Helper()
		s, err := c.GetSession(bg, "u")
		if err != nil || s.Usage == nil {
			t.Fatalf("GetSession = %+v, %v; want usage", s, err)
		}
		return s.Usage.DiskBytes
	}
	before := usage()
	const size = 8 << 20
	if _, err := c.WriteFile(bg, "u", "/workspace/big", bytes.NewReader(make([]byte, size)), 0); err != nil {
		t.Fatal(err)
	}
	// The file is written through the page cache; the layer's filesystem
	// counts it at once.
	if after := usage(); after-before < size*9/10 {
		t.Errorf("disk usage went from %d to %d after writing %d bytes", before, after, size)
	}
	if _, err := c.Exec(bg, "u", &api.ExecRequest{Command: "rm /workspace/big && sync"}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for usage() > before+size/2 {
		if time.Now().After(deadline) {
			t.Fatalf("disk usage stayed at %d after the file was removed (%d before it was written)", usage(), before)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestNoexecDataDir: a data directory on a noexec filesystem (hardened
// hosts mount /var so) still runs sessions: the sandbox program runs from
// a sealed memfd, never from a file under the data directory.
func TestNoexecDataDir(t *testing.T) {
	var dataDir string
	h := daemontest.Start(t, func(c *config.Config) {
		dataDir = testutil.NoexecTmpfs(t, 512)
		c.DataDir = dataDir
		c.Session.DefaultLimits.DiskMB = 64 // backed by the 512 MiB (disk.overcommit off)
	})
	if _, err := h.Client.CreateSession(bg, &api.CreateSessionRequest{ID: "nx"}); err != nil {
		t.Fatal(err)
	}
	r, err := h.Client.Exec(bg, "nx", &api.ExecRequest{Command: "printf '#!/bin/sh\\necho ran\\n' > /tmp/s && chmod +x /tmp/s && /tmp/s"})
	if err != nil || r.Stdout != "ran\n" {
		t.Fatalf("exec in a session on a noexec data directory = %+v, %v", r, err)
	}
	if _, err := os.Stat(filepath.Join(dataDir, "bin")); !os.IsNotExist(err) {
		t.Errorf("the sandbox program went to the data directory: %v", err)
	}
}
