// Warren as LangChain tools (`@langchain/core` tools): bind them to a chat
// model or hand them to an agent (createReactAgent, createAgent) and the
// model can run commands and edit files in a warren session.
//
//   import { warrenTools } from "@warren/sdk/langchain";
//   const tools = warrenTools(await warren.sessions.create());
//   const agent = createAgent({ model, tools });

import { tool, type StructuredToolInterface } from "@langchain/core/tools";
import type { Session } from "../client.js";
import { type ToolOptions, type ToolSpec, toolSpecs } from "./common.js";

export type { ToolOptions } from "./common.js";

function wrap(spec: ToolSpec): StructuredToolInterface {
  // LangChain hands a tool's string result to the model as is: JSON keeps
  // the exit code, stdout and stderr apart.
  return tool(async (input: unknown, config?: { signal?: AbortSignal }) => JSON.stringify(await spec.run(input as never, config?.signal)), {
    name: `warren_${spec.name}`,
    description: spec.description,
    schema: spec.schema,
  } as never) as unknown as StructuredToolInterface;
}

/**
 * The LangChain tools for a session: `warren_exec`, `warren_read_file`,
 * `warren_write_file`, `warren_list_files`. The session's lifetime is the
 * caller's.
 */
export function warrenTools(session: Session, opts: ToolOptions = {}): StructuredToolInterface[] {
  const t = toolSpecs(session, opts);
  return [wrap(t.exec), wrap(t.readFile), wrap(t.writeFile), wrap(t.listFiles)];
}
