package e2b

import (
	"context"
	"encoding/base64"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/warrenhq/warren/internal/edge"
	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/image"
	"github.com/warrenhq/warren/internal/session"
)

// defaultTimeout is E2B's sandbox timeout when a request gives none.
const defaultTimeout = 15 * time.Second

func invalid(format string, args ...any) error {
	return errdefs.New(errdefs.ErrInvalidArgument, format, args...)
}

// newSandbox is E2B's NewSandbox.
type newSandbox struct {
	TemplateID      string `json:"templateID"`
	Timeout         *int64 `json:"timeout"`
	AutoPause       *bool  `json:"autoPause"`
	AutoPauseMemory *bool  `json:"autoPauseMemory"`
	AutoResume      *struct {
		Enabled bool `json:"enabled"`
	} `json:"autoResume"`
	Secure              *bool             `json:"secure"`
	AllowInternetAccess *bool             `json:"allow_internet_access"`
	Network             *networkConfig    `json:"network"`
	Metadata            map[string]string `json:"metadata"`
	EnvVars             map[string]string `json:"envVars"`
	VolumeMounts        []any             `json:"volumeMounts"`
}

// networkConfig is the part of E2B's SandboxNetworkConfig that maps onto
// warren's egress modes.
type networkConfig struct {
	AllowOut []string `json:"allowOut"`
	DenyOut  []string `json:"denyOut"`
}

// timeoutOf reads a timeout in seconds: nil or 0 is E2B's default.
func timeoutOf(t *int64) (time.Duration, error) {
	switch {
	case t == nil || *t == 0:
		return defaultTimeout, nil
	case *t < 0:
		return 0, invalid("timeout must not be negative")
	case *t > int64((365 * 24 * time.Hour).Seconds()):
		return 0, invalid("timeout of %d seconds is too long", *t)
	}
	return time.Duration(*t) * time.Second, nil
}

// template is what an E2B template id names on warren.
type template struct {
	image, snapshot string
	base            bool
}

// resolveTemplate maps an E2B template id or alias to a warren image or a
// snapshot of the tenant: "base" (and the MCP gateway's template) is
// BaseImage, a snapshot name ("name" or "name:tag") is that snapshot, any
// other name an image of the daemon's.
func (s *Server) resolveTemplate(ctx context.Context, tenant, id string) (template, error) {
	if id == "" {
		id = BaseTemplate
	}
	name, _, _ := strings.Cut(id, ":")
	if name == BaseTemplate || name == mcpTemplate {
		if err := s.ensureBase(); err != nil {
			return template{}, err
		}
		return template{image: BaseImage, base: true}, nil
	}
	if sn, err := s.mgr.Layers().GetSnapshot(ctx, tenant, name); err == nil {
		return template{snapshot: sn.Name}, nil
	}
	if image.ValidName(id) == nil {
		if _, err := s.images.Get(id); err == nil {
			return template{image: id}, nil
		}
	}
	return template{}, errdefs.New(errdefs.ErrNotFound, "template %q not found: it is neither an image of this daemon nor a snapshot of the tenant", id)
}

// ensureBase builds BaseImage the first time it is needed (and again after
// a failure): the host's /usr with a user "user", like E2B's base
// template.
func (s *Server) ensureBase() error {
	s.baseMu.Lock()
	defer s.baseMu.Unlock()
	if s.baseOK {
		if _, err := s.images.Get(BaseImage); err == nil {
			return nil
		}
		// Removed meanwhile (warren image rm): build it again.
	}
	if _, err := s.images.EnsureHostImage(BaseImage, image.HostImage{User: "user", UID: 1000, Sudo: true}); err != nil {
		return errdefs.New(errdefs.ErrUnavailable, "build the %q image of E2B's base template: %v", BaseImage, err)
	}
	s.baseOK = true
	return nil
}

