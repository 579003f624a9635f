// The interactive shell: a pseudo-terminal in the session over a WebSocket
// (docs in api/openapi.yaml, x-websocket of /v1/sessions/{id}/shell).
//
// Which WebSocket: Node before 22 has no global WebSocket, so under Node the
// optional peer `ws` is used when it is installed (it can send the
// Authorization header and reports the status of a refused upgrade, which
// becomes a typed error); otherwise the runtime's own WebSocket (browsers,
// Deno, Bun, Node 22+), which cannot send headers: the SDK then passes a
// short-lived token as `?token=` (the credential itself if it is one, else a
// token minted with POST /v1/tokens), since the daemon refuses API keys in
// URLs. A WebSocket client of our own would be ~300 lines of framing and
// TLS for one feature; `ws` is the de-facto standard and stays optional.

import "./polyfill.js";
import { UnavailableError, WarrenError } from "./errors.js";
import { type CallOptions, type Transport, errorFromEnvelope, errorFromResponse } from "./transport.js";
import type { ShellMessage, Token } from "./types.js";

/** Options of {@link Session.shell}. */
export interface ShellOptions extends CallOptions {
  /** Attach to this running TTY process instead of starting a new login shell. */
  process?: string;
  /** The terminal's width (default 80). */
  cols?: number;
  /** The terminal's height (default 24). */
  rows?: number;
  /** Kill the shell when this connection closes (default: it keeps running for a later attach). */
  killOnClose?: boolean;
  /** A WebSocket constructor to use instead of `ws` or the global one. */
  webSocket?: WebSocketCtor;
}

/** How a shell ended. */
export interface ShellExit {
  exitCode: number;
  signal?: string | undefined;
}

/** The browser WebSocket interface, which `ws` also implements. */
export type WebSocketCtor = new (url: string, protocolsOrOptions?: unknown) => WebSocket;

type NodeWS = WebSocket & { on(ev: "unexpected-response", f: (req: unknown, res: NodeIncoming) => void): void };
type NodeIncoming = { statusCode?: number; statusMessage?: string; headers: Record<string, string | string[] | undefined>; on(ev: string, f: (x?: unknown) => void): void };

async function pickWebSocket(opt: WebSocketCtor | undefined): Promise<{ WS: WebSocketCtor; headers: boolean }> {
  if (opt) return { WS: opt, headers: false };
  const isNode = typeof (globalThis as { process?: { versions?: { node?: string } } }).process?.versions?.node === "string";
  if (isNode) {
    try {
      const m = (await import("ws" as string)) as { default?: WebSocketCtor; WebSocket?: WebSocketCtor };
      const WS = m.WebSocket ?? m.default;
      if (WS) return { WS, headers: true };
    } catch {
      // not installed: the global one, if any
    }
  }
  const g = (globalThis as { WebSocket?: WebSocketCtor }).WebSocket;
  if (g) return { WS: g, headers: false };
  throw new TypeError("warren: this runtime has no WebSocket; install the optional peer dependency `ws` (Node before 22)");
}

/**
 * An interactive shell. Iterate it for the terminal's output; `write` types
 * into it. The shell is a process of the session (`processId`) and outlives
 * the connection unless opened with `killOnClose`.
 */
export class Shell implements AsyncIterable<Uint8Array>, AsyncDisposable {
  /** The id of the shell's process in the session, for a later attach. */
  processId = "";
  /** Resolves when the connection closes: with how the shell exited, or undefined if it still runs. */
  readonly closed: Promise<ShellExit | undefined>;
  private exit: ShellExit | undefined;
  private queue: Uint8Array[] = [];
  // Who waits for output or the end: readUntil and the iterator may both.
  private waiters: (() => void)[] = [];
  private ended = false;
  private failure: unknown;
  private resolveClosed!: (x: ShellExit | undefined) => void;
  private text = "";
  private readonly dec = new TextDecoder();

  private constructor(private readonly ws: WebSocket) {
    this.closed = new Promise((r) => (this.resolveClosed = r));
  }

