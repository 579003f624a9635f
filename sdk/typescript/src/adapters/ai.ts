// Warren as tools of the Vercel AI SDK (`ai`, v5+): pass them to
// generateText/streamText and the model can run commands and edit files in
// a warren session.
//
//   import { warrenTools } from "@warren/sdk/ai";
//   const s = await warren.sessions.create();
//   const r = await generateText({ model, tools: warrenTools(s), stopWhen: stepCountIs(10), prompt });

import { tool, type Tool } from "ai";
import type { Session } from "../client.js";
import { type ToolOptions, type ToolSpec, toolSpecs } from "./common.js";

export type { ToolOptions } from "./common.js";

function wrap(spec: ToolSpec): Tool {
  return tool({
    description: spec.description,
    inputSchema: spec.schema,
    execute: (input: unknown, { abortSignal }: { abortSignal?: AbortSignal }) => spec.run(input as never, abortSignal),
  } as Tool);
}

/**
 * The AI SDK tools for a session, keyed by name: `exec`, `read_file`,
 * `write_file`, `list_files`. The session's lifetime is the caller's.
 */
export function warrenTools(session: Session, opts: ToolOptions = {}): Record<"exec" | "read_file" | "write_file" | "list_files", Tool> {
  const t = toolSpecs(session, opts);
  return { exec: wrap(t.exec), read_file: wrap(t.readFile), write_file: wrap(t.writeFile), list_files: wrap(t.listFiles) };
}
