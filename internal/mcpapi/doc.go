// Package mcpapi serves warren to AI agents over the Model Context Protocol:
// tools that create sessions, run commands, start processes and read their
// output, and read, write, edit, list, delete and search files.
//
// The tools are defined once, in NewServer, over a Backend: the daemon
// serves them at /mcp over Streamable HTTP (NewHTTPHandler: stateless, the
// SDK's handler plus a Host check, calls bound to their request so that a
// cancel or a hang-up stops them, and JSON-RPC answers to bad input) with a
// backend that calls its session manager directly (NewManagerBackend), and
// `warren mcp` serves them over stdio (StdioTransport, which answers a
// malformed line instead of ending) with a backend that calls a daemon
// through the Go client (NewClientBackend). Tools hold no business logic beyond what makes them
// convenient for an agent (edit_file's unique-match rule, bounded reads,
// search_files' grep): every operation is a call the REST API also makes.
//
// A failing call is an MCP tool error (isError), never a protocol error; its
// text is "<code>: <message>" with the code of the REST error envelope
// ("not_found", "invalid_argument", ...). The package never writes to
// stdout.
package mcpapi
