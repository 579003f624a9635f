// The client: Warren and its resources. Nouns and verbs follow the shared
// design of the SDKs (docs/SDK.md): warren.sessions.create() returns a
// Session handle whose files, processes, network and ports are grouped
// under it; snapshots, workspaces and images are top-level.

import "./polyfill.js";
import { NotFoundError, RateLimitedError, StreamInterruptedError, WarrenError } from "./errors.js";
import {
  type CallOptions,
  type FetchLike,
  Transport,
  base64ToBytes,
  chunkBytes,
  errorFromEnvelope,
  readSSE,
  sleep,
} from "./transport.js";
import type {
  CreateSessionRequest,
  CreateWorkspaceRequest,
  ExecRequest,
  ExecResult,
  FileEntry,
  FileWritten,
  ForkRequest,
  Image,
  ImagePruneResult,
  NetworkDenial,
  NetworkPolicy,
  OutputChunk,
  OutputGap,
  Port,
  ProcessExit,
  ProcessInfo,
  PullImageRequest,
  PullProgress,
  RunRequest,
  SessionInfo,
  Snapshot,
  StartProcessRequest,
  Stats,
  Token,
  Workspace,
} from "./types.js";
import { Shell, type ShellOptions } from "./shell.js";

/** How to reach a daemon. */
export interface WarrenOptions {
  /**
   * The daemon's base URL; a path is kept as a prefix. Default `$WARREN_URL`,
   * else `$WARREN_ADDR` (the CLI's), else `http://127.0.0.1:7433`.
   */
  url?: string;
  /**
   * An API key (`wrn_…`), sent as a bearer header and never in a URL.
   * Default `$WARREN_API_KEY`, else `$WARREN_KEY`, else `$WARREN_TOKEN`.
   */
  key?: string;
  /** A short-lived token (`wrt_…`) or a JWT: what a browser holds instead of a key. */
  token?: string;
  /** The fetch to use (default the global one). */
  fetch?: FetchLike;
  /** The User-Agent of requests (ignored by browsers). Default `warren-ts-sdk/0.1`. */
  userAgent?: string;
}

/** A string, bytes, a Blob or a stream: what a file, stdin or archive can be made of. */
export type Body = string | Uint8Array | ArrayBuffer | Blob | ReadableStream<Uint8Array>;

function env(name: string): string | undefined {
  const p = (globalThis as { process?: { env?: Record<string, string | undefined> } }).process;
  return p?.env?.[name];
}

const enc = (s: string) => encodeURIComponent(s);

/**
 * A client of one warren daemon. It remembers the sessions it created:
 * {@link Warren.close} (or `await using`) deletes those still alive.
 *
 * ```ts
 * const warren = new Warren({ url: "http://127.0.0.1:7433", key });
 * const s = await warren.sessions.create();
 * const r = await s.exec("echo hi");
 * await s.delete();
 * ```
 */
export class Warren implements AsyncDisposable {
  /** @internal */
  readonly t: Transport;
  /** Sessions: create, get, list, delete. */
  readonly sessions: Sessions;
  /** Snapshots: list, get, delete, export, import. */
  readonly snapshots: Snapshots;
  /** Workspaces: create, list, get, delete. */
  readonly workspaces: Workspaces;
  /** Images: list, get, delete, prune, pull, import. */
  readonly images: Images;
  /** @internal ids of sessions this client created and has not deleted */
  readonly created = new Set<string>();

  constructor(opts: WarrenOptions = {}) {
    const url = opts.url || env("WARREN_URL") || env("WARREN_ADDR") || "http://127.0.0.1:7433";
    const cred = opts.token ?? opts.key ?? (env("WARREN_API_KEY") || env("WARREN_KEY") || env("WARREN_TOKEN"));
    this.t = new Transport(url, cred || undefined, opts.fetch, opts.userAgent ?? "warren-ts-sdk/0.1");
    this.sessions = new Sessions(this);
    this.snapshots = new Snapshots(this.t);
    this.workspaces = new Workspaces(this.t);
    this.images = new Images(this.t);
  }

  /** The daemon's base URL. */
  get url(): string {
    return this.t.baseUrl;
  }

  /** Runs one command in a fresh sandbox that is destroyed afterwards (`POST /v1/run`). */
  run(req: RunRequest | string, opts: CallOptions = {}): Promise<ExecResult> {
    const body = typeof req === "string" ? { command: req } : req;
    return this.t.json<ExecResult>({ method: "POST", path: "/v1/run", json: body, signal: opts.signal });
  }

  /** The daemon's statistics. */
  stats(opts: CallOptions = {}): Promise<Stats> {
    return this.t.json<Stats>({ method: "GET", path: "/v1/stats", signal: opts.signal });
  }

  /** Resolves when the daemon is alive (`GET /healthz`); throws otherwise. */
  async health(opts: CallOptions = {}): Promise<void> {
    await this.t.call({ method: "GET", path: "/healthz", signal: opts.signal });
  }

  /**
   * Issues a short-lived token for the caller's key (`POST /v1/tokens`), for
   * clients that cannot send headers: a browser's WebSocket or EventSource.
   */
  createToken(opts: CallOptions & { ttlSeconds?: number } = {}): Promise<Token> {
    return this.t.json<Token>({ method: "POST", path: "/v1/tokens", json: { ttl_seconds: opts.ttlSeconds ?? 300 }, signal: opts.signal });
  }

