package grpcapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/warrenhq/warren/internal/errdefs"
)

// HealthCheckProcedure is grpc.health.v1's Check, what Kubernetes' gRPC
// probes, grpc_health_probe and load balancers call.
const HealthCheckProcedure = "/grpc.health.v1.Health/Check"

// The serving statuses of grpc.health.v1.HealthCheckResponse.
const (
	healthServing    = 1
	healthNotServing = 2
)

// healthRequest and healthResponse are grpc.health.v1's two messages:
//
//	message HealthCheckRequest { string service = 1; }
//	message HealthCheckResponse { ServingStatus status = 1; }
//
// They are encoded by hand (healthCodec) because the usual ways in do not
// fit: connectrpc.com/grpchealth is refused by the module proxy here (see
// STACK.md), and grpc-go's grpc_health_v1 package links grpc-go into the
// daemon, which STACK.md keeps for interop tests only. Two one-field
// messages do not justify either.
type healthRequest struct{ Service string }

type healthResponse struct{ Status int32 }

// healthHandler serves Check without authentication, as /readyz: the
// daemon (service "") and each warren.v1 service are SERVING while the
// daemon takes new work and NOT_SERVING while it does not (shutting down,
// disk full, store unwritable); other services are NOT_FOUND. Watch is not
// served: it answers Unimplemented, which the protocol allows and probes
// handle by polling Check.
func (s *Server) healthHandler() (string, http.Handler) {
	return HealthCheckProcedure, connect.NewUnaryHandler(HealthCheckProcedure,
		func(ctx context.Context, req *connect.Request[healthRequest]) (*connect.Response[healthResponse], error) {
			if svc := req.Msg.Service; svc != "" && !slices.Contains(serviceNames(), svc) {
				return nil, connect.NewError(connect.CodeNotFound, fmt.Errorf("unknown service %q", svc))
			}
			status := int32(healthServing)
			if s.ready != nil {
				if err := s.ready(ctx); err != nil {
					status = healthNotServing
				}
			}
			return connect.NewResponse(&healthResponse{Status: status}), nil
		},
		connect.WithCodec(healthCodec{"proto"}),
		connect.WithCodec(healthCodec{"json"}),
		connect.WithCodec(healthCodec{"json; charset=utf-8"}),
		connect.WithRecover(s.recovered),
	)
}

// healthCodec encodes the health messages in the binary protobuf form
// ("proto") or as protojson would ("json").
type healthCodec struct{ name string }

func (c healthCodec) Name() string { return c.name }

var healthStatusNames = map[int32]string{0: "UNKNOWN", 1: "SERVING", 2: "NOT_SERVING", 3: "SERVICE_UNKNOWN"}

func (c healthCodec) Marshal(msg any) ([]byte, error) {
	m, ok := msg.(*healthResponse)
	if !ok {
		return nil, fmt.Errorf("grpcapi: the health codec cannot marshal %T", msg)
	}
	if c.name != "proto" {
		return json.Marshal(map[string]string{"status": healthStatusNames[m.Status]})
	}
	if m.Status == 0 {
		return []byte{}, nil // proto3 leaves a zero field out
	}
	b := protowire.AppendTag(nil, 1, protowire.VarintType)
	return protowire.AppendVarint(b, uint64(m.Status)), nil
}

func (c healthCodec) Unmarshal(data []byte, msg any) error {
	m, ok := msg.(*healthRequest)
	if !ok {
		return fmt.Errorf("grpcapi: the health codec cannot unmarshal %T", msg)
	}
	if c.name != "proto" {
		var v struct {
			Service string `json:"service"`
		}
		if len(data) == 0 {
			return nil
		}
		if err := json.Unmarshal(data, &v); err != nil {
			return errdefs.New(errdefs.ErrInvalidArgument, "health check request: %w", err)
		}
		m.Service = v.Service
		return nil
	}
	for len(data) > 0 {
		num, typ, n := protowire.ConsumeTag(data)
		if n < 0 {
			return errors.New("health check request: malformed protobuf")
		}
		data = data[n:]
		if num == 1 && typ == protowire.BytesType {
			v, n := protowire.ConsumeBytes(data)
			if n < 0 {
				return errors.New("health check request: malformed protobuf")
			}
			m.Service, data = string(v), data[n:]
			continue
		}
		n = protowire.ConsumeFieldValue(num, typ, data) // unknown fields are skipped
		if n < 0 {
			return errors.New("health check request: malformed protobuf")
		}
		data = data[n:]
	}
	return nil
}
