package edge

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/warrenhq/warren/internal/auth"
	"github.com/warrenhq/warren/internal/errdefs"
)

// PartialHeader names, on a fleet's GET /v1/sessions, the nodes whose
// sessions the answer leaves out: down, or not answering within
// listTimeout (docs/FLEET.md, "Listing sessions").
const PartialHeader = "Warren-Fleet-Partial"

// listTimeout bounds the wait for each peer's part of a list: a node that
// is slow or dead must not hold the whole answer up.
const listTimeout = 2 * time.Second

// LostSession is a session the fleet declared lost with its node, listed
// with state "lost".
type LostSession struct {
	Tenant, ID, Node string
	// Created is when it was created, LostAt when it was declared lost.
	Created, LostAt time.Time
}

// isFleetList reports whether r lists sessions (GET /v1/sessions): with
// Forwarding.Peers the receiving node asks every other node too.
func isFleetList(f *Forwarding, r *http.Request) bool {
	return f.Peers != nil && r.Method == http.MethodGet && r.URL.Path == "/v1/sessions"
}

// listFleet answers GET /v1/sessions for the whole fleet: this node's
// sessions, each live peer's (asked in parallel with the caller signed as
// for a forward; a signed list is answered by its node alone, one hop at
// most) and the lost records, merged in the list's order (created_at,
// then id). Peers that are down or did not answer are named in
// PartialHeader. Errors of this node's own answer (401, 403, bad all=)
// pass through unchanged.
func (e *Edge) listFleet(f *Forwarding, tr http.RoundTripper, w http.ResponseWriter, r *http.Request, next http.Handler) {
	if v := r.Header.Get(ForwardHeader); v != "" {
		secret := f.Secret()
		if secret == nil {
			e.WriteError(w, r, errdefs.WithRetryAfter(errdefs.ErrUnavailable, time.Second, "this fleet node cannot check forwarded requests yet (no fleet secret)"))
			return
		}
		who, _, err := verify(secret, v, r)
		if err == nil && who == nil {
			err = errdefs.New(errdefs.ErrUnauthenticated, "a list of sessions names its caller")
		}
		if err != nil {
			e.WriteError(w, r, err)
			return
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), forwardedKey{}, who)))
		return
	}
	who := noAuthIdentity
	if e.auth != nil {
		var err error
		if who, err = e.auth.Authenticate(r.Context(), r); err != nil {
			next.ServeHTTP(w, r) // refused there as always
			return
		}
	}
	local := &captured{header: http.Header{}, status: http.StatusOK}
	next.ServeHTTP(local, r)
	if local.status != http.StatusOK {
		local.copyTo(w)
		return
	}
	// This node answered 200, so all= parsed and, if true, the caller is
	// an admin.
	all, _ := strconv.ParseBool(r.URL.Query().Get("all"))
	tenant := who.Tenant
	if all {
		tenant = ""
	}
	peers, lost := f.Peers(tenant)
	secret := f.Secret()
	type part struct {
		node  string
		items []json.RawMessage
		ok    bool
	}
	parts := make([]part, len(peers))
	var wg sync.WaitGroup
	for i, p := range peers {
		parts[i].node = p.Node
		if !p.Alive || secret == nil {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			parts[i].items, parts[i].ok = e.listPeer(r, tr, secret, who, f.Node, p)
		}()
	}
	wg.Wait()
	var items []json.RawMessage
	if !local.parse() {
		local.copyTo(w) // not a list this code knows: left as it is
		return
	}
	items = append(items, local.items...)
	var missing []string
	for _, p := range parts {
		if !p.ok {
			missing = append(missing, p.node)
			continue
		}
		items = append(items, p.items...)
	}
	for _, l := range lost {
		// Every field the API marks required is there (zero where the
		// record does not know it), so that typed clients read it.
		s := map[string]any{"id": l.ID, "state": "lost", "created_at": l.Created, "node": l.Node,
			"image": "", "last_used_at": l.Created, "expires_at": l.LostAt, "cwd": "", "limits": map[string]any{}, "network": "", "user": ""}
		if all {
			s["tenant"] = l.Tenant
		}
		b, _ := json.Marshal(s)
		items = append(items, b)
	}
	items = sortSessions(items)
	for k, v := range local.header {
		if k != "Content-Length" {
			w.Header()[k] = v
		}
	}
	if len(missing) > 0 {
		slices.Sort(missing)
		w.Header().Set(PartialHeader, strings.Join(missing, ","))
		e.log.Warn("listed sessions without some fleet nodes' part", "nodes", missing, "tenant", who.Tenant)
	}
	if items == nil {
		items = []json.RawMessage{}
	}
	WriteJSON(w, http.StatusOK, map[string][]json.RawMessage{"sessions": items})
}

