package store

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/session"
)

func TestWorkspaces(t *testing.T) {
	s := mustOpen(t, dbPath(t))
	defer mustClose(t, s)
	ctx := t.Context()
	now := time.Unix(0, time.Now().UnixNano()).UTC()
	a := &session.Workspace{ID: "w1", Tenant: "a", Name: "proj", SizeMB: 64, Shared: true, CreatedAt: now}
	if err := s.CreateWorkspace(ctx, a); err != nil {
		t.Fatalf("CreateWorkspace: %v", err)
	}
	if err := s.CreateWorkspace(ctx, &session.Workspace{ID: "w2", Tenant: "a", Name: "proj"}); !errdefs.Is(err, errdefs.ErrConflict) {
		t.Errorf("CreateWorkspace of an existing name = %v, want conflict", err)
	}
	if err := s.CreateWorkspace(ctx, &session.Workspace{ID: "w3", Tenant: "b", Name: "proj"}); err != nil {
		t.Errorf("CreateWorkspace of another tenant's name = %v", err)
	}
	got, err := s.GetWorkspace(ctx, "a", "proj")
	if err != nil || !cmp.Equal(got, a) {
		t.Errorf("GetWorkspace = %+v, %v, want %+v", got, err, a)
	}
	if _, err := s.GetWorkspace(ctx, "c", "proj"); !errdefs.Is(err, errdefs.ErrNotFound) {
		t.Errorf("GetWorkspace of another tenant = %v, want not found", err)
	}
	for tenant, want := range map[string]int{"a": 1, "b": 1, "": 2, "c": 0} {
		l, err := s.ListWorkspaces(ctx, tenant)
		if err != nil || len(l) != want {
			t.Errorf("ListWorkspaces(%q) = %d, %v, want %d", tenant, len(l), err, want)
		}
	}
	if err := s.DeleteWorkspace(ctx, "a", "proj"); err != nil {
		t.Errorf("DeleteWorkspace: %v", err)
	}
	if err := s.DeleteWorkspace(ctx, "a", "proj"); !errdefs.Is(err, errdefs.ErrNotFound) {
		t.Errorf("DeleteWorkspace again = %v, want not found", err)
	}
}

func TestSnapshotsAndAttachments(t *testing.T) {
	s := mustOpen(t, dbPath(t))
	defer mustClose(t, s)
	ctx := t.Context()
	sn := &session.Snapshot{ID: "n1", Tenant: "a", Name: "s", Image: "base", ImageDigest: "sha256:x", Parent: "n0",
		Overlays: []string{"/usr"}, Session: "s1", SizeBytes: 42, AutoDelete: true, CreatedAt: time.Unix(5, 6).UTC()}
	if err := s.CreateSnapshot(ctx, sn); err != nil {
		t.Fatalf("CreateSnapshot: %v", err)
	}
	if err := s.CreateSnapshot(ctx, &session.Snapshot{ID: "n2", Tenant: "a", Name: "s"}); !errdefs.Is(err, errdefs.ErrConflict) {
		t.Errorf("CreateSnapshot of an existing name = %v, want conflict", err)
	}
	got, err := s.GetSnapshot(ctx, "a", "s")
	if err != nil || !cmp.Equal(got, sn) {
		t.Errorf("GetSnapshot = %+v, %v, want %+v", got, err, sn)
	}
	if l, err := s.ListSnapshots(ctx, "b"); err != nil || len(l) != 0 {
		t.Errorf("ListSnapshots(b) = %v, %v", l, err)
	}
	at := &session.Attachment{Session: "abc", Tenant: "a", SessionID: "s1", Workspace: "w1", WorkspaceMode: "ro", Snapshot: "n1"}
	if err := s.PutAttachment(ctx, at); err != nil {
		t.Fatal(err)
	}
	if l, err := s.ListAttachments(ctx); err != nil || len(l) != 1 || !cmp.Equal(l[0], at) {
		t.Errorf("ListAttachments = %v, %v", l, err)
	}
	if err := s.DeleteAttachment(ctx, "abc"); err != nil {
		t.Error(err)
	}
	if err := s.DeleteSnapshot(ctx, "a", "s"); err != nil {
		t.Error(err)
	}
	if _, err := s.GetSnapshot(ctx, "a", "s"); !errdefs.Is(err, errdefs.ErrNotFound) {
		t.Errorf("GetSnapshot after delete = %v", err)
	}
}
