package fleet

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/warrenhq/warren/api"
	"github.com/warrenhq/warren/internal/edge"
	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/fleet/registry"
	"github.com/warrenhq/warren/internal/session"
)

// Local is what the mover needs of this node's own sessions: the session
// manager (*session.Manager) and its layers service.
type Local interface {
	List(ctx context.Context, tenant string) []*session.Info
	Get(ctx context.Context, tenant, id string) (*session.Info, error)
	Create(ctx context.Context, tenant string, req *session.CreateRequest) (*session.Info, bool, error)
	Delete(ctx context.Context, tenant, id string) error
	SessionNetwork(ctx context.Context, tenant, id string) (*session.NetworkPolicy, error)
	Layers() session.Layers
}

// moveRetry is how long the mover waits before it tries a session again
// after a failed move (no target, a target that refused, a session in use
// during the copy).
const moveRetry = 5 * time.Second

// StartMover starts the node's mover: while the node's drain mark is
// DrainMove's, it moves its sessions to other nodes one at a time (move).
// The node does it, not the command that set the mark, so a move goes on
// when that command goes away; a node that restarts resumes it.
//
// tlsCfg checks the other nodes' certificates (fleet.ca_file) when they are
// advertised at https:// (nil: the host's roots).
func (n *Node) StartMover(local Local, tlsCfg *tls.Config) {
	if n.ctx.Err() != nil {
		return // left the fleet already
	}
	m := &mover{n: n, local: local, hc: &http.Client{Transport: &http.Transport{Proxy: nil, TLSClientConfig: tlsCfg}},
		retry: map[sessionKey]time.Time{}}
	n.wg.Go(m.run)
}

type mover struct {
	n     *Node
	local Local
	hc    *http.Client
	// retry: when to try a session again whose move failed. Only run's
	// goroutine uses it.
	retry map[sessionKey]time.Time
}

func (m *mover) run() {
	n := m.n
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-n.ctx.Done():
			return
		case <-tick.C:
		}
		if !n.cache.Moving(n.cfg.Name) || !n.member.Registered() || n.Secret() == nil {
			continue
		}
		sessions := m.local.List(n.ctx, "")
		for k := range m.retry { // forget sessions that ended meanwhile
			if !slices.ContainsFunc(sessions, func(s *session.Info) bool { return s.Tenant == k.tenant && s.ID == k.id }) {
				delete(m.retry, k)
			}
		}
		for _, s := range sessions {
			k := sessionKey{s.Tenant, s.ID}
			if n.ctx.Err() != nil || !n.cache.Moving(n.cfg.Name) {
				break
			}
			if s.State != session.StateRunning || time.Now().Before(m.retry[k]) {
				continue
			}
			start := time.Now()
			to, err := m.move(n.ctx, s)
			if err != nil {
				n.log.Warn("could not move a session away from this draining node; it stays here, and is tried again", "tenant", s.Tenant,
					"session_id", s.ID, "retry_in", moveRetry, "error", err)
				m.retry[k] = time.Now().Add(moveRetry)
				continue
			}
			delete(m.retry, k)
			n.log.Info("moved a session to another node", "tenant", s.Tenant, "session_id", s.ID, "to", to, "took", time.Since(start).Round(time.Millisecond))
		}
	}
}

