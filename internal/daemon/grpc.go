package daemon

import (
	"net/http"

	"github.com/warrenhq/warren/internal/grpcapi"
)

// grpcRoutes mounts the gRPC, gRPC-Web and Connect services (warren.v1)
// and server reflection. The services authenticate through the REST
// server's Admit and audit through its Record; gRPC needs HTTP/2, which
// the daemon's server speaks in cleartext (h2c) beside HTTP/1.1.
func (d *Daemon) grpcRoutes(mux *http.ServeMux) {
	grpcapi.New(grpcapi.Config{Manager: d.manager, API: d.api, Log: d.log}).Mount(mux)
}
