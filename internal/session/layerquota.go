package session

import "context"

// checkLayerQuota refuses one more workspace (kind "workspace") or
// snapshot past the tenant's max_workspaces or max_snapshots. The count is
// taken before the new one is made: two creates racing at the limit may
// both pass, which costs at most one over (each is size-limited anyway).
func (l *layerService) checkLayerQuota(ctx context.Context, tenant, kind string) error {
	tl, err := l.host.tenantLimits(ctx, tenant)
	if err != nil {
		return err
	}
	limit, quota := tl.MaxWorkspaces, "max_workspaces"
	if kind == "snapshot" {
		limit, quota = tl.MaxSnapshots, "max_snapshots"
	}
	if limit <= 0 {
		return nil
	}
	var n int
	if kind == "snapshot" {
		l, err := l.cfg.Store.ListSnapshots(ctx, tenant)
		if err != nil {
			return err
		}
		n = len(l)
	} else {
		l, err := l.cfg.Store.ListWorkspaces(ctx, tenant)
		if err != nil {
			return err
		}
		n = len(l)
	}
	if n >= limit {
		return quotaErr(tenant, quota, "it has %d %ss, the most it may", n, kind)
	}
	return nil
}
