package warrenv1_test

import (
	"slices"
	"testing"

	"github.com/warrenhq/warren/api"
	warrenv1 "github.com/warrenhq/warren/api/gen/warren/v1"
)

// restRPC maps each REST operation to the RPCs that do the same (the
// streaming forms beside the unary ones).
var restRPC = map[string][]string{
	"POST /v1/sessions":                             {"SessionService.CreateSession"},
	"GET /v1/sessions":                              {"SessionService.ListSessions"},
	"GET /v1/sessions/{id}":                         {"SessionService.GetSession"},
	"DELETE /v1/sessions/{id}":                      {"SessionService.DeleteSession"},
	"POST /v1/sessions/{id}/exec":                   {"ExecService.Exec", "ExecService.ExecStream"},
	"POST /v1/run":                                  {"ExecService.Run"},
	"POST /v1/sessions/{id}/processes":              {"ProcessService.StartProcess"},
	"GET /v1/sessions/{id}/processes":               {"ProcessService.ListProcesses"},
	"GET /v1/sessions/{id}/processes/{pid}":         {"ProcessService.GetProcess"},
	"DELETE /v1/sessions/{id}/processes/{pid}":      {"ProcessService.KillProcess"},
	"GET /v1/sessions/{id}/processes/{pid}/output":  {"ProcessService.ProcessOutput"},
	"POST /v1/sessions/{id}/processes/{pid}/stdin":  {"ProcessService.WriteStdin"},
	"POST /v1/sessions/{id}/processes/{pid}/signal": {"ProcessService.SignalProcess"},
	"POST /v1/sessions/{id}/processes/{pid}/resize": {"ProcessService.ResizeProcess"},
	"GET /v1/sessions/{id}/files":                   {"FileService.ReadFile"},
	"PUT /v1/sessions/{id}/files":                   {"FileService.WriteFile", "FileService.WriteFileStream"},
	"DELETE /v1/sessions/{id}/files":                {"FileService.DeleteFile"},
	"GET /v1/sessions/{id}/files/list":              {"FileService.ListFiles"},
	"GET /v1/sessions/{id}/files/stat":              {"FileService.StatFile"},
	"POST /v1/sessions/{id}/files/mkdir":            {"FileService.Mkdir"},
	"GET /v1/sessions/{id}/network":                 {"NetworkService.GetNetwork"},
	"PATCH /v1/sessions/{id}/network":               {"NetworkService.UpdateNetwork"},
	"GET /v1/sessions/{id}/network/denials":         {"NetworkService.ListNetworkDenials"},
}

