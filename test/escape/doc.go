// Package escape is warren's attack suite: tests that run real daemons and
// real sandboxes and try, from inside a session and through the REST API, to
// read the host's files, gain privileges, reach the host's processes,
// network or the agent's control channel, break out of the resource limits,
// or race the file API into following a planted symlink out of the sandbox.
// Every case asserts the specific errno or outcome the hardening must give;
// a test that fails here is a hole in the sandbox, not a flaky test.
package escape
