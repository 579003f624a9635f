// Package conformance holds one scenario suite that runs unchanged over
// every transport warren serves (REST, Connect, gRPC, MCP over Streamable
// HTTP and stdio), so that the transports cannot drift apart. Each
// transport is an adapter in its own _test.go file that registers itself;
// the scenarios are in suite_test.go.
package conformance
