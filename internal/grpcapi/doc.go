// Package grpcapi serves warren's RPC API (warren.v1) as gRPC, gRPC-Web and
// Connect with connect-go, on the daemon's one port beside REST. Handlers
// are thin adapters over the session manager, made like the REST handlers
// in httpapi: they decode, call the manager with the caller's tenant and
// encode. Authentication, rate limits and the audit log are the REST
// server's (httpapi.Server.Admit and Record); errors become connect codes
// in one place (connectError). The package must hold no session logic of
// its own.
package grpcapi
