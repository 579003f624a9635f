// The tools an agent framework gets, defined once: a name, a description
// for the model, a zod schema of the input and what running it does. Each
// adapter (ai.ts, langchain.ts) wraps these in its framework's tool type.

import { z } from "zod";
import type { Session } from "../client.js";

/** Options of the framework tools. */
export interface ToolOptions {
  /**
   * Output past this many characters (stdout, stderr, a file) is cut, with
   * a note saying so, so that a chatty command cannot flood the model's
   * context. Default 16000.
   */
  maxOutputChars?: number;
  /** The default timeout of a command, in milliseconds (default the daemon's). */
  timeoutMs?: number;
}

/** One tool, framework-neutral. */
export interface ToolSpec<S extends z.ZodTypeAny = z.ZodTypeAny> {
  name: string;
  description: string;
  schema: S;
  run(input: z.infer<S>, signal: AbortSignal | undefined): Promise<unknown>;
}

function cut(s: string, max: number): string {
  return s.length <= max ? s : `${s.slice(0, max)}\n[... ${s.length - max} more characters cut]`;
}

/** The tools for a session: exec, read_file, write_file, list_files. */
export function toolSpecs(session: Session, opts: ToolOptions = {}) {
  const max = opts.maxOutputChars ?? 16000;
  const exec: ToolSpec<z.ZodObject<{ command: z.ZodString; timeout_ms: z.ZodOptional<z.ZodNullable<z.ZodNumber>> }>> = {
    name: "exec",
    description:
      "Run a shell command in the sandbox (bash, persistent: cd and exported variables carry over to the next command). " +
      "Returns the exit code, stdout and stderr. A failing command is not an error: read its exit code.",
    schema: z.object({
      command: z.string().describe("The shell command line to run."),
      // Nullable too: OpenAI strict schemas send null for "not given".
      timeout_ms: z.number().int().positive().nullable().optional().describe("Kill the command after this many milliseconds."),
    }),
    async run(input, signal) {
      const timeout = input.timeout_ms ?? opts.timeoutMs;
      const r = await session.exec(input.command, { signal, ...(timeout ? { timeout_ms: timeout } : {}) });
      return { exit_code: r.exit_code, stdout: cut(r.stdout, max), stderr: cut(r.stderr, max), timed_out: r.timed_out };
    },
  };
  const readFile: ToolSpec<z.ZodObject<{ path: z.ZodString }>> = {
    name: "read_file",
    description: "Read a text file in the sandbox. Relative paths resolve against /workspace.",
    schema: z.object({ path: z.string().describe("The file's path.") }),
    async run(input, signal) {
      return { path: input.path, content: cut(await session.files.readText(input.path, { signal }), max) };
    },
  };
  const writeFile: ToolSpec<z.ZodObject<{ path: z.ZodString; content: z.ZodString }>> = {
    name: "write_file",
    description: "Write (create or replace) a text file in the sandbox, creating missing directories.",
    schema: z.object({ path: z.string().describe("The file's path."), content: z.string().describe("The whole new content.") }),
    async run(input, signal) {
      const w = await session.files.write(input.path, input.content, { signal });
      return { path: w.path, bytes: w.size };
    },
  };
  const listFiles: ToolSpec<z.ZodObject<{ path: z.ZodString }>> = {
    name: "list_files",
    description: "List a directory in the sandbox: each entry's name, type (file, dir, symlink) and size.",
    schema: z.object({ path: z.string().describe("The directory's path, such as /workspace or .") }),
    async run(input, signal) {
      const entries = await session.files.list(input.path, { signal });
      return { path: input.path, entries: entries.map((e) => ({ name: e.name, type: e.type, size: e.size })) };
    },
  };
  return { exec, readFile, writeFile, listFiles };
}
