package daemon

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/warrenhq/warren/internal/session"
	"github.com/warrenhq/warren/internal/workspace"
)

// openLayers opens the workspaces' storage and the snapshots' directory,
// for the manager's layers service.
func (d *Daemon) openLayers() (*session.LayersConfig, error) {
	ws, err := workspace.Open(d.cfg.DataDir, !d.cfg.NoDiskQuota)
	if err != nil {
		return nil, fmt.Errorf("%w; pass --no-disk-quota to run without size limits", err)
	}
	d.workspaces = ws
	// 0700: snapshot layers hold files owned by host root (the sandboxes'
	// root's), set-id bits included; no other host user may reach them.
	snaps := filepath.Join(d.cfg.DataDir, "snapshots")
	if err := os.MkdirAll(snaps, 0o700); err != nil {
		return nil, err
	}
	if err := os.Chmod(snaps, 0o700); err != nil {
		return nil, err
	}
	return &session.LayersConfig{Store: d.store, Workspaces: ws, SnapshotDir: snaps}, nil
}

// closeLayers unmounts the workspaces, or leaves them mounted for the
// sessions a stopping daemon keeps running.
func (d *Daemon) closeLayers() {
	if d.workspaces == nil {
		return
	}
	var err error
	if d.keep {
		err = d.workspaces.Release()
	} else {
		err = d.workspaces.Close()
	}
	if err != nil {
		d.log.Error("close the workspaces", "error", err)
	}
	d.workspaces = nil
}