  /**
   * Creates a session, runs fn with it and deletes it afterwards, whether fn
   * returned or threw.
   */
  async withSession<T>(fn: (s: Session) => Promise<T>, req: CreateSessionRequest = {}, opts: CallOptions = {}): Promise<T> {
    const s = await this.sessions.create(req, opts);
    try {
      return await fn(s);
    } finally {
      await s.delete().catch((e: unknown) => {
        if (!(e instanceof NotFoundError)) throw e;
      });
    }
  }

  /**
   * Deletes every session this client created that is still alive. Errors
   * other than "already gone" are collected into one AggregateError.
   */
  async close(): Promise<void> {
    const ids = [...this.created];
    const errs: unknown[] = [];
    await Promise.all(
      ids.map(async (id) => {
        try {
          await this.sessions.delete(id);
        } catch (e) {
          if (!(e instanceof NotFoundError)) errs.push(e);
        }
      }),
    );
    if (errs.length) throw new AggregateError(errs, `warren: ${errs.length} session(s) could not be deleted`);
  }

  /**
   * Node, Bun, Deno: deletes the sessions this client created when the
   * program ends on its own or is stopped with SIGINT, SIGTERM or SIGHUP
   * (the signal is raised again afterwards, so the exit status stays what
   * it would have been). A program killed with SIGKILL cannot clean up:
   * give sessions a `ttl_seconds` for that. Returns a function that undoes
   * the registration.
   */
  closeOnExit(): () => void {
    const proc = (globalThis as { process?: NodeJS.Process }).process;
    if (!proc?.once) return () => {};
    const sigs: NodeJS.Signals[] = ["SIGINT", "SIGTERM", "SIGHUP"];
    const onSignal = (sig: NodeJS.Signals) => {
      undo();
      this.close().catch(() => {}).finally(() => proc.kill(proc.pid, sig));
    };
    const onBeforeExit = () => {
      undo();
      void this.close().catch(() => {});
    };
    const undo = () => {
      for (const s of sigs) proc.off(s, onSignal);
      proc.off("beforeExit", onBeforeExit);
    };
    for (const s of sigs) proc.once(s, onSignal);
    proc.once("beforeExit", onBeforeExit);
    return undo;
  }

  /** `await using warren = new Warren(...)`: deletes the sessions it created. */
  [Symbol.asyncDispose](): Promise<void> {
    return this.close();
  }
}

/** The sessions of the caller's tenant. */
export class Sessions {
  constructor(private readonly w: Warren) {}

  /**
   * Creates a session (every field optional). With a chosen `id` the call is
   * idempotent: an existing session of that id is returned as is.
   */
  async create(req: CreateSessionRequest = {}, opts: CallOptions = {}): Promise<Session> {
    const info = await this.w.t.json<SessionInfo>({ method: "POST", path: "/v1/sessions", json: req, signal: opts.signal });
    this.w.created.add(info.id);
    return new Session(this.w, info);
  }

  /** Describes the session id, with its live resource use. */
  async get(id: string, opts: CallOptions = {}): Promise<Session> {
    const info = await this.w.t.json<SessionInfo>({ method: "GET", path: `/v1/sessions/${enc(id)}`, signal: opts.signal });
    return new Session(this.w, info);
  }

  /** Lists the caller's sessions (every tenant's with `all`, for admins). */
  async list(opts: CallOptions & { all?: boolean } = {}): Promise<Session[]> {
    const l = await this.w.t.json<{ sessions: SessionInfo[] }>({
      method: "GET", path: "/v1/sessions", query: { all: opts.all || undefined }, signal: opts.signal,
    });
    return l.sessions.map((i) => new Session(this.w, i));
  }

  /** Deletes the session id and everything of it. */
  async delete(id: string, opts: CallOptions = {}): Promise<void> {
    try {
      await this.w.t.call({ method: "DELETE", path: `/v1/sessions/${enc(id)}`, signal: opts.signal });
    } catch (e) {
      if (e instanceof NotFoundError) this.w.created.delete(id);
      throw e;
    }
    this.w.created.delete(id);
  }
}

/** A handle on one session. Calls go to the daemon; `info` is what it said last. */
export class Session implements AsyncDisposable {
  /** The session's id. */
  readonly id: string;
  /** The session as last described by the daemon (create, get, refresh, renew). */
  info: SessionInfo;
  /** Files inside the session. */
  readonly files: Files;
  /** Processes that run on their own, with kept, resumable output. */
  readonly processes: Processes;
  /** The session's egress policy. */
  readonly network: Network;
  /** The session's listening ports and their URLs. */
  readonly ports: Ports;
  /** @internal */
  readonly path: string;

  constructor(private readonly w: Warren, info: SessionInfo) {
    this.id = info.id;
    this.info = info;
    this.path = `/v1/sessions/${enc(info.id)}`;
    this.files = new Files(w.t, this.path);
    this.processes = new Processes(w.t, this.path);
    this.network = new Network(w.t, this.path);
    this.ports = new Ports(w.t, this.path);
  }

  /**
   * Runs a command: a string goes to the session's persistent shell (cd and
   * exports carry over), an array runs as argv without a shell. A command
   * that fails is no error: see `exit_code`.
   */
  exec(cmd: string | string[] | ExecRequest, opts: CallOptions & Omit<ExecRequest, "command" | "argv"> = {}): Promise<ExecResult> {
    const { signal, ...rest } = opts;
    return this.w.t.json<ExecResult>({ method: "POST", path: `${this.path}/exec`, json: { ...execBody(cmd), ...rest }, signal });
  }

