// The wire types, by name. They are generated from api/openapi.yaml into
// openapi.ts (npm run gen; a test regenerates it and fails on a difference),
// so they cannot drift from the daemon's contract.

import type { components } from "./openapi.js";

type S = components["schemas"];

export type Limits = S["Limits"];
export type CreateSessionRequest = S["CreateSessionRequest"];
export type NetworkPolicy = S["NetworkPolicy"];
export type NetworkDenial = S["NetworkDenial"];
export type Usage = S["Usage"];
/** A session as the daemon describes it. */
export type SessionInfo = S["Session"];
export type ExecRequest = S["ExecRequest"];
export type RunRequest = S["RunRequest"];
export type ExecResult = S["ExecResult"];
export type StartProcessRequest = S["StartProcessRequest"];
/** A process as the daemon describes it. */
export type ProcessInfo = S["Process"];
export type OutputChunk = S["OutputChunk"];
export type OutputGap = S["OutputGap"];
export type ProcessExit = S["ProcessExit"];
export type ShellMessage = S["ShellMessage"];
export type FileEntry = S["FileEntry"];
export type FileWritten = S["FileWritten"];
export type Image = S["Image"];
export type PullImageRequest = S["PullImageRequest"];
export type PullProgress = S["PullProgress"];
export type ImagePruneResult = S["ImagePruneResult"];
export type CreateWorkspaceRequest = S["CreateWorkspaceRequest"];
export type Workspace = S["Workspace"];
export type Snapshot = S["Snapshot"];
export type ForkRequest = S["ForkRequest"];
export type Stats = S["Stats"];
export type Token = S["Token"];
export type Port = S["Port"];
export type ErrorEnvelope = S["Error"];

export type { components, paths } from "./openapi.js";
