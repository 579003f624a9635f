package session

import "context"

type nodeRefusalKey struct{}

// OnNodeRefusal returns ctx carrying refused, which a create made with it
// calls when this node refuses it for a reason of its own rather than the
// caller's: it holds its maximum of sessions, its disk is nearly full, or
// (in a fleet) it is draining, not registered or cannot read the tenant's
// settings from the registry. Another node of a fleet
// may take such a create; a refusal for the tenant's quota, which holds
// fleet-wide, is not one. The fleet's edge places the create elsewhere on
// it (docs/FLEET.md, "Placement"). refused runs before the transport
// answers, on the create's goroutine.
func OnNodeRefusal(ctx context.Context, refused func()) context.Context {
	return context.WithValue(ctx, nodeRefusalKey{}, refused)
}

// NodeRefused tells ctx's OnNodeRefusal hook, if it has one, that err
// refuses a create for this node's own reason, and returns err.
func NodeRefused(ctx context.Context, err error) error {
	if fn, _ := ctx.Value(nodeRefusalKey{}).(func()); fn != nil {
		fn()
	}
	return err
}
