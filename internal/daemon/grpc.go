package daemon

import "net/http"

// grpcRoutes mounts the gRPC, gRPC-Web and Connect services.
func (d *Daemon) grpcRoutes(mux *http.ServeMux) {}
