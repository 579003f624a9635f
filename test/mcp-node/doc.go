// Package mcpnode drives warren's MCP server with third-party clients under
// node, so that spec corners the Go SDK hides on both ends show up: the
// official TypeScript SDK over Streamable HTTP (check.mjs), and the MCP
// Inspector's CLI (npx @modelcontextprotocol/inspector --cli) over HTTP and
// over `warren mcp` on stdio. The tests skip when node or the npm packages
// (npm ci in this directory) are missing; .ci/run installs both.
package mcpnode