// create serves POST /sandboxes and POST /v2/sandboxes.
func (s *Server) create(w http.ResponseWriter, r *http.Request) {
	var req newSandbox
	if err := decode(r, &req, false); err != nil {
		s.writeError(w, r, err)
		return
	}
	ctx := r.Context()
	tenant := edge.TenantOf(ctx)
	timeout, err := timeoutOf(req.Timeout)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if len(req.VolumeMounts) > 0 {
		s.writeError(w, r, invalid("volume mounts are not supported by warren's E2B API; use a warren workspace"))
		return
	}
	tpl, err := s.resolveTemplate(ctx, tenant, req.TemplateID)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	for k := range req.Metadata {
		if strings.HasPrefix(k, "warren.dev/") {
			s.writeError(w, r, invalid("metadata keys starting with warren.dev/ are reserved"))
			return
		}
	}
	cr := &session.CreateRequest{Image: tpl.image, Snapshot: tpl.snapshot, Env: req.EnvVars, Labels: req.Metadata,
		IdleTTL: timeout, MaxLifetime: timeout}
	if tpl.base {
		cr.User, cr.Cwd = "user", "/home/user"
	}
	labels := map[string]string{labelTemplate: req.TemplateID}
	if req.TemplateID == "" {
		labels[labelTemplate] = BaseTemplate
	}
	if req.AllowInternetAccess != nil {
		labels[labelInternet] = strconv.FormatBool(*req.AllowInternetAccess)
		if !*req.AllowInternetAccess {
			cr.Network = "none"
		}
	}
	if n := req.Network; n != nil && (len(n.AllowOut) > 0 || len(n.DenyOut) > 0) {
		if req.AllowInternetAccess != nil && !*req.AllowInternetAccess && len(n.AllowOut) == 0 {
			// No internet and nothing allowed: mode none says it all.
		} else if len(n.AllowOut) > 0 {
			cr.Network, cr.NetworkAllow, cr.NetworkDeny = "allowlist", n.AllowOut, n.DenyOut
		} else {
			cr.Network, cr.NetworkDeny = "open", n.DenyOut
		}
	}
	if req.AutoPause != nil && *req.AutoPause {
		labels[labelOnTimeout] = "pause"
		if req.AutoResume != nil && req.AutoResume.Enabled {
			labels[labelAutoResume] = "1"
		}
	}
	if id := edge.IdentityOf(ctx); id != nil && id.KeyID != "" {
		labels[labelKey] = id.KeyID
	}
	info, _, err := s.mgr.Create(ctx, tenant, cr)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	id := info.ID
	edge.SetSession(ctx, id)
	end := info.CreatedAt.Add(timeout)
	labels[labelEnd] = end.UTC().Format(time.RFC3339Nano)
	info, err = s.mgr.Amend(ctx, tenant, id, session.Amendment{Labels: labels, ExpiresAt: end})
	if err != nil {
		// The caller gets the error; a sandbox without its records
		// must not live on unseen by E2B's API.
		if derr := s.mgr.Delete(context.WithoutCancel(ctx), tenant, id); derr != nil {
			s.log.Warn("e2b: delete a sandbox whose create failed", "tenant", tenant, "session_id", id, "error", derr)
		}
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, s.sandboxOf(&info.Session))
}

// record returns the tenant's session id, or E2B's 404.
func (s *Server) record(ctx context.Context, id string) (*session.Session, error) {
	info, err := s.mgr.Get(ctx, edge.TenantOf(ctx), id)
	if err != nil {
		if errdefs.Is(err, errdefs.ErrNotFound) {
			return nil, errdefs.New(errdefs.ErrNotFound, "sandbox %q not found", id)
		}
		return nil, err
	}
	if info.State != session.StateRunning {
		return nil, errdefs.New(errdefs.ErrNotFound, "sandbox %q is %s", id, info.State)
	}
	return &info.Session, nil
}

