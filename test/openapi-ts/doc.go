// Package openapits drives warren's REST API with a client generated from
// the OpenAPI document the daemon serves, as a TypeScript user would:
// openapi-typescript generates the types, openapi-fetch is the client,
// tsc --strict must accept check.ts, and node runs it against a real
// daemon. So the document has to be one that generators turn into a client
// that compiles and works. The test skips when node or the npm packages
// (npm ci in this directory) are missing; .ci/run installs both.
package openapits
