package api

// Port is one TCP port of a session: what listens on it inside the
// sandbox, and how to reach it (GET /v1/sessions/{id}/ports).
type Port struct {
	Port int `json:"port"`
	// Addresses are the addresses the port is bound to inside the sandbox
	// (0.0.0.0 or :: for any); empty when nothing listens (a public port
	// whose server stopped).
	Addresses []string `json:"addresses"`
	// LoopbackOnly: bound to loopback addresses only. warren's proxy
	// reaches such ports too: it connects from inside the sandbox.
	LoopbackOnly bool `json:"loopback_only"`
	// Public: served without authentication.
	Public bool `json:"public"`
	// Path is where the daemon serves the port: /v1/sessions/{id}/ports/{port}/.
	Path string `json:"path"`
	// PreviewHost is the host name that serves the port when the daemon
	// has a preview_domain: {port}-{id}.{preview_domain}.
	PreviewHost string `json:"preview_host,omitempty"`
}

// PortList is the body of GET /v1/sessions/{id}/ports.
type PortList struct {
	Ports []Port `json:"ports"`
}

// PortUpdate is the body of PUT /v1/sessions/{id}/ports/{port}.
type PortUpdate struct {
	// Public serves the port without authentication, if the tenant's
	// settings allow it; false makes it private again.
	Public bool `json:"public"`
}
