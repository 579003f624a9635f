// The framework adapters, driven as each framework drives a tool (no model
// is called): the AI SDK validates the model's input against the tool's
// inputSchema and calls execute(input, { toolCallId, messages, abortSignal });
// LangChain's tool.invoke(input) validates against its schema and returns
// the string the model reads.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { asSchema } from "ai";
import { NotFoundError } from "../dist/index.js";
import { warrenTools as aiTools } from "../dist/adapters/ai.js";
import { warrenTools as lcTools } from "../dist/adapters/langchain.js";
import { warrenTools as oaTools } from "../dist/adapters/openai-agents.js";
import { RunContext } from "@openai/agents-core";
import { client } from "./helpers.mjs";

const w = client();
let s;
before(async () => (s = await w.sessions.create()));
after(() => w.close());

const callOpts = (signal) => ({ toolCallId: "call-1", messages: [], abortSignal: signal });

describe("Vercel AI SDK tools", () => {
  test("validate input and run: write, list, read, exec", async () => {
    const tools = aiTools(s, { maxOutputChars: 50 });
    assert.deepEqual(Object.keys(tools).sort(), ["exec", "list_files", "read_file", "write_file"]);
    for (const t of Object.values(tools)) assert.equal(typeof t.description, "string");

    // What the framework does with the model's input before execute.
    const schema = asSchema(tools.exec.inputSchema);
    const bad = await schema.validate({ cmd: "ls" });
    assert.equal(bad.success, false, "input without command is refused");
    const good = await schema.validate({ command: "echo hi" });
    assert.equal(good.success, true);
    assert.ok(schema.jsonSchema.properties.command, "the model sees a JSON schema with command");

    const wr = await tools.write_file.execute({ path: "app/test.sh", content: "echo ok; exit 1\n" }, callOpts());
    assert.deepEqual(wr, { path: "app/test.sh", bytes: 16 });
    const ls = await tools.list_files.execute({ path: "app" }, callOpts());
    assert.deepEqual(ls.entries, [{ name: "test.sh", type: "file", size: 16 }]);
    assert.equal((await tools.read_file.execute({ path: "app/test.sh" }, callOpts())).content, "echo ok; exit 1\n");
    const r = await tools.exec.execute(good.value, callOpts());
    assert.deepEqual(r, { exit_code: 0, stdout: "hi\n", stderr: "", timed_out: false });
    const failing = await tools.exec.execute({ command: "sh app/test.sh" }, callOpts());
    assert.equal(failing.exit_code, 1);
    const long = await tools.exec.execute({ command: "seq 1 100" }, callOpts());
    assert.match(long.stdout, /\[\.\.\. \d+ more characters cut\]$/);
    await assert.rejects(tools.read_file.execute({ path: "nope" }, callOpts()), NotFoundError);
    // The framework's abortSignal reaches the daemon call.
    const ac = new AbortController();
    setTimeout(() => ac.abort(), 200);
    await assert.rejects(tools.exec.execute({ command: "sleep 10" }, callOpts(ac.signal)), (e) => e.name === "AbortError");
  });
});

describe("LangChain tools", () => {
  test("invoke validates and returns JSON text for the model", async () => {
    const tools = lcTools(s);
    assert.deepEqual(tools.map((t) => t.name), ["warren_exec", "warren_read_file", "warren_write_file", "warren_list_files"]);
    const [exec, read, write, list] = tools;
    assert.deepEqual(JSON.parse(await write.invoke({ path: "lc.txt", content: "from langchain" })), { path: "lc.txt", bytes: 14 });
    assert.equal(JSON.parse(await read.invoke({ path: "lc.txt" })).content, "from langchain");
    assert.ok(JSON.parse(await list.invoke({ path: "." })).entries.some((e) => e.name === "lc.txt"));
    assert.deepEqual(JSON.parse(await exec.invoke({ command: "cat lc.txt; exit 5" })), { exit_code: 5, stdout: "from langchain", stderr: "", timed_out: false });
    await assert.rejects(exec.invoke({ nope: 1 }), /schema|Received tool input did not match/i);
    // As a chat model's tool call arrives: the tool answers with a ToolMessage.
    const msg = await exec.invoke({ id: "tc-1", name: "warren_exec", args: { command: "echo tc" }, type: "tool_call" });
    assert.equal(msg.tool_call_id, "tc-1");
    assert.equal(JSON.parse(msg.content).stdout, "tc\n");
  });
});

describe("OpenAI Agents SDK tools", () => {
  test("strict schemas; invoke(runContext, JSON arguments) as the runner calls it", async () => {
    const tools = oaTools(s);
    assert.deepEqual(tools.map((t) => t.name), ["warren_exec", "warren_read_file", "warren_write_file", "warren_list_files"]);
    const [exec, read, write, list] = tools;
    for (const t of tools) {
      assert.equal(t.type, "function");
      assert.equal(t.strict, true);
      assert.equal(t.parameters.additionalProperties, false);
    }
    const ctx = new RunContext({});
    // The model's arguments arrive as a JSON string; strict mode sends null for what is not given.
    assert.deepEqual(JSON.parse(await write.invoke(ctx, JSON.stringify({ path: "oa.txt", content: "from agents" }))), { path: "oa.txt", bytes: 11 });
    assert.equal(JSON.parse(await read.invoke(ctx, '{"path":"oa.txt"}')).content, "from agents");
    assert.ok(JSON.parse(await list.invoke(ctx, '{"path":"."}')).entries.some((e) => e.name === "oa.txt"));
    assert.deepEqual(JSON.parse(await exec.invoke(ctx, '{"command":"cat oa.txt; exit 2","timeout_ms":null}')), {
      exit_code: 2, stdout: "from agents", stderr: "", timed_out: false,
    });
    // Errors go to the model as the result (the Agents SDK's default), with the class in it.
    assert.match(await read.invoke(ctx, '{"path":"missing.txt"}'), /not_found/);
    assert.match(await exec.invoke(ctx, '{"nope":1}'), /invalid|error/i);
    // The tool call's signal reaches the daemon call.
    const ac = new AbortController();
    setTimeout(() => ac.abort(), 200);
    const t0 = Date.now();
    await exec.invoke(ctx, '{"command":"sleep 10","timeout_ms":null}', { signal: ac.signal }).catch(() => {});
    assert.ok(Date.now() - t0 < 5000, "the abort did not reach the exec");
  });
});
