// Package mcpnode drives warren's MCP server from another language: the
// official TypeScript SDK under node (check.mjs), so that spec corners the
// Go SDK hides on both ends show up. The test skips when node or the npm
// packages (npm ci in this directory) are missing; .ci/run installs both.
package mcpnode