  /** @internal */
  static async open(t: Transport, path: string, opts: ShellOptions, mint: (o: CallOptions & { ttlSeconds?: number }) => Promise<Token>): Promise<Shell> {
    opts.signal?.throwIfAborted();
    const { WS, headers } = await pickWebSocket(opts.webSocket);
    const q: Record<string, string | number | boolean | undefined> = {
      process: opts.process, cols: opts.cols, rows: opts.rows, kill_on_close: opts.killOnClose || undefined,
    };
    const init: { headers?: Record<string, string> } = {};
    if (t.credential) {
      if (headers) init.headers = { authorization: `Bearer ${t.credential}` };
      else if (t.credential.startsWith("wrt_")) q.token = t.credential;
      else q.token = (await mint({ ttlSeconds: 60, signal: opts.signal })).token;
    }
    if (t.userAgent && headers) init.headers = { ...init.headers, "user-agent": t.userAgent };
    const url = t.url(path, q).replace(/^http/, "ws");
    const ws = headers ? new WS(url, init) : new WS(url);
    ws.binaryType = "arraybuffer";
    const sh = new Shell(ws);
    return new Promise<Shell>((resolve, reject) => {
      let settled = false;
      const fail = (e: unknown) => {
        if (settled) return;
        settled = true;
        try {
          ws.close();
        } catch {
          // not open yet
        }
        reject(e);
      };
      const onAbort = () => fail(opts.signal?.reason);
      opts.signal?.addEventListener("abort", onAbort, { once: true });
      if (headers && typeof (ws as NodeWS).on === "function") {
        (ws as NodeWS).on("unexpected-response", (_req, res) => {
          const chunks: Uint8Array[] = [];
          res.on("data", (c) => chunks.push(c as Uint8Array));
          res.on("end", () => {
            const hs = new Headers();
            for (const [k, v] of Object.entries(res.headers)) if (typeof v === "string") hs.set(k, v);
            const resp = new Response(new Blob(chunks as BlobPart[]), { status: res.statusCode ?? 500, headers: hs });
            errorFromResponse(resp).then(fail, fail);
          });
        });
      }
      ws.onmessage = (ev: MessageEvent) => {
        if (typeof ev.data === "string") {
          let m: ShellMessage;
          try {
            m = JSON.parse(ev.data) as ShellMessage;
          } catch {
            return; // not for this client
          }
          if (m.type === "process" && m.id) {
            sh.processId = m.id;
            if (!settled) {
              settled = true;
              opts.signal?.removeEventListener("abort", onAbort);
              opts.signal?.addEventListener("abort", () => void sh.close(), { once: true });
              resolve(sh);
            }
          } else if (m.type === "exit") {
            sh.exit = { exitCode: m.exit_code ?? 0, signal: m.signal };
          } else if (m.type === "error") {
            const err = errorFromEnvelope(m.error);
            if (!settled) fail(err);
            else sh.failure = err;
          }
          return;
        }
        sh.push(new Uint8Array(ev.data as ArrayBuffer));
      };
      ws.onerror = () => {
        if (!settled) fail(new UnavailableError({ status: 503, code: "unavailable", message: `shell: the WebSocket to ${path} failed before it opened` }));
      };
      ws.onclose = (ev: CloseEvent) => {
        sh.ended = true;
        if (!settled) {
          fail(new UnavailableError({ status: 503, code: "unavailable", message: `shell: the WebSocket closed (${ev.code} ${ev.reason}) before the shell started` }));
        }
        sh.resolveClosed(sh.exit);
        sh.wake();
      };
    });
  }

  private push(b: Uint8Array) {
    this.queue.push(b);
    this.text += this.dec.decode(b, { stream: true });
    if (this.text.length > 1 << 20) this.text = this.text.slice(-(1 << 19));
    this.wake();
  }

  private wake() {
    const ws = this.waiters;
    this.waiters = [];
    for (const w of ws) w();
  }

  /** How the shell exited, once it has. */
  get exited(): ShellExit | undefined {
    return this.exit;
  }

  /** The shell's exit code, once it has exited. */
  get exitCode(): number | undefined {
    return this.exit?.exitCode;
  }

  /** Types into the terminal (text is sent as UTF-8 bytes). */
  write(data: string | Uint8Array): void {
    this.ws.send(typeof data === "string" ? new TextEncoder().encode(data) : data);
  }

  /** Resizes the terminal. */
  resize(cols: number, rows: number): void {
    this.ws.send(JSON.stringify({ type: "resize", cols, rows }));
  }

  /**
   * Waits until the terminal's output (since the shell opened) matches
   * pattern and returns the output up to the end of the match, consuming it.
   */
  async readUntil(pattern: string | RegExp, opts: CallOptions & { timeoutMs?: number } = {}): Promise<string> {
    const deadline = Date.now() + (opts.timeoutMs ?? 30_000);
    for (;;) {
      const m = typeof pattern === "string" ? (() => { const i = this.text.indexOf(pattern); return i < 0 ? null : i + pattern.length; })() : (() => { const r = pattern.exec(this.text); return r ? r.index + r[0].length : null; })();
      if (m !== null) {
        const out = this.text.slice(0, m);
        this.text = this.text.slice(m);
        this.queue = [];
        return out;
      }
      if (this.ended) throw this.failure ?? new UnavailableError({ status: 503, code: "unavailable", message: `shell: closed before ${String(pattern)} appeared; output: ${JSON.stringify(this.text.slice(-200))}` });
      opts.signal?.throwIfAborted();
      const left = deadline - Date.now();
      if (left <= 0) throw new WarrenError({ status: 408, code: "deadline_exceeded", message: `shell: ${String(pattern)} did not appear in time; output: ${JSON.stringify(this.text.slice(-200))}` });
      await new Promise<void>((r) => {
        const tm = setTimeout(r, left);
        this.waiters.push(() => {
          clearTimeout(tm);
          r();
        });
      });
    }
  }

  /** The terminal's output as it comes, until the connection closes. */
  async *[Symbol.asyncIterator](): AsyncGenerator<Uint8Array> {
    for (;;) {
      const b = this.queue.shift();
      if (b) {
        yield b;
        continue;
      }
      if (this.ended) {
        if (this.failure) throw this.failure;
        return;
      }
      await new Promise<void>((r) => this.waiters.push(r));
    }
  }

  /** Closes the connection (the shell keeps running unless opened with `killOnClose`). */
  async close(): Promise<ShellExit | undefined> {
    if (!this.ended) this.ws.close(1000);
    return this.closed;
  }

  /** `await using sh = await s.shell()`: closes the connection. */
  async [Symbol.asyncDispose](): Promise<void> {
    await this.close();
  }
}