// move moves one session to the node placement picks: its record marked
// Moving (every router answers unavailable for it, so no call changes it
// meanwhile, and its quota slot stays held), a snapshot of its files here,
// the snapshot imported there (as one that goes with the last session made
// from it), the session deleted here (its record kept), then created there
// with the same id and what it was created with, from the snapshot: that
// create takes the record and its slot over. It returns the target's name.
//
// Until the delete, any failure leaves the session here untouched (its
// record Live again). After it, a failed create there re-creates the
// session here from the snapshot, taking the record back, so its files are
// not lost. No snapshot stays behind on either node but the one the moved
// session runs on.
func (m *mover) move(ctx context.Context, s *session.Info) (_ string, err error) {
	n, lay := m.n, m.local.Layers()
	tenant, id := s.Tenant, s.ID
	k := sessionKey{tenant, id}
	if s.Paused() {
		return "", errdefs.New(errdefs.ErrConflict, "session %q is paused; a paused session is moved once resumed", id)
	}
	if ws := m.workspaceOf(ctx, tenant, id); ws != "" {
		return "", errdefs.New(errdefs.ErrConflict, "session %q mounts workspace %q, which lives on this node's disk; it cannot move", id, ws)
	}
	req, err := m.createRequest(ctx, s)
	if err != nil {
		return "", err
	}
	target, ok := n.Place()
	if !ok || target.Name == n.cfg.Name {
		return "", errdefs.New(errdefs.ErrUnavailable, "no other node takes sessions now")
	}
	if err := n.reg.MarkMoving(ctx, tenant, id, n.cfg.Name, true); err != nil {
		return "", fmt.Errorf("mark the session moving: %w", err)
	}
	deleted := false
	defer func() {
		if err != nil && !deleted {
			if uerr := n.reg.MarkMoving(context.WithoutCancel(ctx), tenant, id, n.cfg.Name, false); uerr != nil {
				// Reconcile at the next start, or the next try, sets it
				// right; meanwhile its clients are told to retry.
				n.log.Warn("could not mark a session that stays here live again", "tenant", tenant, "session_id", id, "error", uerr)
			}
		}
	}()
	name := moveName()
	sn, err := lay.Snapshot(ctx, tenant, id, name)
	if err != nil {
		return "", fmt.Errorf("snapshot: %w", err)
	}
	keep := false // the snapshot here holds the only copy of the files
	defer func() {
		if !keep {
			m.dropSnapshot(tenant, name, sn.Parent)
		}
	}()
	// A call that came in before the mark and ended after the snapshot
	// (a write through the API) would be lost: the session's last use,
	// set as the snapshot ended, must not move until the delete.
	after, err := m.local.Get(ctx, tenant, id)
	if err != nil {
		return "", err
	}
	if err := m.importThere(ctx, target, tenant, name); err != nil {
		m.dropThere(target, tenant, name)
		return "", fmt.Errorf("copy the snapshot to node %s: %w", target.Name, err)
	}
	now, err := m.local.Get(ctx, tenant, id)
	if err == nil && now.LastUsedAt.After(after.LastUsedAt) {
		err = errdefs.New(errdefs.ErrConflict, "session %q was used while its files were copied; the move is tried again", id)
	}
	if err == nil {
		n.mu.Lock()
		n.moving[k] = true // the delete keeps the record, Moving
		n.mu.Unlock()
		err = m.local.Delete(ctx, tenant, id)
		n.mu.Lock()
		delete(n.moving, k)
		n.mu.Unlock()
	}
	if err != nil {
		m.dropThere(target, tenant, name)
		return "", err
	}
	deleted = true
	req.Snapshot = name
	err = m.createThere(ctx, target, tenant, req)
	if err == nil {
		return target.Name, nil
	}
	// A create whose answer was lost may have succeeded: the registry
	// says.
	if r, gerr := n.reg.GetSession(context.WithoutCancel(ctx), tenant, id); gerr == nil && r.Node == target.Name {
		return target.Name, nil
	}
	m.dropThere(target, tenant, name)
	keep = m.restore(tenant, id, name, req, err) != nil
	return "", fmt.Errorf("create on node %s: %w", target.Name, err)
}

// movedFrom is the node whose move a create continues (registry's
// Session.MovedFrom): this node for the mover's re-create of a session it
// could not move, the sending node for a create signed by a mover
// (edge.SignHop), "" for any other create.
func (n *Node) movedFrom(ctx context.Context) string {
	if ctx.Value(moveBackKey{}) != nil {
		return n.cfg.Name
	}
	if id := edge.IdentityOf(ctx); id != nil && id.Method == edge.MethodHop {
		from, _ := strings.CutPrefix(id.Subject, moveSubject)
		return from
	}
	return ""
}

// moveSubject, and the node's name, is the subject of a mover's calls on
// the target (in its audit records).
const moveSubject = "fleet-move:"

// moveName is a fresh name for a move's snapshot.
func moveName() string {
	b := make([]byte, 6)
	rand.Read(b)
	return "fleet-move-" + hex.EncodeToString(b)
}

