package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"

	sqlite3 "modernc.org/sqlite/lib"

	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/session"
)

var _ session.LayerStore = (*SQLite)(nil)

func boolInt(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

// layerConflict classifies a failed INSERT of a workspace or snapshot.
func layerConflict(err error, kind, name string) error {
	switch sqliteCode(err) {
	case sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY:
		return errdefs.New(errdefs.ErrConflict, "%s %q already exists", kind, name)
	case sqlite3.SQLITE_CONSTRAINT_UNIQUE:
		return errdefs.New(errdefs.ErrConflict, "%s id of %q is already in use", kind, name)
	}
	return nil
}

const workspaceColumns = `tenant, name, id, size_mb, shared, created_at`

// CreateWorkspace stores a new workspace; ErrConflict if the tenant has
// one of that name.
func (s *SQLite) CreateWorkspace(ctx context.Context, w *session.Workspace) error {
	if w.Tenant == "" || w.Name == "" || w.ID == "" {
		return errdefs.New(errdefs.ErrInvalidArgument, "workspace %q in tenant %q: tenant, name and id must not be empty", w.Name, w.Tenant)
	}
	created, err := encodeTime(w.CreatedAt)
	if err != nil {
		return errdefs.New(errdefs.ErrInvalidArgument, "workspace %q: %v", w.Name, err)
	}
	_, err = s.db.ExecContext(ctx, `INSERT INTO workspaces (`+workspaceColumns+`) VALUES (?, ?, ?, ?, ?, ?)`,
		w.Tenant, w.Name, w.ID, w.SizeMB, boolInt(w.Shared), created)
	if err != nil {
		if cerr := layerConflict(err, "workspace", w.Name); cerr != nil {
			return cerr
		}
		return dbError(err, "create workspace %q in tenant %q", w.Name, w.Tenant)
	}
	return nil
}

func scanWorkspace(sc interface{ Scan(...any) error }) (*session.Workspace, error) {
	var w session.Workspace
	var shared int64
	var created sql.NullInt64
	if err := sc.Scan(&w.Tenant, &w.Name, &w.ID, &w.SizeMB, &shared, &created); err != nil {
		return nil, err
	}
	w.Shared, w.CreatedAt = shared == 1, decodeTime(created)
	return &w, nil
}

// GetWorkspace returns the tenant's workspace name, or ErrNotFound.
func (s *SQLite) GetWorkspace(ctx context.Context, tenant, name string) (*session.Workspace, error) {
	w, err := scanWorkspace(s.db.QueryRowContext(ctx, `SELECT `+workspaceColumns+` FROM workspaces WHERE tenant = ? AND name = ?`, tenant, name))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, errdefs.New(errdefs.ErrNotFound, "workspace %q not found", name)
	}
	if err != nil {
		return nil, dbError(err, "get workspace %q in tenant %q", name, tenant)
	}
	return w, nil
}