// get serves GET /sandboxes/{id}.
func (s *Server) get(w http.ResponseWriter, r *http.Request) {
	rec, err := s.record(r.Context(), r.PathValue("id"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, s.listedOf(rec, true))
}

// kill serves DELETE /sandboxes/{id}.
func (s *Server) kill(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	tenant, id := edge.TenantOf(ctx), r.PathValue("id")
	if err := s.mgr.Delete(ctx, tenant, id); err != nil {
		if errdefs.Is(err, errdefs.ErrNotFound) {
			err = errdefs.New(errdefs.ErrNotFound, "sandbox %q not found", id)
		}
		s.writeError(w, r, err)
		return
	}
	s.envd.Forget(tenant, id) // its pids, tags and watchers
	w.WriteHeader(http.StatusNoContent)
}

// setEnd moves the sandbox's end to end, or only later when extendOnly.
func (s *Server) setEnd(ctx context.Context, rec *session.Session, end time.Time, extendOnly bool) (*session.Session, error) {
	if extendOnly {
		if cur := endAt(rec); cur.After(end) {
			end = cur
		}
	}
	a := session.Amendment{Labels: map[string]string{labelEnd: end.UTC().Format(time.RFC3339Nano)}}
	if !rec.Paused() {
		a.ExpiresAt = end
	}
	info, err := s.mgr.Amend(ctx, rec.Tenant, rec.ID, a)
	if err != nil {
		return nil, err
	}
	return &info.Session, nil
}

// connect serves POST /sandboxes/{id}/connect: it resumes a paused
// sandbox (201) or answers a running one (200), and moves its end to
// timeout from now if that is later.
func (s *Server) connect(w http.ResponseWriter, r *http.Request) { s.connectOrResume(w, r, false) }

// resume serves the deprecated POST /sandboxes/{id}/resume: connect, for
// a paused sandbox only (409 otherwise).
func (s *Server) resume(w http.ResponseWriter, r *http.Request) { s.connectOrResume(w, r, true) }

func (s *Server) connectOrResume(w http.ResponseWriter, r *http.Request, pausedOnly bool) {
	var req struct {
		Timeout *int64 `json:"timeout"`
	}
	if err := decode(r, &req, true); err != nil {
		s.writeError(w, r, err)
		return
	}
	timeout, err := timeoutOf(req.Timeout)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	ctx := r.Context()
	rec, err := s.record(ctx, r.PathValue("id"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if pausedOnly && !rec.Paused() {
		s.writeError(w, r, errdefs.New(errdefs.ErrConflict, "sandbox %q is not paused", rec.ID))
		return
	}
	status := http.StatusOK
	if rec.Paused() {
		if rec, err = s.wake(ctx, rec); err != nil {
			s.writeError(w, r, err)
			return
		}
		status = http.StatusCreated
	}
	rec, err = s.setEnd(ctx, rec, time.Now().Add(timeout), true)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, status, s.sandboxOf(rec))
}

// wake resumes a paused sandbox. Its end, which passed while it was
// paused if it paused at its timeout, starts again from now: the caller
// moves it.
func (s *Server) wake(ctx context.Context, rec *session.Session) (*session.Session, error) {
	if _, err := s.mgr.Resume(ctx, rec.Tenant, rec.ID); err != nil {
		return nil, err
	}
	end := endAt(rec)
	if now := time.Now(); end.Before(now) {
		end = now
	}
	info, err := s.mgr.Amend(ctx, rec.Tenant, rec.ID, session.Amendment{
		Labels: map[string]string{labelEnd: end.UTC().Format(time.RFC3339Nano)}, ExpiresAt: end.Add(defaultTimeout)})
	if err != nil {
		return nil, err
	}
	return &info.Session, nil
}

// setTimeout serves POST /sandboxes/{id}/timeout: the sandbox ends timeout
// from now, sooner or later than before.
func (s *Server) setTimeout(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Timeout *int64 `json:"timeout"`
	}
	if err := decode(r, &req, false); err != nil {
		s.writeError(w, r, err)
		return
	}
	if req.Timeout == nil {
		s.writeError(w, r, invalid("timeout is required"))
		return
	}
	timeout, err := timeoutOf(req.Timeout)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	rec, err := s.record(r.Context(), r.PathValue("id"))
	if err == nil {
		_, err = s.setEnd(r.Context(), rec, time.Now().Add(timeout), false)
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// refresh serves POST /sandboxes/{id}/refreshes: the sandbox lives at
// least duration seconds more.
func (s *Server) refresh(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Duration *int64 `json:"duration"`
	}
	if err := decode(r, &req, true); err != nil {
		s.writeError(w, r, err)
		return
	}
	d, err := timeoutOf(req.Duration)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	rec, err := s.record(r.Context(), r.PathValue("id"))
	if err == nil {
		_, err = s.setEnd(r.Context(), rec, time.Now().Add(d), true)
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// pause serves POST /sandboxes/{id}/pause: 204, or 409 if it is paused
// already. Whether E2B would keep memory ("memory") makes no difference:
// a frozen sandbox keeps it (docs/E2B.md).
func (s *Server) pause(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Memory *bool `json:"memory"`
	}
	if err := decode(r, &req, true); err != nil {
		s.writeError(w, r, err)
		return
	}
	rec, err := s.record(r.Context(), r.PathValue("id"))
	if err == nil {
		err = s.pauseSession(r.Context(), rec)
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// pauseSession freezes the session and keeps it until it is resumed or
// killed, for as long as the daemon lets a session live.
func (s *Server) pauseSession(ctx context.Context, rec *session.Session) error {
	if err := s.mgr.Pause(ctx, rec.Tenant, rec.ID); err != nil {
		return err
	}
	keep := rec.CreatedAt.Add(s.mgr.Config().MaxLifetime)
	if _, err := s.mgr.Amend(ctx, rec.Tenant, rec.ID, session.Amendment{ExpiresAt: keep}); err != nil {
		// A tenant whose sessions may not live that long keeps its
		// paused sandbox until its end.
		s.log.Warn("e2b: keep a paused sandbox", "tenant", rec.Tenant, "session_id", rec.ID, "error", err)
	}
	return nil
}

// expire is the manager's OnExpire: a sandbox created with
// lifecycle.onTimeout "pause" is paused at its end instead of killed.
func (s *Server) expire(ctx context.Context, rec *session.Session) bool {
	if rec.Labels[labelOnTimeout] != "pause" || rec.Paused() {
		return false
	}
	if err := s.pauseSession(ctx, rec); err != nil {
		s.log.Warn("e2b: pause a sandbox at its timeout; it is deleted instead", "tenant", rec.Tenant, "session_id", rec.ID, "error", err)
		return false
	}
	return true
}

// sandboxMetric is E2B's SandboxMetric.
type sandboxMetric struct {
	Timestamp     time.Time `json:"timestamp"`
	TimestampUnix int64     `json:"timestampUnix"`
	CPUCount      int       `json:"cpuCount"`
	CPUUsedPct    float64   `json:"cpuUsedPct"`
	MemUsed       uint64    `json:"memUsed"`
	MemTotal      int64     `json:"memTotal"`
	MemCache      int64     `json:"memCache"`
	DiskUsed      int64     `json:"diskUsed"`
	DiskTotal     int64     `json:"diskTotal"`
}

// metrics serves GET /sandboxes/{id}/metrics. warren keeps no history of
// a session's use, so the answer is one sample, now, when now is within
// [start, end]: the cgroup's memory and CPU counters (CPU in percent of
// the session's CPUs since it started) and the writable layer's size.
func (s *Server) metrics(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	var bounds [2]int64
	for i, k := range []string{"start", "end"} {
		if v := q.Get(k); v != "" {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || n < 0 {
				s.writeError(w, r, invalid("%s must be a Unix time in seconds", k))
				return
			}
			bounds[i] = n
		}
	}
	ctx := r.Context()
	info, err := s.mgr.Get(ctx, edge.TenantOf(ctx), r.PathValue("id"))
	if err != nil {
		if errdefs.Is(err, errdefs.ErrNotFound) {
			err = errdefs.New(errdefs.ErrNotFound, "sandbox %q not found", r.PathValue("id"))
		}
		s.writeError(w, r, err)
		return
	}
	now := time.Now()
	out := []sandboxMetric{}
	inRange := (bounds[0] == 0 || now.Unix() >= bounds[0]) && (bounds[1] == 0 || now.Unix() <= bounds[1])
	if info.Usage != nil && inRange {
		cpus := max(1, int(info.Limits.CPUs+0.999))
		pct := 0.0
		if up := now.Sub(info.CreatedAt).Seconds(); up > 0 {
			pct = min(100, 100*info.Usage.CPUSeconds/up/info.Limits.CPUs)
		}
		out = append(out, sandboxMetric{Timestamp: now.UTC(), TimestampUnix: now.Unix(), CPUCount: cpus, CPUUsedPct: pct,
			MemUsed: info.Usage.MemoryBytes, MemTotal: info.Limits.MemoryMB << 20, DiskUsed: info.Usage.DiskBytes,
			DiskTotal: info.Limits.DiskMB << 20})
	}
	writeJSON(w, http.StatusOK, out)
}

// listQuery is the filter of GET /v2/sandboxes.
type listQuery struct {
	metadata     map[string]string
	states       map[string]bool
	startedAfter time.Time
	template     string
	asc          bool
	limit        int
	after        string // the cursor: the last sandbox of the page before
}

func parseListQuery(q url.Values) (*listQuery, error) {
	lq := &listQuery{states: map[string]bool{"running": true, "paused": true}, limit: 100}
	if v := q.Get("metadata"); v != "" {
		md, err := parseMetadata(v)
		if err != nil {
			return nil, err
		}
		lq.metadata = md
	}
	if v := q.Get("state"); v != "" {
		lq.states = map[string]bool{}
		for _, st := range strings.Split(v, ",") {
			if st != "running" && st != "paused" {
				return nil, invalid("state %q: want running or paused", st)
			}
			lq.states[st] = true
		}
	}
	if v := q.Get("startedAfter"); v != "" {
		t, err := time.Parse(time.RFC3339Nano, v)
		if err != nil {
			return nil, invalid("startedAfter %q is not an RFC 3339 time", v)
		}
		lq.startedAfter = t
	}
	lq.template = q.Get("template")
	switch q.Get("order") {
	case "", "desc":
	case "asc":
		lq.asc = true
	default:
		return nil, invalid("order %q: want asc or desc", q.Get("order"))
	}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 100 {
			return nil, invalid("limit %q: want 1 to 100", v)
		}
		lq.limit = n
	}
	if v := q.Get("nextToken"); v != "" {
		b, err := base64.RawURLEncoding.DecodeString(v)
		if err != nil || !strings.Contains(string(b), "/") {
			return nil, invalid("nextToken %q is not a token this API gave", v)
		}
		lq.after = string(b)
	}
	return lq, nil
}

// parseMetadata reads E2B's metadata filter: a query string whose keys and
// values were URL-encoded once more ("user=abc&app=prod").
func parseMetadata(v string) (map[string]string, error) {
	vals, err := url.ParseQuery(v)
	if err != nil {
		return nil, invalid("metadata filter %q: %v", v, err)
	}
	md := map[string]string{}
	for k, vs := range vals {
		key, err1 := url.QueryUnescape(k)
		val, err2 := url.QueryUnescape(vs[0])
		if err1 != nil || err2 != nil {
			return nil, invalid("metadata filter %q is not URL-encoded", v)
		}
		md[key] = val
	}
	return md, nil
}

// cursor orders sandboxes by start time, then id.
func cursor(rec *session.Session) string {
	return fmt.Sprintf("%020d/%s", rec.CreatedAt.UnixNano(), rec.ID)
}

func (lq *listQuery) match(rec *session.Session) bool {
	if !lq.states[state(rec)] {
		return false
	}
	for k, v := range lq.metadata {
		if rec.Labels[k] != v || strings.HasPrefix(k, "warren.dev/") {
			return false
		}
	}
	if !lq.startedAfter.IsZero() && rec.CreatedAt.Before(lq.startedAfter) {
		return false
	}
	if lq.template != "" && templateOf(rec) != lq.template && rec.Image != lq.template {
		return false
	}
	return true
}

// sessions returns the tenant's running sessions that match lq, in its
// order.
func (s *Server) sessions(ctx context.Context, lq *listQuery) []*session.Session {
	var out []*session.Session
	// A fleet node that did not answer is in the daemon's log; the list
	// holds what the others hold.
	recs, _ := s.mgr.RecordsFleet(ctx, edge.TenantOf(ctx))
	for _, rec := range recs {
		if rec.State == session.StateRunning && lq.match(rec) {
			out = append(out, rec)
		}
	}
	slices.SortFunc(out, func(a, b *session.Session) int {
		c := strings.Compare(cursor(a), cursor(b))
		if !lq.asc {
			c = -c
		}
		return c
	})
	return out
}

// list serves GET /v2/sandboxes, a page at a time: X-Next-Token names the
// next page while there is one.
func (s *Server) list(w http.ResponseWriter, r *http.Request) {
	lq, err := parseListQuery(r.URL.Query())
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	all := s.sessions(r.Context(), lq)
	running := 0
	for _, rec := range all {
		if !rec.Paused() {
			running++
		}
	}
	if lq.after != "" {
		i := 0
		for i < len(all) {
			c := strings.Compare(cursor(all[i]), lq.after)
			if (lq.asc && c > 0) || (!lq.asc && c < 0) {
				break
			}
			i++
		}
		all = all[i:]
	}
	page := all[:min(len(all), lq.limit)]
	if len(all) > len(page) {
		w.Header().Set("X-Next-Token", base64.RawURLEncoding.EncodeToString([]byte(cursor(page[len(page)-1]))))
	}
	if lq.states["running"] {
		w.Header().Set("X-Total-Running", strconv.Itoa(running))
	}
	out := make([]listed, 0, len(page))
	for _, rec := range page {
		out = append(out, s.listedOf(rec, false))
	}
	writeJSON(w, http.StatusOK, out)
}

// listV1 serves the deprecated GET /sandboxes: every running sandbox.
func (s *Server) listV1(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	q.Del("limit")
	q.Del("nextToken")
	q.Del("state")
	lq, err := parseListQuery(q)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	lq.states = map[string]bool{"running": true}
	out := []listed{}
	for _, rec := range s.sessions(r.Context(), lq) {
		out = append(out, s.listedOf(rec, false))
	}
	writeJSON(w, http.StatusOK, out)
}
