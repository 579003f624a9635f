// Package sdktypescript runs the TypeScript SDK's own checks from go test
// (and so from make test): tsc builds dist/ from src/, the wire types must
// be what openapi-typescript generates from api/openapi.yaml today, node's
// test runner drives a real daemon through the SDK and its framework
// adapters, the README's quick start and the examples run as written,
// typedoc builds the API reference from the doc comments, and the
// benchmark measures the SDK against curl and bare fetch. Every step skips,
// saying why, when node or the npm packages (npm ci in this directory;
// make test does it) are missing.
package sdktypescript