// workspaceOf returns the workspace session id mounts, "" for none.
func (m *mover) workspaceOf(ctx context.Context, tenant, id string) string {
	wss, err := m.local.Layers().ListWorkspaces(ctx, tenant)
	if err != nil {
		return ""
	}
	for _, w := range wss {
		if slices.ContainsFunc(w.MountedBy, func(u session.WorkspaceMount) bool { return u.Session == id }) {
			return w.Name
		}
	}
	return ""
}

// createRequest is the create that makes s again: its id, image,
// environment, user, base directory, limits, network policy, labels, idle
// TTL and what remains of its lifetime.
func (m *mover) createRequest(ctx context.Context, s *session.Info) (*api.CreateSessionRequest, error) {
	pol, err := m.local.SessionNetwork(ctx, s.Tenant, s.ID)
	if err != nil {
		return nil, fmt.Errorf("read the session's network policy: %w", err)
	}
	req := &api.CreateSessionRequest{ID: s.ID, Env: s.Env, Cwd: s.BaseDir, User: s.User,
		Limits:     &api.Limits{MemoryMB: s.Limits.MemoryMB, CPUs: s.Limits.CPUs, Pids: s.Limits.Pids, DiskMB: s.Limits.DiskMB},
		Network:    &api.NetworkPolicy{Mode: pol.Mode, Allow: pol.Allow, Deny: pol.Deny},
		TTLSeconds: int64((s.IdleTTL + time.Second - 1) / time.Second)}
	if s.MaxLifetime > 0 {
		left := s.MaxLifetime - time.Since(s.CreatedAt)
		req.MaxLifetimeSeconds = max(int64((left+time.Second-1)/time.Second), 1)
	}
	for k, v := range s.Labels {
		if !strings.HasPrefix(k, "warren.dev/") { // the daemon's own; a create refuses them
			if req.Labels == nil {
				req.Labels = map[string]string{}
			}
			req.Labels[k] = v
		}
	}
	return req, nil
}

// restore makes the session here again from the move's snapshot, after a
// failed create on the target (the node is draining: this create is let
// through, and takes the Moving record back). A session made so runs on a copy of the snapshot that goes
// with it, so the move's own snapshot can be deleted. If that fails too,
// the snapshot stays for the tenant to start the session from, and the log
// names it.
func (m *mover) restore(tenant, id, name string, req *api.CreateSessionRequest, cause error) error {
	ctx := context.WithValue(context.WithoutCancel(m.n.ctx), moveBackKey{}, true)
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	lay := m.local.Layers()
	back := moveName()
	err := func() error {
		pr, pw := io.Pipe()
		go func() { pw.CloseWithError(lay.ExportSnapshot(ctx, tenant, name, pw)) }()
		_, err := lay.ImportSnapshot(ctx, tenant, back, pr, session.ImportAutoDelete())
		pr.CloseWithError(err)
		if err != nil {
			return err
		}
		cr := &session.CreateRequest{ID: id, Env: req.Env, Cwd: req.Cwd, User: req.User, Labels: req.Labels, Snapshot: back,
			Limits:  session.Limits{MemoryMB: req.Limits.MemoryMB, CPUs: req.Limits.CPUs, Pids: req.Limits.Pids, DiskMB: req.Limits.DiskMB},
			Network: req.Network.Mode, NetworkAllow: req.Network.Allow, NetworkDeny: req.Network.Deny,
			IdleTTL: time.Duration(req.TTLSeconds) * time.Second, MaxLifetime: time.Duration(req.MaxLifetimeSeconds) * time.Second}
		if _, _, err := m.local.Create(ctx, tenant, cr); err != nil {
			_ = lay.DeleteSnapshot(ctx, tenant, back)
			return err
		}
		return nil
	}()
	if err != nil {
		// Its record, Moving, has no session anywhere now: it goes,
		// with its quota slot.
		if derr := m.n.reg.DeleteSession(ctx, tenant, id, m.n.cfg.Name); derr != nil {
			m.n.forget(ctx, tenant, id)
		}
		m.n.log.Error("a session could not be moved, nor made here again; its files are in a snapshot of its tenant",
			"tenant", tenant, "session_id", id, "snapshot", name, "move_error", cause, "error", err)
		return err
	}
	m.n.log.Warn("a session could not be moved; it was made here again from its snapshot (its processes were stopped)",
		"tenant", tenant, "session_id", id, "move_error", cause)
	return nil
}