  /**
   * Runs a command as {@link Session.exec} does and streams its output as it
   * is written. Iterate it for the chunks, then `await stream.wait()` for
   * the result (whose stdout and stderr are empty: the output was in the
   * chunks).
   */
  execStream(cmd: string | string[] | ExecRequest, opts: CallOptions & Omit<ExecRequest, "command" | "argv"> = {}): ExecStream {
    const { signal, ...rest } = opts;
    return new ExecStream(this.w.t, `${this.path}/exec`, { ...execBody(cmd), ...rest }, signal);
  }

  /** Freezes the session's files into the snapshot `name`, which new sessions can start from. */
  snapshot(name: string, opts: CallOptions = {}): Promise<Snapshot> {
    return this.w.t.json<Snapshot>({ method: "POST", path: `${this.path}/snapshot`, json: { name }, signal: opts.signal });
  }

  /**
   * Forks the session into `count` new sessions (or one per id in `ids`),
   * each starting from its files now. The new sessions count as created by
   * this client, so {@link Warren.close} deletes them.
   */
  async fork(req: ForkRequest = {}, opts: CallOptions = {}): Promise<{ snapshot: Snapshot; sessions: Session[] }> {
    const r = await this.w.t.json<{ snapshot: Snapshot; sessions: SessionInfo[] }>({
      method: "POST", path: `${this.path}/fork`, json: req, signal: opts.signal,
    });
    for (const s of r.sessions) this.w.created.add(s.id);
    return { snapshot: r.snapshot, sessions: r.sessions.map((i) => new Session(this.w, i)) };
  }

  /**
   * Opens an interactive shell on a pseudo-terminal over a WebSocket: a new
   * login shell, or with `process` an existing TTY process.
   */
  shell(opts: ShellOptions = {}): Promise<Shell> {
    return Shell.open(this.w.t, `${this.path}/shell`, opts, (o) => this.w.createToken(o));
  }

  /** Describes the session again and returns (and keeps in `info`) the answer. */
  async refresh(opts: CallOptions = {}): Promise<SessionInfo> {
    this.info = await this.w.t.json<SessionInfo>({ method: "GET", path: this.path, signal: opts.signal });
    return this.info;
  }

  /**
   * Pushes the session's idle expiry back by its full TTL and returns the
   * new expiry. Every call that uses the session does so; describing it
   * does not, so this makes the cheapest such call (a stat of `/`, as the
   * other SDKs do) and then describes it.
   */
  async renew(opts: CallOptions = {}): Promise<Date> {
    await this.files.stat("/", opts);
    return new Date((await this.refresh(opts)).expires_at);
  }

  /**
   * Seconds (fractional) until the session expires unless used again,
   * without renewing it. Seconds, as in the other SDKs and `ttl_seconds`.
   */
  async ttl(opts: CallOptions = {}): Promise<number> {
    const info = await this.refresh(opts);
    return Math.max(0, (Date.parse(info.expires_at) - Date.now()) / 1000);
  }

  /** Deletes the session and everything of it. */
  delete(opts: CallOptions = {}): Promise<void> {
    return this.w.sessions.delete(this.id, opts);
  }

  /** `await using s = await warren.sessions.create()`: deletes the session (if still there) at the end of the scope. */
  async [Symbol.asyncDispose](): Promise<void> {
    try {
      await this.delete();
    } catch (e) {
      if (!(e instanceof NotFoundError)) throw e;
    }
  }
}

function execBody(cmd: string | string[] | ExecRequest): ExecRequest {
  if (typeof cmd === "string") return { command: cmd };
  if (Array.isArray(cmd)) return { argv: cmd };
  return cmd;
}

/** One chunk of a command's or process's output. */
export interface OutputEvent {
  type: "output";
  /** `stdout` or `stderr` (a TTY process writes only `stdout`). */
  stream: "stdout" | "stderr";
  /** The exact bytes. */
  data: Uint8Array;
  /** The bytes as text (invalid UTF-8 replaced). */
  text: string;
  /** Process output: the offset of the chunk's first byte. Exec: the count of bytes before it. */
  offset: number;
  /** The offset after the chunk: where a reader resumes. */
  next: number;
}

/** Process output that was dropped from the bounded buffer before it was read: bytes [offset, next). */
export interface GapEvent {
  type: "gap";
  offset: number;
  next: number;
}

/** The process exited and all its kept output was delivered. */
export interface ExitEvent {
  type: "exit";
  exitCode: number;
  /** The signal that ended it, if one did. */
  signal?: string | undefined;
  offset: number;
  next: number;
}

/** What a process's output stream yields. */
export type ProcessEvent = OutputEvent | GapEvent | ExitEvent;

const utf8 = new TextDecoder();

function outputEvent(c: OutputChunk, pos: number): OutputEvent {
  const data = chunkBytes(c);
  const start = c.offset ?? pos;
  return {
    type: "output", stream: c.stream ?? "stdout", data,
    text: c.base64 ? utf8.decode(data) : (c.text ?? ""),
    offset: start, next: start + data.length,
  };
}

/**
 * The streamed output of one exec. Iterate it for {@link OutputEvent}s;
 * {@link ExecStream.wait} resolves with the result (reading what is left).
 * A command runs once: if the connection drops mid-stream the daemon has no
 * copy to resume from, and the iteration throws a
 * {@link StreamInterruptedError} (run what must survive drops as a process).
 */
