package edge

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/warrenhq/warren/api"
	"github.com/warrenhq/warren/internal/auth"
	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/session"
	"github.com/warrenhq/warren/internal/wire"
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
// Forwarding.Peers the receiving node asks every other node too
// (FleetLister).
func isFleetList(f *Forwarding, r *http.Request) bool {
	return f.Peers != nil && r.Method == http.MethodGet && r.URL.Path == "/v1/sessions"
}

// verifyListHop serves a GET /v1/sessions another fleet node sent, signed:
// answered by this node alone (its handler's ListFleet asks no peers for a
// forwarded call), one hop at most. A list without the header goes to
// next as it is.
func (e *Edge) verifyListHop(f *Forwarding, w http.ResponseWriter, r *http.Request, next http.Handler) {
	v := r.Header.Get(ForwardHeader)
	if v == "" {
		next.ServeHTTP(w, r)
		return
	}
	secret := f.Secret()
	if secret == nil {
		e.WriteError(w, r, errdefs.WithRetryAfter(errdefs.ErrUnavailable, time.Second, "this fleet node cannot check forwarded requests yet (no fleet secret)"))
		return
	}
	who, _, err := e.verifyHop(secret, v, r)
	if err == nil && who == nil {
		err = errdefs.New(errdefs.ErrUnauthenticated, "a list of sessions names its caller")
	}
	if err != nil {
		e.WriteError(w, r, err)
		return
	}
	next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), forwardedKey{}, who)))
}

// FleetLister is the session.FleetLister of f: it asks every live peer for
// the caller's sessions (in parallel, the caller signed as for a forward,
// each peer answering for itself alone within listTimeout) and adds the
// sessions the fleet declared lost. Peers that are down or did not answer
// are missing. A call another node forwarded here lists nothing: that
// node asks every node itself.
func (e *Edge) FleetLister(f *Forwarding) session.FleetLister {
	tr := f.transport()
	return func(ctx context.Context, tenant string) ([]*session.Info, []string) {
		who := IdentityOf(ctx)
		if f.Peers == nil || who == nil || forwardedIdentity(ctx) != nil {
			return nil, nil
		}
		all := tenant == ""
		peers, lost := f.Peers(tenant)
		secret := f.Secret()
		type part struct {
			node  string
			items []api.Session
			ok    bool
		}
		parts := make([]part, len(peers))
		var wg sync.WaitGroup
		for i, p := range peers {
			parts[i].node = p.Node
			if !p.Alive || secret == nil {
				continue
			}
			wg.Go(func() {
				parts[i].items, parts[i].ok = e.listPeer(ctx, tr, secret, who, f.Node, p, all)
			})
		}
		wg.Wait()
		var infos []*session.Info
		var missing []string
		for _, p := range parts {
			if !p.ok {
				missing = append(missing, p.node)
				continue
			}
			for i := range p.items {
				infos = append(infos, wire.SessionInfo(&p.items[i], who.Tenant, p.node))
			}
		}
		for _, l := range lost {
			// Expiry reads as the moment it was declared lost.
			infos = append(infos, &session.Info{Node: l.Node, Session: session.Session{
				ID: l.ID, Tenant: l.Tenant, State: session.StateLost, CreatedAt: l.Created, LastUsedAt: l.Created, IdleTTL: l.LostAt.Sub(l.Created)}})
		}
		if len(missing) > 0 {
			slices.Sort(missing)
			e.log.Warn("listed sessions without some fleet nodes' part", "nodes", missing, "tenant", who.Tenant, "all", all)
		}
		return infos, missing
	}
}

// listPeer asks node p for who's sessions (every tenant's with all),
// signed as a forward; false when it did not answer a list in time.
func (e *Edge) listPeer(ctx context.Context, tr http.RoundTripper, secret []byte, who *auth.Identity, from string, p Owner, all bool) ([]api.Session, bool) {
	ctx, cancel := context.WithTimeout(ctx, listTimeout)
	defer cancel()
	u := strings.TrimSuffix(p.Addr, "/") + "/v1/sessions"
	if all {
		u += "?all=true"
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, false
	}
	req.Header.Set(ForwardHeader, sign(secret, who, req, from))
	if id := RequestID(ctx); id != "" {
		req.Header.Set(RequestIDHeader, id)
	}
	resp, err := tr.RoundTrip(req)
	if err != nil {
		e.log.Debug("a fleet node did not answer a list", "node", p.Node, "error", err)
		return nil, false
	}
	defer resp.Body.Close()
	var l api.SessionList
	if resp.StatusCode != http.StatusOK {
		e.log.Debug("a fleet node did not answer a list", "node", p.Node, "status", resp.StatusCode)
		return nil, false
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 64<<20)).Decode(&l); err != nil {
		e.log.Debug("a fleet node's list did not parse", "node", p.Node, "error", err)
		return nil, false
	}
	return l.Sessions, true
}
