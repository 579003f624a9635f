package client

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"

	"github.com/warrenhq/warren/api"
)

func workspacePath(name string) string { return "/v1/workspaces/" + url.PathEscape(name) }

func snapshotPath(name, suffix string) string {
	return "/v1/snapshots/" + url.PathEscape(name) + suffix
}

// CreateWorkspace creates a workspace: a named directory that outlives
// sessions, mounted at /workspace in sessions created with its name.
func (c *Client) CreateWorkspace(ctx context.Context, req *api.CreateWorkspaceRequest) (*api.Workspace, error) {
	var w api.Workspace
	if _, err := c.doJSON(ctx, http.MethodPost, "/v1/workspaces", nil, req, &w); err != nil {
		return nil, err
	}
	return &w, nil
}

// ListWorkspaces lists the caller's workspaces.
func (c *Client) ListWorkspaces(ctx context.Context) ([]api.Workspace, error) {
	var l api.WorkspaceList
	if _, err := c.doJSON(ctx, http.MethodGet, "/v1/workspaces", nil, nil, &l); err != nil {
		return nil, err
	}
	return l.Workspaces, nil
}

// GetWorkspace describes the workspace name.
func (c *Client) GetWorkspace(ctx context.Context, name string) (*api.Workspace, error) {
	var w api.Workspace
	if _, err := c.doJSON(ctx, http.MethodGet, workspacePath(name), nil, nil, &w); err != nil {
		return nil, err
	}
	return &w, nil
}

// DeleteWorkspace deletes the workspace name and its files; a workspace a
// session has mounted is a conflict.
func (c *Client) DeleteWorkspace(ctx context.Context, name string) error {
	_, err := c.doJSON(ctx, http.MethodDelete, workspacePath(name), nil, nil, nil)
	return err
}

// Snapshot stores the files of the session id as the snapshot name.
func (c *Client) Snapshot(ctx context.Context, id, name string) (*api.Snapshot, error) {
	var s api.Snapshot
	if _, err := c.doJSON(ctx, http.MethodPost, sessionPath(id, "/snapshot"), nil, &api.SnapshotRequest{Name: name}, &s); err != nil {
		return nil, err
	}
	return &s, nil
}

// Fork snapshots the session id and starts new sessions from the snapshot.
func (c *Client) Fork(ctx context.Context, id string, req *api.ForkRequest) (*api.ForkResult, error) {
	if req == nil {
		req = &api.ForkRequest{}
	}
	var r api.ForkResult
	if _, err := c.doJSON(ctx, http.MethodPost, sessionPath(id, "/fork"), nil, req, &r); err != nil {
		return nil, err
	}
	return &r, nil
}

// ListSnapshots lists the caller's snapshots.
func (c *Client) ListSnapshots(ctx context.Context) ([]api.Snapshot, error) {
	var l api.SnapshotList
	if _, err := c.doJSON(ctx, http.MethodGet, "/v1/snapshots", nil, nil, &l); err != nil {
		return nil, err
	}
	return l.Snapshots, nil
}

// GetSnapshot describes the snapshot name.
func (c *Client) GetSnapshot(ctx context.Context, name string) (*api.Snapshot, error) {
	var s api.Snapshot
	if _, err := c.doJSON(ctx, http.MethodGet, snapshotPath(name, ""), nil, nil, &s); err != nil {
		return nil, err
	}
	return &s, nil
}

// DeleteSnapshot deletes the snapshot name; one that sessions use is a
// conflict.
func (c *Client) DeleteSnapshot(ctx context.Context, name string) error {
	_, err := c.doJSON(ctx, http.MethodDelete, snapshotPath(name, ""), nil, nil, nil)
	return err
}

// ExportSnapshot opens the zstd tarball of the snapshot name. The caller
// reads it as it arrives and must close it; a read error means the
// archive was cut short.
func (c *Client) ExportSnapshot(ctx context.Context, name string) (io.ReadCloser, error) {
	resp, err := c.send(ctx, &request{method: http.MethodGet, path: snapshotPath(name, "/export"), accept: "application/zstd"})
	if err != nil {
		return nil, err
	}
	return resp.Body, nil
}

// ImportSnapshot stores the zstd tarball r (as ExportSnapshot yields it)
// as the snapshot name, streaming it.
func (c *Client) ImportSnapshot(ctx context.Context, name string, r io.Reader) (*api.Snapshot, error) {
	if r == nil {
		r = http.NoBody
	}
	p := snapshotPath(name, "/import")
	resp, err := c.send(ctx, &request{method: http.MethodPut, path: p, body: r, contentType: "application/zstd", accept: "application/json"})
	if err != nil {
		return nil, err
	}
	defer closeBody(resp.Body)
	var s api.Snapshot
	if err := json.NewDecoder(resp.Body).Decode(&s); err != nil {
		return nil, fmt.Errorf("PUT %s: decode response: %w", p, err)
	}
	return &s, nil
}