export class ExecStream implements AsyncIterable<OutputEvent> {
  private res: ExecResult | undefined;
  private iter: AsyncGenerator<OutputEvent> | undefined;

  /** @internal */
  constructor(private readonly t: Transport, private readonly path: string, private readonly body: ExecRequest, private readonly signal: AbortSignal | undefined) {}

  [Symbol.asyncIterator](): AsyncGenerator<OutputEvent> {
    if (this.iter) throw new TypeError("warren: an exec stream can be iterated once");
    this.iter = this.events();
    return this.iter;
  }

  /** The command's result: {@link ExecStream.wait} as a property, as the Python SDK's `.result`. */
  get result(): Promise<ExecResult> {
    return this.wait();
  }

  /** Reads the rest of the stream (discarding its output) and returns the command's result. */
  async wait(): Promise<ExecResult> {
    if (!this.iter) for await (const _ of this) void _;
    else if (!this.res) for (;;) if ((await this.iter.next()).done) break;
    if (!this.res) throw new StreamInterruptedError("exec: the stream ended without a result");
    return this.res;
  }

  private async *events(): AsyncGenerator<OutputEvent> {
    const resp = await this.t.send({ method: "POST", path: this.path, json: this.body, accept: "text/event-stream", signal: this.signal });
    const ct = resp.headers.get("content-type") ?? "";
    if (ct.startsWith("application/json")) {
      // A daemon that does not stream: the whole output, then the result.
      const r = (await resp.json()) as ExecResult;
      let pos = 0;
      for (const [stream, text, b64] of [["stdout", r.stdout, r.stdout_base64], ["stderr", r.stderr, r.stderr_base64]] as const) {
        const ev = outputEvent(b64 ? { stream, base64: b64 } : { stream, text }, pos);
        pos = ev.next;
        if (ev.data.length) yield ev;
      }
      this.res = { ...r, stdout: "", stderr: "" };
      return;
    }
    let pos = 0;
    let lastId = "";
    try {
      for await (const ev of readSSE(resp.body!)) {
        lastId = ev.id;
        if (ev.event === "stdout" || ev.event === "stderr") {
          const o = outputEvent({ ...(JSON.parse(ev.data) as OutputChunk), stream: ev.event, offset: pos }, pos);
          pos = o.next;
          if (o.data.length) yield o;
        } else if (ev.event === "exit") {
          this.res = JSON.parse(ev.data) as ExecResult;
          return;
        } else if (ev.event === "error") {
          throw errorFromEnvelope(ev.data);
        }
      }
    } catch (e) {
      if (e instanceof WarrenError || this.signal?.aborted) throw e;
      return this.lost(lastId, pos, e);
    }
    return this.lost(lastId, pos, undefined);
  }

  // The connection broke before the exit event. Reconnecting with
  // Last-Event-ID is what the daemon documents for this: 204 if the stream
  // had in fact been whole, 409 otherwise (it never runs the command again).
  private async lost(lastId: string, pos: number, cause: unknown): Promise<void> {
    const msg = `exec: the connection broke after ${pos} bytes of output and the daemon keeps no copy of an exec's stream; run the command as a process (session.processes.start) to read its output from any offset`;
    if (!lastId) throw new StreamInterruptedError(msg, undefined, { cause });
    try {
      await this.t.call({ method: "POST", path: this.path, json: this.body, accept: "text/event-stream", headers: { "last-event-id": lastId }, signal: this.signal });
    } catch (e) {
      throw new StreamInterruptedError(msg, undefined, { cause: e });
    }
    throw new StreamInterruptedError(msg, undefined, { cause });
  }
}

/** Options of a process's output stream. */
export interface LogsOptions extends CallOptions {
  /** The offset of the first byte wanted (default 0, the oldest kept). */
  offset?: number;
  /** Keep reading as the process writes, until it exits (default false: what is there now). */
  follow?: boolean;
  /**
   * How many times in a row a broken connection is retried from the last
   * offset before the stream throws {@link StreamInterruptedError} (default
   * 8; any progress resets the count). Errors the daemon answers (404, 403)
   * are never retried.
   */
  retries?: number;
}

/** The processes of one session. */
export class Processes {
  /** @internal */
  constructor(private readonly t: Transport, private readonly sessionPath: string) {}

  private p(pid: string, suffix = ""): string {
    return `${this.sessionPath}/processes/${enc(pid)}${suffix}`;
  }

  /**
   * Starts a process that runs on its own, whatever happens to this client:
   * a string is a command for `bash -c`, an array an argv.
   */
  async start(req: string | string[] | StartProcessRequest, opts: CallOptions & Omit<StartProcessRequest, "command" | "argv"> = {}): Promise<ProcessHandle> {
    const { signal, ...rest } = opts;
    const body = typeof req === "string" ? { command: req } : Array.isArray(req) ? { argv: req } : req;
    const info = await this.t.json<ProcessInfo>({ method: "POST", path: `${this.sessionPath}/processes`, json: { ...body, ...rest }, signal });
    return new ProcessHandle(this, info);
  }

  /** Lists the session's processes, running and exited (shells included). */
  async list(opts: CallOptions = {}): Promise<ProcessInfo[]> {
    return (await this.t.json<{ processes: ProcessInfo[] }>({ method: "GET", path: `${this.sessionPath}/processes`, signal: opts.signal })).processes;
  }

  /** Describes one process. */
  get(pid: string, opts: CallOptions = {}): Promise<ProcessInfo> {
    return this.t.json<ProcessInfo>({ method: "GET", path: this.p(pid), signal: opts.signal });
  }

