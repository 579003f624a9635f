// Warren as tools of the OpenAI Agents SDK for TypeScript (`@openai/agents`,
// whose tool() comes from `@openai/agents-core`): give them to an Agent and
// the model can run commands and edit files in a warren session.
//
//   import { Agent, run } from "@openai/agents";
//   import { warrenTools } from "@warren/sdk/openai-agents";
//   const agent = new Agent({ name: "coder", instructions, tools: warrenTools(session) });
//   await run(agent, "make the tests in /workspace/repo pass");

import { tool, type FunctionTool } from "@openai/agents-core";
import type { Session } from "../client.js";
import { type ToolOptions, type ToolSpec, toolSpecs } from "./common.js";

export type { ToolOptions } from "./common.js";

function wrap(spec: ToolSpec): FunctionTool {
  return tool({
    name: `warren_${spec.name}`,
    description: spec.description,
    parameters: spec.schema as never,
    strict: true,
    // The model learns what went wrong ("not_found: ..."), not only that
    // something did, so that it can correct the call.
    errorFunction: (_ctx: unknown, err: unknown) => `error: ${err instanceof Error ? err.message : String(err)}`,
    // The Agents SDK passes a tool call's own AbortSignal in details.
    execute: async (input: unknown, _ctx: unknown, details?: { signal?: AbortSignal }) => JSON.stringify(await spec.run(input as never, details?.signal)),
  }) as unknown as FunctionTool;
}

/**
 * The Agents SDK function tools for a session: `warren_exec`,
 * `warren_read_file`, `warren_write_file`, `warren_list_files` (strict
 * schemas). Errors reach the model as the tool's result (the Agents SDK's
 * way), with the daemon's class and message. The session's lifetime is the caller's.
 */
export function warrenTools(session: Session, opts: ToolOptions = {}): FunctionTool[] {
  const t = toolSpecs(session, opts);
  return [wrap(t.exec), wrap(t.readFile), wrap(t.writeFile), wrap(t.listFiles)];
}
