package grpcapi

import (
	"context"

	"connectrpc.com/connect"

	warrenv1 "github.com/warrenhq/warren/api/gen/warren/v1"
	"github.com/warrenhq/warren/internal/session"
)

// networks serves warren.v1.NetworkService: REST's
// /v1/sessions/{id}/network and /network/denials.
type networks struct{ s *Server }

func toNetworkPolicy(p *session.NetworkPolicy) *warrenv1.NetworkPolicy {
	return &warrenv1.NetworkPolicy{Mode: p.Mode, Allow: p.Allow, Deny: p.Deny}
}

func (h networks) GetNetwork(ctx context.Context, req *connect.Request[warrenv1.GetNetworkRequest]) (*connect.Response[warrenv1.NetworkPolicy], error) {
	p, err := h.s.m.SessionNetwork(ctx, tenant(ctx), req.Msg.GetSessionId())
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(toNetworkPolicy(p)), nil
}

func (h networks) UpdateNetwork(ctx context.Context, req *connect.Request[warrenv1.UpdateNetworkRequest]) (*connect.Response[warrenv1.NetworkPolicy], error) {
	m := req.Msg
	p, err := h.s.m.SetSessionNetwork(ctx, tenant(ctx), m.GetSessionId(),
		session.NetworkPolicy{Mode: m.GetMode(), Allow: m.GetAllow(), Deny: m.GetDeny()})
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(toNetworkPolicy(p)), nil
}

func (h networks) ListNetworkDenials(ctx context.Context, req *connect.Request[warrenv1.ListNetworkDenialsRequest]) (*connect.Response[warrenv1.ListNetworkDenialsResponse], error) {
	ds, err := h.s.m.NetworkDenials(ctx, tenant(ctx), req.Msg.GetSessionId())
	if err != nil {
		return nil, err
	}
	out := &warrenv1.ListNetworkDenialsResponse{Denials: make([]*warrenv1.NetworkDenial, len(ds))}
	for i, d := range ds {
		out.Denials[i] = &warrenv1.NetworkDenial{Time: timestamp(d.Time), Host: d.Host, Port: int32(d.Port), Proto: d.Proto, Reason: d.Reason}
	}
	return connect.NewResponse(out), nil
}