  /**
   * The process's output as events, from `offset`. With `follow` the stream
   * lasts until the process exits; a connection that breaks is reopened from
   * the offset after the last event, so no byte is lost or repeated.
   */
  async *logs(pid: string, opts: LogsOptions = {}): AsyncGenerator<ProcessEvent> {
    let pos = opts.offset ?? 0;
    const follow = opts.follow ?? false;
    const budget = opts.retries ?? 8;
    let failures = 0;
    for (;;) {
      let progressed = false;
      let cause: unknown;
      try {
        const resp = await this.t.send({
          method: "GET", path: this.p(pid, "/output"), query: { offset: pos, follow }, accept: "text/event-stream", signal: opts.signal,
        });
        if (resp.status === 204 || !resp.body) return;
        for await (const ev of readSSE(resp.body)) {
          if (ev.event === "output") {
            const o = outputEvent(JSON.parse(ev.data) as OutputChunk, pos);
            pos = o.next;
            progressed = true;
            yield o;
          } else if (ev.event === "gap") {
            const g = JSON.parse(ev.data) as OutputGap;
            pos = Math.max(pos, g.to);
            progressed = true;
            yield { type: "gap", offset: g.from, next: g.to };
          } else if (ev.event === "exit") {
            const x = JSON.parse(ev.data) as ProcessExit;
            yield { type: "exit", exitCode: x.exit_code, signal: x.signal, offset: pos, next: pos };
            return;
          } else if (ev.event === "error") {
            throw errorFromEnvelope(ev.data);
          }
        }
        if (!follow) return; // all there is now
        cause = new Error("the stream ended before the exit event");
      } catch (e) {
        if (opts.signal?.aborted) throw opts.signal.reason ?? e;
        // Retried: a broken connection, a daemon that is restarting
        // (unavailable) and a rate limit; what else the daemon answers
        // (404, 403) is final.
        if (e instanceof WarrenError && e.code !== "unavailable" && !(e instanceof RateLimitedError)) throw e;
        cause = e;
      }
      failures = progressed ? 1 : failures + 1;
      if (failures > budget) {
        throw new StreamInterruptedError(`process ${pid}: output stream broke ${failures} times in a row at offset ${pos}`, pos, { cause });
      }
      const wait = cause instanceof RateLimitedError ? cause.retryAfter * 1000 : Math.min(2000, 50 * 2 ** (failures - 1));
      await sleep(wait, opts.signal);
    }
  }

  /**
   * The raw output bytes (stdout and stderr merged) from `offset`, and the
   * offset of the first byte sent (later than asked when older bytes were
   * dropped).
   */
  async read(pid: string, opts: CallOptions & { offset?: number; follow?: boolean } = {}): Promise<{ offset: number; stream: ReadableStream<Uint8Array> }> {
    const resp = await this.t.send({
      method: "GET", path: this.p(pid, "/output"), query: { offset: opts.offset ?? 0, follow: opts.follow ?? false },
      accept: "application/octet-stream", signal: opts.signal,
    });
    const h = resp.headers.get("warren-output-offset");
    return { offset: h ? Number(h) : (opts.offset ?? 0), stream: resp.body ?? new Blob([]).stream() };
  }

  /** Follows the process's output to its end and returns how it exited (the output is discarded). */
  async wait(pid: string, opts: CallOptions = {}): Promise<ProcessExit> {
    const info = await this.get(pid, opts);
    for await (const ev of this.logs(pid, { ...opts, offset: info.output_bytes, follow: true })) {
      if (ev.type === "exit") return ev.signal ? { exit_code: ev.exitCode, signal: ev.signal } : { exit_code: ev.exitCode };
    }
    const again = await this.get(pid, opts);
    return { exit_code: again.exit_code ?? -1, ...(again.signal ? { signal: again.signal } : {}) };
  }

  /** Sends a signal (`TERM`, `INT`, `SIGKILL`, `9`); the process stays listed. */
  signal(pid: string, signal: string, opts: CallOptions = {}): Promise<void> {
    return this.t.call({ method: "POST", path: this.p(pid, "/signal"), json: { signal }, signal: opts.signal });
  }

  /** Kills the process and its process group and removes it with its output. */
  kill(pid: string, opts: CallOptions = {}): Promise<void> {
    return this.t.call({ method: "DELETE", path: this.p(pid), signal: opts.signal });
  }

  /** Resizes a TTY process's terminal. */
  resize(pid: string, cols: number, rows: number, opts: CallOptions = {}): Promise<void> {
    return this.t.call({ method: "POST", path: this.p(pid, "/resize"), json: { cols, rows }, signal: opts.signal });
  }

  /** Writes to the stdin of a process started with `stdin` or `tty`; `eof` closes it after. Returns the bytes taken. */
  async writeStdin(pid: string, data: Body, opts: CallOptions & { eof?: boolean } = {}): Promise<number> {
    const r = await this.t.json<{ written: number }>({
      method: "POST", path: this.p(pid, "/stdin"), query: { eof: opts.eof || undefined },
      body: toBody(data), contentType: "application/octet-stream", signal: opts.signal,
    });
    return r.written;
  }
}