// dropSnapshot deletes the move's snapshot here, and the snapshot the
// session had started from if that one was to go with its last session
// (a session moved here before): the move's snapshot, built on it, kept
// it until now.
func (m *mover) dropSnapshot(tenant, name, parent string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(m.n.ctx), time.Minute)
	defer cancel()
	lay := m.local.Layers()
	if err := lay.DeleteSnapshot(ctx, tenant, name); err != nil && !errdefs.Is(err, errdefs.ErrNotFound) {
		m.n.log.Warn("could not delete a move's snapshot", "tenant", tenant, "snapshot", name, "error", err)
		return
	}
	if parent == "" {
		return
	}
	all, err := lay.ListSnapshots(ctx, tenant)
	if err != nil {
		return
	}
	for _, sn := range all {
		if sn.ID == parent && sn.AutoDelete && len(sn.UsedBy) == 0 {
			if err := lay.DeleteSnapshot(ctx, tenant, sn.Name); err != nil && !errdefs.Is(err, errdefs.ErrConflict) && !errdefs.Is(err, errdefs.ErrNotFound) {
				m.n.log.Warn("could not delete an unused snapshot", "tenant", tenant, "snapshot", sn.Name, "error", err)
			}
		}
	}
}

// importThere copies the snapshot name to target, as one that goes with
// the last session made from it.
func (m *mover) importThere(ctx context.Context, target registry.Node, tenant, name string) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Minute)
	defer cancel()
	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(m.local.Layers().ExportSnapshot(ctx, tenant, name, pw)) }()
	defer pr.Close()
	return m.call(ctx, target, tenant, http.MethodPut, "/v1/snapshots/"+url.PathEscape(name)+"/import?auto_delete=true", "application/zstd", pr, http.StatusCreated)
}

// createThere creates the session on target.
func (m *mover) createThere(ctx context.Context, target registry.Node, tenant string, req *api.CreateSessionRequest) error {
	b, err := json.Marshal(req)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	return m.call(ctx, target, tenant, http.MethodPost, "/v1/sessions", "application/json", bytes.NewReader(b), http.StatusCreated)
}

// dropThere deletes the snapshot name on target, if it is there.
func (m *mover) dropThere(target registry.Node, tenant, name string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(m.n.ctx), time.Minute)
	defer cancel()
	err := m.call(ctx, target, tenant, http.MethodDelete, "/v1/snapshots/"+url.PathEscape(name), "", nil, http.StatusNoContent)
	if err != nil && !errdefs.Is(err, errdefs.ErrNotFound) {
		m.n.log.Warn("could not delete a move's snapshot on the target node", "node", target.Name, "tenant", tenant, "snapshot", name, "error", err)
	}
}

// call makes one request of target as tenant, signed as this node's
// (edge.SignHop), and wants status; another answer is an error of the
// class its envelope names.
func (m *mover) call(ctx context.Context, target registry.Node, tenant, method, path, ctype string, body io.Reader, status int) error {
	r, err := http.NewRequestWithContext(ctx, method, strings.TrimSuffix(target.Addr, "/")+path, body)
	if err != nil {
		return err
	}
	if ctype != "" {
		r.Header.Set("Content-Type", ctype)
	}
	edge.SignHop(m.n.Secret(), r, tenant, moveSubject+m.n.cfg.Name, m.n.cfg.Name)
	resp, err := m.hc.Do(r)
	if err != nil {
		return errdefs.New(errdefs.ErrUnavailable, "%s %s on node %s: %w", method, path, target.Name, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode == status {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
		return nil
	}
	var env struct {
		Error struct{ Code, Message string } `json:"error"`
	}
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if json.Unmarshal(raw, &env) != nil || env.Error.Code == "" {
		return fmt.Errorf("%s %s on node %s: %s", method, path, target.Name, resp.Status)
	}
	return errdefs.New(errdefs.FromCode(env.Error.Code), "%s %s on node %s: %s: %s", method, path, target.Name, env.Error.Code, env.Error.Message)
}

// moveBackKey marks the context of the mover's re-create of a session
// whose move failed: the store lets it through while the node drains.
type moveBackKey struct{}
