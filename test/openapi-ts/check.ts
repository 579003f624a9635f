// check.ts drives a warren daemon ($WARREN_URL, with the bearer key
// $WARREN_KEY) through a client generated from the OpenAPI document the
// daemon serves: openapi-typescript writes schema.d.ts from
// $WARREN_URL/openapi.json, openapi-fetch is the client, and tsc --strict
// (tsconfig.json) must accept this file before it runs. It does what a
// user's program does first: create a session, exec, write and read a
// file, read the streamed exec, delete the session. It exits non-zero on
// the first failure; openapi_test.go runs it.
import assert from "node:assert/strict";
import createClient from "openapi-fetch";
import type { components, paths } from "./schema.js";

type ExecResult = components["schemas"]["ExecResult"];

const baseUrl = process.env.WARREN_URL ?? "";
const key = process.env.WARREN_KEY ?? "";
const client = createClient<paths>({ baseUrl, headers: { Authorization: `Bearer ${key}` } });

// A WebSocket is no HTTP operation: the generated client must offer no
// function for the shell (the directive fails the build if it does).
export function shellIsNoOperation(id: string) {
  // @ts-expect-error the shell is documented under x-websocket, not as GET
  return client.GET("/v1/sessions/{id}/shell", { params: { path: { id } } });
}

const id = `ts-${process.pid}`;

// Create: 201 and the session, typed.
const created = await client.POST("/v1/sessions", { body: { id, labels: { by: "openapi-ts" } } });
assert.equal(created.response.status, 201, `create: ${JSON.stringify(created.error)}`);
assert.ok(created.data, "create: no session");
const session: components["schemas"]["Session"] = created.data;
assert.equal(session.id, id);
assert.equal(session.state, "running");

// A second create of the same id is idempotent: 200, the same session.
const again = await client.POST("/v1/sessions", { body: { id } });
assert.equal(again.response.status, 200);
assert.equal(again.data?.id, id);

// Exec: the result is the JSON object alone, no union with the stream.
const ran = await client.POST("/v1/sessions/{id}/exec", {
  params: { path: { id } },
  body: { command: "cd /tmp && export GREETING=hello && echo $GREETING; echo oops >&2; (exit 3)" },
});
if (ran.error) throw new Error(`exec: ${ran.error.error.code}: ${ran.error.error.message}`);
const result: ExecResult = ran.data;
assert.equal(result.exit_code, 3);
assert.equal(result.stdout, "hello\n");
assert.equal(result.stderr, "oops\n");
assert.equal(result.timed_out, false);
// The shell keeps its state between calls.
const state = await client.POST("/v1/sessions/{id}/exec", { params: { path: { id } }, body: { command: "echo $PWD $GREETING" } });
assert.equal(state.data?.stdout, "/tmp hello\n");

// Errors are the typed envelope.
const missing = await client.POST("/v1/sessions/{id}/exec", { params: { path: { id: "no-such-session" } }, body: { command: "true" } });
assert.equal(missing.response.status, 404);
assert.equal(missing.error?.error.code, "not_found");

// Files: write raw bytes, stat, read them back as text.
const content = "print('hi from openapi-fetch')\n";
const written = await client.PUT("/v1/sessions/{id}/files", {
  params: { path: { id }, query: { path: "app/main.py" } },
  body: content,
  bodySerializer: (b: string) => b,
  headers: { "Content-Type": "application/octet-stream" },
});
assert.equal(written.response.status, 200, `write: ${JSON.stringify(written.error)}`);
assert.equal(written.data?.size, content.length);
const stat = await client.GET("/v1/sessions/{id}/files/stat", { params: { path: { id }, query: { path: "app/main.py" } } });
assert.equal(stat.data?.type, "file");
assert.equal(stat.data?.size, content.length);
const read = await client.GET("/v1/sessions/{id}/files", { params: { path: { id }, query: { path: "app/main.py" } }, parseAs: "text" });
assert.equal(read.response.status, 200);
assert.equal(read.data, content);
const listed = await client.GET("/v1/sessions/{id}/files/list", { params: { path: { id }, query: { path: "app" } } });
assert.deepEqual(listed.data?.entries.map((e) => e.name), ["main.py"]);

// The streamed exec, asked for by hand: its events, then its exit.
const streamed = await client.POST("/v1/sessions/{id}/exec", {
  params: { path: { id } },
  body: { command: "echo one; echo two >&2" },
  headers: { Accept: "text/event-stream" },
  parseAs: "text",
});
assert.equal(streamed.response.headers.get("Content-Type"), "text/event-stream");
const text = String(streamed.data);
assert.match(text, /^retry: \d+\n/);
assert.match(text, /event: stdout\nid: \d+\ndata: \{"text":"one\\n"\}/);
assert.match(text, /event: stderr\nid: \d+\ndata: \{"text":"two\\n"\}/);
assert.match(text, /event: exit\nid: end\ndata: \{/);
// Reconnecting after the whole stream runs nothing: 204.
const resumed = await client.POST("/v1/sessions/{id}/exec", {
  params: { path: { id }, header: { "Last-Event-ID": "end" } },
  body: { command: "echo one; echo two >&2" },
  headers: { Accept: "text/event-stream" },
  parseAs: "text",
});
assert.equal(resumed.response.status, 204);

// Delete: 204, then the session is gone.
const deleted = await client.DELETE("/v1/sessions/{id}", { params: { path: { id } } });
assert.equal(deleted.response.status, 204);
const gone = await client.GET("/v1/sessions/{id}", { params: { path: { id } } });
assert.equal(gone.response.status, 404);
assert.equal(gone.error?.error.code, "not_found");

console.log(`openapi-fetch round trip ok: session ${id}, exec exit ${result.exit_code}, ${content.length} bytes written and read`);
