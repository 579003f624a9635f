package session

import (
	"context"
	"slices"
)

// FleetLister returns the sessions of tenant ("": every tenant's) that the
// other nodes of a fleet hold, and those the fleet declared lost (state
// StateLost), each with its Node; missing names the nodes whose part is
// not in the answer (down, or too slow). It acts for the caller of ctx and
// answers nothing for a call another node forwarded here: that node asks
// every node itself, so a list is one hop at most.
type FleetLister func(ctx context.Context, tenant string) (infos []*Info, missing []string)

// SetFleetLister makes ListFleet and RecordsFleet cover the fleet: node is
// this node's name. It is set once, before the manager serves.
func (m *Manager) SetFleetLister(node string, l FleetLister) {
	m.fleet, m.fleetNode = l, node
}

// ListFleet is List across the fleet: this node's sessions and every other
// node's (on a single node, List), in List's order (oldest first, then
// id). missing names the fleet nodes whose sessions the list leaves out.
// Every transport's "list sessions" answers with it, so a client sees the
// same list whichever node it reaches.
func (m *Manager) ListFleet(ctx context.Context, tenant string) (infos []*Info, missing []string) {
	local := m.List(ctx, tenant)
	if m.fleet == nil {
		return local, nil
	}
	for _, in := range local {
		in.Node = m.fleetNode
	}
	remote, missing := m.fleet(ctx, tenant)
	return mergeInfos(local, remote), missing
}

// RecordsFleet is Records across the fleet, for lists that need no live
// usage (the E2B facade's): sessions the fleet declared lost are left out.
func (m *Manager) RecordsFleet(ctx context.Context, tenant string) (recs []*Session, missing []string) {
	recs = m.Records(tenant)
	if m.fleet == nil {
		return recs, nil
	}
	remote, missing := m.fleet(ctx, tenant)
	seen := make(map[[2]string]bool, len(recs))
	for _, r := range recs {
		seen[[2]string{r.Tenant, r.ID}] = true
	}
	for _, in := range remote {
		if k := [2]string{in.Tenant, in.ID}; in.State != StateLost && !seen[k] {
			seen[k] = true
			rec := in.Session
			recs = append(recs, &rec)
		}
	}
	return recs, missing
}

// mergeInfos is local and remote in one list, oldest first then by id,
// each (tenant, id) once (this node's record wins: a session that just
// moved here may still be in a slower peer's answer).
func mergeInfos(local, remote []*Info) []*Info {
	out := make([]*Info, 0, len(local)+len(remote))
	seen := make(map[[2]string]bool, len(local)+len(remote))
	for _, in := range slices.Concat(local, remote) {
		if k := [2]string{in.Tenant, in.ID}; !seen[k] {
			seen[k] = true
			out = append(out, in)
		}
	}
	slices.SortStableFunc(out, byCreated)
	return out
}