// restOnly are the REST operations the RPC API leaves out, and why.
var restOnly = map[string]string{
	"GET /v1/sessions/{id}/archive":             "tar archives of directories: not in the RPC API yet",
	"PUT /v1/sessions/{id}/archive":             "tar archives of directories: not in the RPC API yet",
	"GET /v1/sessions/{id}/shell":               "a WebSocket PTY; over RPC: StartProcess with tty, ProcessOutput and WriteStdin",
	"GET /v1/images":                            "administration of the daemon: REST only",
	"POST /v1/images":                           "administration of the daemon: REST only",
	"GET /v1/images/{name}":                     "administration of the daemon: REST only",
	"DELETE /v1/images/{name}":                  "administration of the daemon: REST only",
	"POST /v1/images/pull":                      "administration of the daemon: REST only",
	"POST /v1/images/prune":                     "administration of the daemon: REST only",
	"GET /v1/stats":                             "administration of the daemon: REST only",
	"POST /v1/keys":                             "access control: REST only",
	"GET /v1/keys":                              "access control: REST only",
	"DELETE /v1/keys/{key_id}":                  "access control: REST only",
	"POST /v1/tokens":                           "access control: REST only",
	"GET /v1/tenants":                           "access control: REST only",
	"GET /v1/tenants/{name}":                    "access control: REST only",
	"PUT /v1/tenants/{name}":                    "access control: REST only",
	"DELETE /v1/tenants/{name}":                 "access control: REST only",
	"GET /v1/audit":                             "access control: REST only",
	"POST /v1/workspaces":                       "workspaces and snapshots: REST, the CLI and the Go client for now",
	"GET /v1/workspaces":                        "workspaces and snapshots: REST, the CLI and the Go client for now",
	"GET /v1/workspaces/{name}":                 "workspaces and snapshots: REST, the CLI and the Go client for now",
	"DELETE /v1/workspaces/{name}":              "workspaces and snapshots: REST, the CLI and the Go client for now",
	"POST /v1/sessions/{id}/snapshot":           "workspaces and snapshots: REST, the CLI and the Go client for now",
	"POST /v1/sessions/{id}/fork":               "workspaces and snapshots: REST, the CLI and the Go client for now",
	"GET /v1/snapshots":                         "workspaces and snapshots: REST, the CLI and the Go client for now",
	"GET /v1/snapshots/{name}":                  "workspaces and snapshots: REST, the CLI and the Go client for now",
	"DELETE /v1/snapshots/{name}":               "workspaces and snapshots: REST, the CLI and the Go client for now",
	"GET /v1/snapshots/{name}/export":           "workspaces and snapshots: REST, the CLI and the Go client for now",
	"PUT /v1/snapshots/{name}/import":           "workspaces and snapshots: REST, the CLI and the Go client for now",
	"GET /v1/sessions/{id}/ports":               "ports into a sandbox: REST, the CLI and the Go client for now (the proxy itself is HTTP by nature)",
	"PUT /v1/sessions/{id}/ports/{port}":        "ports into a sandbox: REST, the CLI and the Go client for now (the proxy itself is HTTP by nature)",
	"GET /v1/sessions/{id}/port-forward/{port}": "raw TCP over a WebSocket; a bidirectional RPC stream may follow",
	"GET /healthz":                              "probe",
	"GET /readyz":                               "probe",
	"GET /metrics":                              "Prometheus metrics",
	"GET /openapi.yaml":                         "the REST description; RPC clients use server reflection",
	"GET /openapi.json":                         "the REST description; RPC clients use server reflection",
}

// TestProtoCoversREST keeps the two contracts in step: every REST
// operation has its RPCs or a reason to have none, and every RPC does what
// a REST operation does.
func TestProtoCoversREST(t *testing.T) {
	routes, err := api.OpenAPIRoutes()
	if err != nil {
		t.Fatal(err)
	}
	rpcs := map[string]bool{}
	svcs := warrenv1.File_warren_v1_warren_proto.Services()
	for i := range svcs.Len() {
		methods := svcs.Get(i).Methods()
		for j := range methods.Len() {
			rpcs[string(svcs.Get(i).Name())+"."+string(methods.Get(j).Name())] = false
		}
	}
	for _, route := range routes {
		mapped, ok := restRPC[route]
		_, skipped := restOnly[route]
		switch {
		case ok && skipped:
			t.Errorf("%s is both mapped and REST only", route)
		case !ok && !skipped:
			t.Errorf("REST operation %s has no RPC: add one to warren.proto, or say why not in restOnly", route)
		}
		for _, rpc := range mapped {
			if _, exists := rpcs[rpc]; !exists {
				t.Errorf("%s maps to %s, which warren.proto does not have", route, rpc)
			}
			rpcs[rpc] = true
		}
	}
	for route := range restRPC {
		if !slices.Contains(routes, route) {
			t.Errorf("restRPC maps %s, which the OpenAPI document does not have", route)
		}
	}
	for route := range restOnly {
		if !slices.Contains(routes, route) {
			t.Errorf("restOnly lists %s, which the OpenAPI document does not have", route)
		}
	}
	for rpc, covered := range rpcs {
		if !covered {
			t.Errorf("RPC %s matches no REST operation: add it to restRPC", rpc)
		}
	}
}
