/**
 * The TypeScript SDK of warren, the self-hosted sandbox runtime for AI
 * agents. Start with {@link Warren}.
 *
 * @packageDocumentation
 */

import "./polyfill.js";

export * from "./client.js";
export * from "./errors.js";
export { Shell, type ShellExit, type ShellOptions, type WebSocketCtor } from "./shell.js";
export type { CallOptions, FetchLike } from "./transport.js";
export type * from "./types.js";