// ListWorkspaces returns the tenant's workspaces ("" for every tenant's)
// ordered by name, then tenant.
func (s *SQLite) ListWorkspaces(ctx context.Context, tenant string) ([]*session.Workspace, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT `+workspaceColumns+` FROM workspaces WHERE ? = '' OR tenant = ? ORDER BY name, tenant`, tenant, tenant)
	if err != nil {
		return nil, dbError(err, "list workspaces of tenant %q", tenant)
	}
	defer rows.Close()
	var out []*session.Workspace
	for rows.Next() {
		w, err := scanWorkspace(rows)
		if err != nil {
			return nil, dbError(err, "list workspaces of tenant %q", tenant)
		}
		out = append(out, w)
	}
	if err := rows.Err(); err != nil {
		return nil, dbError(err, "list workspaces of tenant %q", tenant)
	}
	return out, nil
}

// DeleteWorkspace removes the tenant's workspace name, or fails with
// ErrNotFound.
func (s *SQLite) DeleteWorkspace(ctx context.Context, tenant, name string) error {
	res, err := s.db.ExecContext(ctx, `DELETE FROM workspaces WHERE tenant = ? AND name = ?`, tenant, name)
	if err != nil {
		return dbError(err, "delete workspace %q in tenant %q", name, tenant)
	}
	return affected(res, "workspace", name)
}

func affected(res sql.Result, kind, name string) error {
	n, err := res.RowsAffected()
	if err != nil {
		return err
	}
	if n == 0 {
		return errdefs.New(errdefs.ErrNotFound, "%s %q not found", kind, name)
	}
	return nil
}

const snapshotColumns = `tenant, name, id, image, image_digest, parent, overlays, session, size_bytes, auto_delete, created_at`

// CreateSnapshot stores a new snapshot; ErrConflict if the tenant has one
// of that name.
func (s *SQLite) CreateSnapshot(ctx context.Context, sn *session.Snapshot) error {
	if sn.Tenant == "" || sn.Name == "" || sn.ID == "" {
		return errdefs.New(errdefs.ErrInvalidArgument, "snapshot %q in tenant %q: tenant, name and id must not be empty", sn.Name, sn.Tenant)
	}
	created, err := encodeTime(sn.CreatedAt)
	if err != nil {
		return errdefs.New(errdefs.ErrInvalidArgument, "snapshot %q: %v", sn.Name, err)
	}
	overlays := sn.Overlays
	if overlays == nil {
		overlays = []string{}
	}
	ov, err := json.Marshal(overlays)
	if err != nil {
		return errdefs.New(errdefs.ErrInvalidArgument, "snapshot %q: %v", sn.Name, err)
	}
	_, err = s.db.ExecContext(ctx, `INSERT INTO snapshots (`+snapshotColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		sn.Tenant, sn.Name, sn.ID, sn.Image, sn.ImageDigest, sn.Parent, string(ov), sn.Session, sn.SizeBytes, boolInt(sn.AutoDelete), created)
	if err != nil {
		if cerr := layerConflict(err, "snapshot", sn.Name); cerr != nil {
			return cerr
		}
		return dbError(err, "create snapshot %q in tenant %q", sn.Name, sn.Tenant)
	}
	return nil
}

func scanSnapshot(sc interface{ Scan(...any) error }) (*session.Snapshot, error) {
	var sn session.Snapshot
	var ov string
	var auto int64
	var created sql.NullInt64
	if err := sc.Scan(&sn.Tenant, &sn.Name, &sn.ID, &sn.Image, &sn.ImageDigest, &sn.Parent, &ov, &sn.Session, &sn.SizeBytes, &auto, &created); err != nil {
		return nil, err
	}
	if err := json.Unmarshal([]byte(ov), &sn.Overlays); err != nil {
		return nil, err
	}
	if len(sn.Overlays) == 0 {
		sn.Overlays = nil
	}
	sn.AutoDelete, sn.CreatedAt = auto == 1, decodeTime(created)
	return &sn, nil
}

// GetSnapshot returns the tenant's snapshot name, or ErrNotFound.
func (s *SQLite) GetSnapshot(ctx context.Context, tenant, name string) (*session.Snapshot, error) {
	sn, err := scanSnapshot(s.db.QueryRowContext(ctx, `SELECT `+snapshotColumns+` FROM snapshots WHERE tenant = ? AND name = ?`, tenant, name))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, errdefs.New(errdefs.ErrNotFound, "snapshot %q not found", name)
	}
	if err != nil {
		return nil, dbError(err, "get snapshot %q in tenant %q", name, tenant)
	}
	return sn, nil
}

// ListSnapshots returns the tenant's snapshots ("" for every tenant's)
// ordered by name, then tenant.
func (s *SQLite) ListSnapshots(ctx context.Context, tenant string) ([]*session.Snapshot, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT `+snapshotColumns+` FROM snapshots WHERE ? = '' OR tenant = ? ORDER BY name, tenant`, tenant, tenant)
	if err != nil {
		return nil, dbError(err, "list snapshots of tenant %q", tenant)
	}
	defer rows.Close()
	var out []*session.Snapshot
	for rows.Next() {
		sn, err := scanSnapshot(rows)
		if err != nil {
			return nil, dbError(err, "list snapshots of tenant %q", tenant)
		}
		out = append(out, sn)
	}
	if err := rows.Err(); err != nil {
		return nil, dbError(err, "list snapshots of tenant %q", tenant)
	}
	return out, nil
}

// DeleteSnapshot removes the tenant's snapshot name, or fails with
// ErrNotFound.
func (s *SQLite) DeleteSnapshot(ctx context.Context, tenant, name string) error {
	res, err := s.db.ExecContext(ctx, `DELETE FROM snapshots WHERE tenant = ? AND name = ?`, tenant, name)
	if err != nil {
		return dbError(err, "delete snapshot %q in tenant %q", name, tenant)
	}
	return affected(res, "snapshot", name)
}

// PutAttachment stores (or replaces) what session a.Session uses.
func (s *SQLite) PutAttachment(ctx context.Context, a *session.Attachment) error {
	if a.Session == "" {
		return errdefs.New(errdefs.ErrInvalidArgument, "attachment without a session")
	}
	_, err := s.db.ExecContext(ctx, `INSERT OR REPLACE INTO attachments (session, tenant, session_id, workspace, workspace_mode, snapshot)
		VALUES (?, ?, ?, ?, ?, ?)`, a.Session, a.Tenant, a.SessionID, a.Workspace, a.WorkspaceMode, a.Snapshot)
	if err != nil {
		return dbError(err, "record what session %q uses", a.SessionID)
	}
	return nil
}

// ListAttachments returns every stored attachment, by session.
func (s *SQLite) ListAttachments(ctx context.Context) ([]*session.Attachment, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT session, tenant, session_id, workspace, workspace_mode, snapshot FROM attachments ORDER BY session`)
	if err != nil {
		return nil, dbError(err, "list attachments")
	}
	defer rows.Close()
	var out []*session.Attachment
	for rows.Next() {
		var a session.Attachment
		if err := rows.Scan(&a.Session, &a.Tenant, &a.SessionID, &a.Workspace, &a.WorkspaceMode, &a.Snapshot); err != nil {
			return nil, dbError(err, "list attachments")
		}
		out = append(out, &a)
	}
	if err := rows.Err(); err != nil {
		return nil, dbError(err, "list attachments")
	}
	return out, nil
}

// DeleteAttachment forgets what session used, or fails with ErrNotFound.
func (s *SQLite) DeleteAttachment(ctx context.Context, sess string) error {
	res, err := s.db.ExecContext(ctx, `DELETE FROM attachments WHERE session = ?`, sess)
	if err != nil {
		return dbError(err, "forget attachment of %q", sess)
	}
	return affected(res, "attachment", sess)
}