// listPeer asks node p for who's sessions, signed as a forward; false when
// it did not answer a list in time.
func (e *Edge) listPeer(r *http.Request, tr http.RoundTripper, secret []byte, who *auth.Identity, from string, p Owner) ([]json.RawMessage, bool) {
	ctx, cancel := context.WithTimeout(r.Context(), listTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(p.Addr, "/")+r.URL.RequestURI(), nil)
	if err != nil {
		return nil, false
	}
	req.Header.Set(ForwardHeader, sign(secret, who, req, from))
	if id := r.Header.Get(RequestIDHeader); id != "" {
		req.Header.Set(RequestIDHeader, id)
	}
	resp, err := tr.RoundTrip(req)
	if err != nil {
		e.log.Debug("a fleet node did not answer a list", "node", p.Node, "error", err)
		return nil, false
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil || resp.StatusCode != http.StatusOK {
		e.log.Debug("a fleet node did not answer a list", "node", p.Node, "status", resp.StatusCode, "error", err)
		return nil, false
	}
	var l struct {
		Sessions []json.RawMessage `json:"sessions"`
	}
	if json.Unmarshal(b, &l) != nil {
		return nil, false
	}
	return l.Sessions, true
}

// sortSessions orders a merged list as one node orders its own (created_at,
// then id), dropping a second record of the same session.
func sortSessions(items []json.RawMessage) []json.RawMessage {
	type key struct {
		ID        string    `json:"id"`
		Tenant    string    `json:"tenant"`
		CreatedAt time.Time `json:"created_at"`
	}
	keys := make([]key, len(items))
	idx := make([]int, len(items))
	for i, it := range items {
		_ = json.Unmarshal(it, &keys[i])
		idx[i] = i
	}
	seen := map[[2]string]bool{}
	var out []int
	for _, i := range idx {
		k := [2]string{keys[i].Tenant, keys[i].ID}
		if !seen[k] {
			seen[k] = true
			out = append(out, i)
		}
	}
	slices.SortStableFunc(out, func(a, b int) int {
		if c := keys[a].CreatedAt.Compare(keys[b].CreatedAt); c != 0 {
			return c
		}
		return strings.Compare(keys[a].ID, keys[b].ID)
	})
	res := make([]json.RawMessage, len(out))
	for i, j := range out {
		res[i] = items[j]
	}
	return res
}

// captured holds this node's own answer to a list.
type captured struct {
	header http.Header
	status int
	body   bytes.Buffer
	// items, after parse: the list's sessions.
	items  []json.RawMessage
	parsed int // 0 not yet, 1 a list, 2 not one
}

func (c *captured) Header() http.Header         { return c.header }
func (c *captured) Write(b []byte) (int, error) { return c.body.Write(b) }
func (c *captured) WriteHeader(status int)      { c.status = status }

func (c *captured) copyTo(w http.ResponseWriter) {
	for k, v := range c.header {
		w.Header()[k] = v
	}
	w.WriteHeader(c.status)
	_, _ = w.Write(c.body.Bytes())
}

// parse reads the captured list once; false if it is not one.
func (c *captured) parse() bool {
	if c.parsed == 0 {
		var l struct {
			Sessions []json.RawMessage `json:"sessions"`
		}
		c.parsed = 2
		if json.Unmarshal(c.body.Bytes(), &l) == nil && l.Sessions != nil {
			c.parsed, c.items = 1, l.Sessions
		}
	}
	return c.parsed == 1
}
