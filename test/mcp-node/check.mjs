// check.mjs drives warren's MCP server at $WARREN_MCP_URL (Streamable
// HTTP, with the bearer key $WARREN_KEY) with the official TypeScript SDK,
// to catch the spec corners that the Go SDK on both ends would hide: the
// handshake, tool schemas, structured output checked against each tool's
// output schema (the SDK's client validates it), and tool errors. It exits
// non-zero on the first failure; node_test.go runs it.
import assert from "node:assert/strict";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { EmptyResultSchema } from "@modelcontextprotocol/sdk/types.js";

const url = new URL(process.env.WARREN_MCP_URL ?? "");
const key = process.env.WARREN_KEY ?? "";

function connect(headers) {
  const client = new Client({ name: "warren-node-check", version: "1.0.0" });
  const transport = new StreamableHTTPClientTransport(url, { requestInit: { headers } });
  return client.connect(transport).then(() => client);
}

function text(result) {
  return result.content.filter((c) => c.type === "text").map((c) => c.text).join("\n");
}

// call calls a tool that must succeed and returns its result.
async function call(client, name, args) {
  const result = await client.callTool({ name, arguments: args });
  assert.ok(!result.isError, `${name}: tool error: ${text(result)}`);
  return result;
}

// callError calls a tool that must fail with a tool error of code.
async function callError(client, name, args, code) {
  const result = await client.callTool({ name, arguments: args });
  assert.equal(result.isError, true, `${name}: want a tool error, got ${text(result)}`);
  assert.ok(text(result).startsWith(`${code}: `), `${name}: tool error ${JSON.stringify(text(result))}, want code ${code}`);
  return text(result);
}

// Without the key the server answers 401 with the error envelope.
await assert.rejects(connect({}), (err) => err.code === 401 && String(err).includes('"code":"unauthenticated"'), "connecting without a key");

const client = await connect({ Authorization: `Bearer ${key}` });
const info = client.getServerVersion();
assert.equal(info.name, "warren");
assert.ok(client.getServerCapabilities()?.tools, "the server offers tools");
assert.ok((client.getInstructions() ?? "").includes("create_session"), "the server gives instructions");

const { tools } = await client.listTools();
const names = tools.map((t) => t.name).sort();
assert.deepEqual(names, [
  "create_session", "delete_file", "delete_session", "edit_file", "exec", "get_session", "list_files",
  "list_sessions", "network_denials", "process_output", "read_file", "search_files", "start_process", "write_file",
]);
for (const t of tools) {
  assert.equal(t.inputSchema.type, "object", `${t.name}: input schema type`);
  assert.ok(t.description.length > 40, `${t.name}: description`);
  assert.ok(t.outputSchema, `${t.name}: output schema`);
}
const exec = tools.find((t) => t.name === "exec");
assert.deepEqual(exec.inputSchema.required, ["session_id"]);
assert.equal(exec.inputSchema.properties.timeout_ms.type, "integer");
assert.equal(exec.annotations?.readOnlyHint, false);
assert.equal(tools.find((t) => t.name === "read_file").annotations?.readOnlyHint, true);

const id = `node-${process.pid}`;
let r = await call(client, "create_session", { id });
assert.equal(r.structuredContent.id, id);
assert.equal(r.structuredContent.state, "running");

// exec: the streams apart, the exit code, non-ASCII text, shell state.
r = await call(client, "exec", { session_id: id, command: "cd /tmp && echo héllo && echo warn >&2; exit_code_is=5; (exit 5)" });
assert.equal(r.structuredContent.stdout, "héllo\n");
assert.equal(r.structuredContent.stderr, "warn\n");
assert.equal(r.structuredContent.exit_code, 5);
assert.equal(r.structuredContent.timed_out, false);
assert.ok(text(r).includes("exit_code: 5"), text(r));
r = await call(client, "exec", { session_id: id, command: "pwd", stdin: "" });
assert.equal(r.structuredContent.stdout, "/tmp\n");
r = await call(client, "exec", { session_id: id, argv: ["cat"], stdin: "from stdin" });
assert.equal(r.structuredContent.stdout, "from stdin");