/** A handle on one process, as returned by {@link Processes.start}. */
export class ProcessHandle {
  /** The process's id in the session, such as `p1`. */
  readonly id: string;
  /** @internal */
  constructor(private readonly ps: Processes, public info: ProcessInfo) {
    this.id = info.id;
  }
  /** Describes the process again (kept in `info`). */
  async refresh(opts: CallOptions = {}): Promise<ProcessInfo> {
    this.info = await this.ps.get(this.id, opts);
    return this.info;
  }
  /** See {@link Processes.logs}. */
  logs(opts: LogsOptions = {}): AsyncGenerator<ProcessEvent> {
    return this.ps.logs(this.id, opts);
  }
  /** See {@link Processes.wait}. */
  wait(opts: CallOptions = {}): Promise<ProcessExit> {
    return this.ps.wait(this.id, opts);
  }
  /** See {@link Processes.signal}. */
  signal(signal: string, opts: CallOptions = {}): Promise<void> {
    return this.ps.signal(this.id, signal, opts);
  }
  /** See {@link Processes.kill}. */
  kill(opts: CallOptions = {}): Promise<void> {
    return this.ps.kill(this.id, opts);
  }
  /** See {@link Processes.writeStdin}. */
  writeStdin(data: Body, opts: CallOptions & { eof?: boolean } = {}): Promise<number> {
    return this.ps.writeStdin(this.id, data, opts);
  }
  /** See {@link Processes.resize}. */
  resize(cols: number, rows: number, opts: CallOptions = {}): Promise<void> {
    return this.ps.resize(this.id, cols, rows, opts);
  }
}

function toBody(data: Body): BodyInit {
  if (typeof data === "string") return new TextEncoder().encode(data);
  return data as BodyInit;
}

/** Formats a mode as the four octal digits of the `mode` parameter. */
function formatMode(mode: number | string | undefined): string | undefined {
  if (mode === undefined) return undefined;
  if (typeof mode === "string") return mode;
  return mode.toString(8).padStart(4, "0");
}

/** The files of one session. Paths resolve inside the sandbox; relative ones against its cwd. */
export class Files {
  /** @internal */
  constructor(private readonly t: Transport, private readonly sessionPath: string) {}

  /** The file's bytes as a stream, for files too large to hold. */
  async stream(path: string, opts: CallOptions = {}): Promise<ReadableStream<Uint8Array>> {
    const resp = await this.t.send({ method: "GET", path: `${this.sessionPath}/files`, query: { path }, accept: "application/octet-stream", signal: opts.signal });
    return resp.body ?? new Blob([]).stream();
  }

  /** The file's bytes. */
  async read(path: string, opts: CallOptions = {}): Promise<Uint8Array> {
    const resp = await this.t.send({ method: "GET", path: `${this.sessionPath}/files`, query: { path }, accept: "application/octet-stream", signal: opts.signal });
    return new Uint8Array(await resp.arrayBuffer());
  }

  /** The file as UTF-8 text. */
  async readText(path: string, opts: CallOptions = {}): Promise<string> {
    return utf8.decode(await this.read(path, opts));
  }

  /**
   * Writes a file (text, bytes, a Blob or a stream, streamed as it comes),
   * creating missing parents. `mode` is a number (`0o755`) or octal string.
   */
  write(path: string, data: Body, opts: CallOptions & { mode?: number | string } = {}): Promise<FileWritten> {
    return this.t.json<FileWritten>({
      method: "PUT", path: `${this.sessionPath}/files`, query: { path, mode: formatMode(opts.mode) },
      body: toBody(data), contentType: "application/octet-stream", signal: opts.signal,
    });
  }

  /** Describes the entries of a directory. */
  async list(path: string, opts: CallOptions = {}): Promise<FileEntry[]> {
    return (await this.t.json<{ entries: FileEntry[] }>({ method: "GET", path: `${this.sessionPath}/files/list`, query: { path }, signal: opts.signal })).entries;
  }

  /** Describes a file, directory or symlink. */
  stat(path: string, opts: CallOptions = {}): Promise<FileEntry> {
    return this.t.json<FileEntry>({ method: "GET", path: `${this.sessionPath}/files/stat`, query: { path }, signal: opts.signal });
  }

  /** Whether something exists at path. */
  async exists(path: string, opts: CallOptions = {}): Promise<boolean> {
    try {
      await this.stat(path, opts);
      return true;
    } catch (e) {
      if (e instanceof NotFoundError) return false;
      throw e;
    }
  }

  /** Removes a file, or with `recursive` a directory and all below it. */
  remove(path: string, opts: CallOptions & { recursive?: boolean } = {}): Promise<void> {
    return this.t.call({ method: "DELETE", path: `${this.sessionPath}/files`, query: { path, recursive: opts.recursive || undefined }, signal: opts.signal });
  }

  /** Creates a directory and its missing parents (mkdir -p). */
  mkdir(path: string, opts: CallOptions = {}): Promise<FileEntry> {
    return this.t.json<FileEntry>({ method: "POST", path: `${this.sessionPath}/files/mkdir`, query: { path }, signal: opts.signal });
  }

  /** A tar of the directory at path (entry names relative to it), streamed. */
  async downloadTar(path: string, opts: CallOptions = {}): Promise<ReadableStream<Uint8Array>> {
    const resp = await this.t.send({ method: "GET", path: `${this.sessionPath}/archive`, query: { path }, accept: "application/x-tar", signal: opts.signal });
    return resp.body ?? new Blob([]).stream();
  }

