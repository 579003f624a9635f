package store

import (
	"context"
	"database/sql"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/session"
	"github.com/warrenhq/warren/internal/testutil"
)

func TestHeartbeat(t *testing.T) {
	path := dbPath(t)
	s := mustOpen(t, path)
	defer mustClose(t, s)
	for range 2 {
		if err := s.Heartbeat(t.Context()); err != nil {
			t.Fatalf("Heartbeat() = %v, want nil", err)
		}
	}
	// Another process holds the write lock: the heartbeat gives up when its
	// context ends, and says the store is unavailable.
	other, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	conn, err := other.Conn(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(t.Context(), "BEGIN IMMEDIATE"); err != nil {
		t.Fatal(err)
	}
	defer conn.ExecContext(context.Background(), "ROLLBACK")
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	err = s.Heartbeat(ctx)
	if !errdefs.Is(err, errdefs.ErrUnavailable) {
		t.Errorf("Heartbeat() with the write lock held elsewhere = %v (class %v), want unavailable", err, errdefs.ClassOf(err))
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("Heartbeat() took %v past its context's end", d)
	}
}

// TestDiskFull fills the store's filesystem: writes fail as unavailable,
// not internal, the database stays sound, and it takes writes again once
// there is room.
func TestDiskFull(t *testing.T) {
	dir := testutil.Tmpfs(t, 4)
	s := mustOpen(t, filepath.Join(dir, "warren.db"))
	defer mustClose(t, s)
	ctx := t.Context()
	newSession := func(id string, envBytes int) *session.Session {
		now := time.Now().UTC()
		return &session.Session{ID: id, Tenant: "t", Name: "n-" + id, Image: "base", State: session.StateRunning,
			CreatedAt: now, LastUsedAt: now, IdleTTL: time.Minute, Env: map[string]string{"BIG": strings.Repeat("x", envBytes)}}
	}
	if err := s.CreateSession(ctx, newSession("before", 10)); err != nil {
		t.Fatal(err)
	}
	filler := filepath.Join(dir, "filler")
	fill(t, filler)
	err := s.CreateSession(ctx, newSession("big", 2<<20))
	if err == nil {
		t.Fatal("CreateSession() of 2 MiB on a full disk = nil, want an error")
	}
	if !errdefs.Is(err, errdefs.ErrUnavailable) {
		t.Errorf("CreateSession() on a full disk = %v (class %v), want unavailable", err, errdefs.ClassOf(err))
	}
	if err := s.Heartbeat(ctx); err != nil && !errdefs.Is(err, errdefs.ErrUnavailable) {
		t.Errorf("Heartbeat() on a full disk = %v, want nil or unavailable", err)
	}
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	var check string
	if err := s.db.QueryRowContext(ctx, "PRAGMA integrity_check").Scan(&check); err != nil || check != "ok" {
		t.Fatalf("integrity_check after the disk filled = %q, %v; want ok", check, err)
	}
	if _, err := s.GetSession(ctx, "t", "before"); err != nil {
		t.Errorf("GetSession() of the session stored before the disk filled = %v", err)
	}
	if _, err := s.GetSession(ctx, "t", "big"); !errdefs.Is(err, errdefs.ErrNotFound) {
		t.Errorf("GetSession() of the failed write = %v, want not_found", err)
	}
	if err := s.CreateSession(ctx, newSession("after", 10)); err != nil {
		t.Errorf("CreateSession() once there is room again = %v", err)
	}
}

// fill writes path until its filesystem is full.
func fill(t *testing.T, path string) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 64<<10)
	for {
		if _, err := f.Write(buf); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatalf("fill %s: %v", path, err)
			}
			return
		}
	}
}
