// Package grpcapi serves warren's RPC API (warren.v1) as gRPC, gRPC-Web and
// Connect with connect-go, on the daemon's one port beside REST. Handlers
// are thin adapters over the session manager, made like the REST handlers
// in httpapi: they decode, call the manager with the caller's tenant and
// encode. Admission (authentication, rate limits), the
// caller's identity and the audit log are the edge's (internal/edge),
// shared with every transport; errors become connect codes in one place
// (connectError). grpc.health.v1 answers probes, and a gRPC call of an
// unknown procedure gets Unimplemented in its own protocol (Unrouted). The package must hold no session logic of
// its own.
package grpcapi