  /** Extracts a tar into the directory at path, streamed. */
  uploadTar(path: string, tar: Body, opts: CallOptions = {}): Promise<FileWritten> {
    return this.t.json<FileWritten>({
      method: "PUT", path: `${this.sessionPath}/archive`, query: { path }, body: toBody(tar), contentType: "application/x-tar", signal: opts.signal,
    });
  }

  /** Node, Bun, Deno: copies the local directory `localDir` into the session's `path` (as one tar). */
  async uploadDir(localDir: string, path: string, opts: CallOptions = {}): Promise<FileWritten> {
    const { packDir } = await import("./tar.js");
    return this.uploadTar(path, await packDir(localDir), opts);
  }

  /** Node, Bun, Deno: copies the session's directory `path` into the local `localDir` (created if missing). */
  async downloadDir(path: string, localDir: string, opts: CallOptions = {}): Promise<void> {
    const { unpackTo } = await import("./tar.js");
    const body = await this.archiveBytes(path, opts);
    await unpackTo(body, localDir);
  }

  private async archiveBytes(path: string, opts: CallOptions): Promise<Uint8Array> {
    const resp = await this.t.send({ method: "GET", path: `${this.sessionPath}/archive`, query: { path }, accept: "application/x-tar", signal: opts.signal });
    return new Uint8Array(await resp.arrayBuffer());
  }
}

/** Rules (strings or arrays of them), then optionally the call's options. */
export type RulesAndOptions = (string | string[] | CallOptions)[];

/** The egress policy of one session (docs/NETWORKING.md). */
export class Network {
  /** @internal */
  constructor(private readonly t: Transport, private readonly sessionPath: string) {}

  /** The policy in force. */
  get(opts: CallOptions = {}): Promise<NetworkPolicy> {
    return this.t.json<NetworkPolicy>({ method: "GET", path: `${this.sessionPath}/network`, signal: opts.signal });
  }

  /** Replaces the policy's rules (and mode, if given) live, whole or not at all. */
  set(policy: NetworkPolicy, opts: CallOptions = {}): Promise<NetworkPolicy> {
    return this.t.json<NetworkPolicy>({ method: "PATCH", path: `${this.sessionPath}/network`, json: policy, signal: opts.signal });
  }

  /**
   * Adds rules (names, wildcards, addresses, CIDRs, with optional `:port`)
   * to the allow list: `allow("pypi.org", "*.pythonhosted.org")`, or an
   * array, and options last: `allow(["pypi.org"], { signal })`.
   */
  allow(...args: RulesAndOptions): Promise<NetworkPolicy> {
    return this.add("allow", args);
  }

  /** Adds rules to the deny list, which wins over allow; arguments as {@link Network.allow}. */
  deny(...args: RulesAndOptions): Promise<NetworkPolicy> {
    return this.add("deny", args);
  }

  private async add(list: "allow" | "deny", args: RulesAndOptions): Promise<NetworkPolicy> {
    const rules: string[] = [];
    let opts: CallOptions = {};
    for (const a of args) {
      if (typeof a === "string") rules.push(a);
      else if (Array.isArray(a)) rules.push(...a);
      else opts = a;
    }
    const p = await this.get(opts);
    return this.set({ ...p, [list]: [...new Set([...(p[list] ?? []), ...rules])] }, opts);
  }

  /** The latest names and connections the policy refused, oldest first. */
  async denials(opts: CallOptions = {}): Promise<NetworkDenial[]> {
    return (await this.t.json<{ denials: NetworkDenial[] }>({ method: "GET", path: `${this.sessionPath}/network/denials`, signal: opts.signal })).denials;
  }
}

/** The listening ports of one session, reached through the daemon. */
export class Ports {
  /** @internal */
  constructor(private readonly t: Transport, private readonly sessionPath: string) {}

  /** The TCP ports listening in the session. */
  async list(opts: CallOptions = {}): Promise<Port[]> {
    return (await this.t.json<{ ports: Port[] }>({ method: "GET", path: `${this.sessionPath}/ports`, signal: opts.signal })).ports;
  }

  /**
   * The URL where the daemon serves the port (HTTP and WebSocket), plus an
   * optional `path`. It needs the credential as a header unless the port is
   * public; with `token` it carries a short-lived token (`POST /v1/tokens`)
   * as `?token=`, for a browser to open (the daemon swaps it for a cookie at
   * the first visit, docs/PORTS.md).
   */
  async url(port: number, opts: CallOptions & { path?: string; token?: boolean; ttlSeconds?: number } = {}): Promise<string> {
    const u = this.t.url(`${this.sessionPath}/ports/${port}/${(opts.path ?? "").replace(/^\/+/, "")}`);
    if (!opts.token) return u;
    const tok = await this.t.json<Token>({ method: "POST", path: "/v1/tokens", json: { ttl_seconds: opts.ttlSeconds ?? 300 }, signal: opts.signal });
    return `${u}?token=${encodeURIComponent(tok.token)}`;
  }

  /** Serves the port without authentication (if the tenant allows it), or with it again. */
  setPublic(port: number, isPublic: boolean, opts: CallOptions = {}): Promise<Port> {
    return this.t.json<Port>({ method: "PUT", path: `${this.sessionPath}/ports/${port}`, json: { public: isPublic }, signal: opts.signal });
  }
}

/** Snapshots: a session's files frozen into a layer new sessions start from. */
export class Snapshots {
  /** @internal */
  constructor(private readonly t: Transport) {}