// edit_file: one match replaced, none and two refused.
await call(client, "write_file", { session_id: id, path: "app.js", content: "let a = 1;\nlet b = 1;\n" });
await callError(client, "edit_file", { session_id: id, path: "app.js", old_string: "let c", new_string: "let d" }, "invalid_argument");
const twice = await callError(client, "edit_file", { session_id: id, path: "app.js", old_string: " = 1;", new_string: " = 2;" }, "invalid_argument");
assert.ok(twice.includes("2 times"), twice);
r = await call(client, "edit_file", { session_id: id, path: "app.js", old_string: "let b = 1;", new_string: "let b = 2;" });
assert.equal(r.structuredContent.replacements, 1);
r = await call(client, "read_file", { session_id: id, path: "app.js" });
assert.equal(r.structuredContent.content, "let a = 1;\nlet b = 2;\n");
assert.equal(r.structuredContent.encoding, "utf-8");
assert.equal(text(r), "let a = 1;\nlet b = 2;\n");

r = await call(client, "search_files", { session_id: id, pattern: "let b", glob: "*.js" });
assert.deepEqual(r.structuredContent.matches, [{ path: "/workspace/app.js", line: 2, text: "let b = 2;" }]);

// A failure is a tool result with isError and the envelope's code, never a
// JSON-RPC error.
await callError(client, "exec", { session_id: "no-such-session", command: "true" }, "not_found");
await callError(client, "read_file", { session_id: id, path: "missing.txt" }, "not_found");
await callError(client, "exec", { command: "true" }, "invalid_argument");

// An unknown tool is a protocol error.
await assert.rejects(client.callTool({ name: "no_such_tool", arguments: {} }));
// An unknown method is a JSON-RPC error that reaches the call (-32601), not
// a failed HTTP request.
await assert.rejects(client.request({ method: "no/such/method", params: {} }, EmptyResultSchema), (err) => err.code === -32601, "an unknown method");

// Every tool says whether it reads only, destroys, can be repeated, and
// reaches outside its session.
for (const t of tools) {
  for (const hint of ["readOnlyHint", "destructiveHint", "idempotentHint", "openWorldHint"]) {
    assert.equal(typeof t.annotations?.[hint], "boolean", `${t.name}: ${hint}`);
  }
}

// A long exec with a progress token hears how long it has run.
const progress = [];
r = await client.callTool({ name: "exec", arguments: { session_id: id, argv: ["sleep", "6"] } }, undefined,
  { onprogress: (p) => progress.push(p), resetTimeoutOnProgress: true });
assert.ok(!r.isError, text(r));
assert.ok(progress.length >= 1 && progress[0].message.includes("exec running for"), JSON.stringify(progress));

// Aborting a call (the SDK sends notifications/cancelled) stops its command:
// the shell is free at once.
const abort = new AbortController();
const pending = client.callTool({ name: "exec", arguments: { session_id: id, command: "touch /tmp/started; sleep 120" } }, undefined, { signal: abort.signal });
for (let i = 0; ; i++) {
  const res = await client.callTool({ name: "list_files", arguments: { session_id: id, path: "/tmp" } });
  if (!res.isError && res.structuredContent.entries.some((e) => e.name === "started")) break;
  assert.ok(i < 300, "the long exec never started");
  await new Promise((ok) => setTimeout(ok, 100));
}
abort.abort("changed my mind");
await assert.rejects(pending);
const before = Date.now();
r = await call(client, "exec", { session_id: id, command: "echo free" });
assert.equal(r.structuredContent.stdout, "free\n");
assert.ok(Date.now() - before < 5000, `the shell was busy for ${Date.now() - before} ms after the cancel`);

await call(client, "delete_session", { session_id: id });
await callError(client, "get_session", { session_id: id }, "not_found");
await client.close();
console.log("mcp-node: all checks passed");
