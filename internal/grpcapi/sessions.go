package grpcapi

import (
	"context"
	"strings"

	"connectrpc.com/connect"

	warrenv1 "github.com/warrenhq/warren/api/gen/warren/v1"
	"github.com/warrenhq/warren/internal/edge"
	"github.com/warrenhq/warren/internal/session"
	"github.com/warrenhq/warren/internal/wire"
)

// sessions serves warren.v1.SessionService.
type sessions struct{ s *Server }

func (h sessions) CreateSession(ctx context.Context, req *connect.Request[warrenv1.CreateSessionRequest]) (*connect.Response[warrenv1.CreateSessionResponse], error) {
	m, tn := req.Msg, tenant(ctx)
	info, created, err := h.s.m.Create(ctx, tn, &session.CreateRequest{
		ID:           m.GetId(),
		Image:        m.GetImage(),
		Env:          m.GetEnv(),
		Cwd:          m.GetCwd(),
		Limits:       toLimits(m.GetLimits()),
		Network:      m.GetNetwork(),
		NetworkAllow: m.GetNetworkAllow(),
		NetworkDeny:  m.GetNetworkDeny(),
		IdleTTL:      wire.Seconds(m.GetTtlSeconds()),
		MaxLifetime:  wire.Seconds(m.GetMaxLifetimeSeconds()),
		Labels:       m.GetLabels(),
		User:         m.GetUser(),
	})
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&warrenv1.CreateSessionResponse{Session: toSession(info), Created: created}), nil
}

func (h sessions) GetSession(ctx context.Context, req *connect.Request[warrenv1.GetSessionRequest]) (*connect.Response[warrenv1.GetSessionResponse], error) {
	info, err := h.s.m.Get(ctx, tenant(ctx), req.Msg.GetSessionId())
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&warrenv1.GetSessionResponse{Session: toSession(info)}), nil
}

func (h sessions) ListSessions(ctx context.Context, req *connect.Request[warrenv1.ListSessionsRequest]) (*connect.Response[warrenv1.ListSessionsResponse], error) {
	tn, all := tenant(ctx), req.Msg.GetAll()
	if all {
		if err := requireAdmin(ctx, "listing every tenant's sessions"); err != nil {
			return nil, err
		}
		tn = ""
	}
	infos, missing := h.s.m.ListFleet(ctx, tn)
	out := &warrenv1.ListSessionsResponse{Sessions: make([]*warrenv1.Session, 0, len(infos))}
	for _, in := range infos {
		ps := toSession(in)
		if all {
			ps.Tenant = in.Tenant
		}
		out.Sessions = append(out.Sessions, ps)
	}
	res := connect.NewResponse(out)
	if len(missing) > 0 {
		res.Header().Set(edge.PartialHeader, strings.Join(missing, ","))
	}
	return res, nil
}

func (h sessions) DeleteSession(ctx context.Context, req *connect.Request[warrenv1.DeleteSessionRequest]) (*connect.Response[warrenv1.DeleteSessionResponse], error) {
	if err := h.s.m.Delete(ctx, tenant(ctx), req.Msg.GetSessionId()); err != nil {
		return nil, err
	}
	return connect.NewResponse(&warrenv1.DeleteSessionResponse{}), nil
}