  /** Lists the caller's snapshots. */
  async list(opts: CallOptions = {}): Promise<Snapshot[]> {
    return (await this.t.json<{ snapshots: Snapshot[] }>({ method: "GET", path: "/v1/snapshots", signal: opts.signal })).snapshots;
  }
  /** Describes one snapshot. */
  get(name: string, opts: CallOptions = {}): Promise<Snapshot> {
    return this.t.json<Snapshot>({ method: "GET", path: `/v1/snapshots/${enc(name)}`, signal: opts.signal });
  }
  /** Deletes a snapshot no session uses. */
  delete(name: string, opts: CallOptions = {}): Promise<void> {
    return this.t.call({ method: "DELETE", path: `/v1/snapshots/${enc(name)}`, signal: opts.signal });
  }
  /** The snapshot as a zstd archive, streamed. */
  async export(name: string, opts: CallOptions = {}): Promise<ReadableStream<Uint8Array>> {
    const resp = await this.t.send({ method: "GET", path: `/v1/snapshots/${enc(name)}/export`, accept: "application/zstd", signal: opts.signal });
    return resp.body ?? new Blob([]).stream();
  }
  /** Stores an exported archive as the snapshot `name`. */
  import(name: string, archive: Body, opts: CallOptions = {}): Promise<Snapshot> {
    return this.t.json<Snapshot>({ method: "PUT", path: `/v1/snapshots/${enc(name)}/import`, body: toBody(archive), contentType: "application/zstd", signal: opts.signal });
  }
}

/** Workspaces: named directories that outlive sessions, mounted at /workspace. */
export class Workspaces {
  /** @internal */
  constructor(private readonly t: Transport) {}

  /** Creates a workspace. */
  create(req: CreateWorkspaceRequest | string, opts: CallOptions = {}): Promise<Workspace> {
    return this.t.json<Workspace>({ method: "POST", path: "/v1/workspaces", json: typeof req === "string" ? { name: req } : req, signal: opts.signal });
  }
  /** Lists the caller's workspaces. */
  async list(opts: CallOptions = {}): Promise<Workspace[]> {
    return (await this.t.json<{ workspaces: Workspace[] }>({ method: "GET", path: "/v1/workspaces", signal: opts.signal })).workspaces;
  }
  /** Describes one workspace. */
  get(name: string, opts: CallOptions = {}): Promise<Workspace> {
    return this.t.json<Workspace>({ method: "GET", path: `/v1/workspaces/${enc(name)}`, signal: opts.signal });
  }
  /** Deletes a workspace no session mounts. */
  delete(name: string, opts: CallOptions = {}): Promise<void> {
    return this.t.call({ method: "DELETE", path: `/v1/workspaces/${enc(name)}`, signal: opts.signal });
  }
}

/** Images: the root filesystems sessions start from. */
export class Images {
  /** @internal */
  constructor(private readonly t: Transport) {}

  /** Lists the stored images. */
  async list(opts: CallOptions = {}): Promise<Image[]> {
    return (await this.t.json<{ images: Image[] }>({ method: "GET", path: "/v1/images", signal: opts.signal })).images;
  }
  /** Describes one image. */
  get(name: string, opts: CallOptions = {}): Promise<Image> {
    return this.t.json<Image>({ method: "GET", path: `/v1/images/${enc(name)}`, signal: opts.signal });
  }
  /** Deletes an image. */
  delete(name: string, opts: CallOptions = {}): Promise<void> {
    return this.t.call({ method: "DELETE", path: `/v1/images/${enc(name)}`, signal: opts.signal });
  }
  /** Removes stored blobs no image uses. */
  prune(opts: CallOptions = {}): Promise<ImagePruneResult> {
    return this.t.json<ImagePruneResult>({ method: "POST", path: "/v1/images/prune", signal: opts.signal });
  }
  /**
   * Stores a root filesystem tar (plain or gzip), an OCI layout or a docker
   * archive as the image `name`, streamed.
   */
  import(name: string, archive: Body, opts: CallOptions & { format?: "rootfs" | "oci-layout" | "docker-archive"; platform?: string; gzip?: boolean } = {}): Promise<Image> {
    // Bytes in hand are labelled by their first two (gzip starts 1f 8b), as
    // the Go client does; a stream is labelled by the gzip option.
    const gz = opts.gzip ?? (archive instanceof Uint8Array && archive[0] === 0x1f && archive[1] === 0x8b);
    return this.t.json<Image>({
      method: "POST", path: "/v1/images", query: { name, format: opts.format, platform: opts.platform },
      body: toBody(archive), contentType: gz ? "application/gzip" : "application/x-tar", signal: opts.signal,
    });
  }
  /** Pulls an image from a registry; `onProgress` gets its progress events. */
  async pull(req: PullImageRequest | string, opts: CallOptions & { onProgress?: (p: PullProgress) => void } = {}): Promise<Image> {
    const body = typeof req === "string" ? { ref: req } : req;
    const resp = await this.t.send({ method: "POST", path: "/v1/images/pull", json: body, accept: "text/event-stream", signal: opts.signal });
    if ((resp.headers.get("content-type") ?? "").startsWith("application/json")) return (await resp.json()) as Image;
    for await (const ev of readSSE(resp.body!)) {
      if (ev.event === "progress") opts.onProgress?.(JSON.parse(ev.data) as PullProgress);
      else if (ev.event === "image") return JSON.parse(ev.data) as Image;
      else if (ev.event === "error") throw errorFromEnvelope(ev.data);
    }
    throw new StreamInterruptedError("pull: the stream ended before the image event");
  }
}

export { base64ToBytes };
