// Package fleet runs three real warren daemons (separate processes, so
// that kill -9 is real) as one fleet on loopback, over three etcd members
// embedded in the test process, and checks what a fleet promises: a
// session id and a tenant's quota are fleet-wide, a dead node's sessions
// are declared lost after the grace and their quota comes back, a node
// back within the grace keeps its sessions, one back after it deletes
// them (fencing), and nothing is left on the host at the end.
package fleet
