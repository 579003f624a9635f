// The HTTP core: one fetch per call, the credential as a bearer header, the
// error envelope turned into a typed error. Kept small on purpose: the SDK's
// own cost per call is measured (docs/BENCHMARKS.md) against a bare fetch.

import { ConnectionFailedError, WarrenError, codeOfStatus, errorOf, parseRetryAfter, statusOfCode } from "./errors.js";

/** A `fetch` function: the global one, or one the caller supplies (a proxy agent, a test double). */
export type FetchLike = (input: string, init: RequestInit) => Promise<Response>;

/** Options common to every call. */
export interface CallOptions {
  /** Cancels the call (and the stream it returns, for streaming calls). */
  signal?: AbortSignal | undefined;
}

/** Query parameters; undefined values are left out. */
export type Query = Record<string, string | number | boolean | undefined>;

/** One request to the daemon. */
export interface RequestSpec extends CallOptions {
  method: string;
  /** The path, already escaped, such as `/v1/sessions/s1/exec`. */
  path: string;
  query?: Query | undefined;
  /** A JSON body (serialized here). */
  json?: unknown;
  /** A raw body, sent as is with `contentType`. */
  body?: BodyInit | undefined;
  contentType?: string | undefined;
  accept?: string | undefined;
  headers?: Record<string, string> | undefined;
}

/** The connection to one daemon, shared by every resource of a client. */
export class Transport {
  readonly baseUrl: string;
  readonly credential: string | undefined;
  readonly userAgent: string | undefined;
  private readonly fetchImpl: FetchLike;

  constructor(baseUrl: string, credential: string | undefined, fetchImpl: FetchLike | undefined, userAgent: string | undefined) {
    this.baseUrl = baseUrl.replace(/\/+$/, "");
    this.credential = credential;
    this.userAgent = userAgent;
    if (fetchImpl) {
      this.fetchImpl = fetchImpl;
    } else {
      if (typeof globalThis.fetch !== "function") throw new TypeError("warren: no fetch in this runtime; pass one as the fetch option");
      // Bound: a browser's fetch called as a method of another object
      // throws "Illegal invocation".
      this.fetchImpl = globalThis.fetch.bind(globalThis) as FetchLike;
    }
  }

  /** The absolute URL of a path and query. */
  url(path: string, query?: Query): string {
    let u = this.baseUrl + path;
    if (query) {
      const q = new URLSearchParams();
      for (const [k, v] of Object.entries(query)) if (v !== undefined) q.set(k, String(v));
      const s = q.toString();
      if (s) u += "?" + s;
    }
    return u;
  }

  /** Sends a request and returns the response of a 2xx status; any other status throws its typed error. */
  async send(r: RequestSpec): Promise<Response> {
    const headers: Record<string, string> = { ...r.headers };
    let body: BodyInit | undefined = r.body;
    if (r.json !== undefined) {
      body = JSON.stringify(r.json);
      headers["content-type"] = "application/json";
    } else if (body !== undefined && r.contentType) {
      headers["content-type"] = r.contentType;
    }
    if (r.accept) headers["accept"] = r.accept;
    if (this.credential) headers["authorization"] = `Bearer ${this.credential}`;
    if (this.userAgent) headers["user-agent"] = this.userAgent;
    const init: RequestInit & { duplex?: "half" } = { method: r.method, headers, body: body ?? null, signal: r.signal ?? null };
    // A streamed body (ReadableStream) needs half duplex in Node's fetch.
    if (body && typeof (body as ReadableStream).getReader === "function") init.duplex = "half";
    let resp: Response;
    try {
      resp = await this.fetchImpl(this.url(r.path, r.query), init);
    } catch (e) {
      // A cancelled call stays the runtime's AbortError; anything else that
      // kept the request from an answer is the daemon being unreachable.
      if (r.signal?.aborted || (e as Error)?.name === "AbortError") throw e;
      const why = (e as { cause?: { message?: string } })?.cause?.message ?? (e as Error)?.message ?? String(e);
      throw new ConnectionFailedError({ status: 0, code: "unavailable", message: `${r.method} ${this.baseUrl}${r.path}: ${why}` }, { cause: e });
    }
    if (resp.status < 200 || resp.status > 299) throw await errorFromResponse(resp);
    return resp;
  }

  /** Sends a request and decodes its JSON answer (undefined for 204). */
  async json<T>(r: RequestSpec): Promise<T> {
    const resp = await this.send({ accept: "application/json", ...r });
    if (resp.status === 204) return undefined as T;
    return (await resp.json()) as T;
  }

  /** Sends a request whose answer has no body worth reading. */
  async call(r: RequestSpec): Promise<void> {
    const resp = await this.send(r);
    await resp.body?.cancel();
  }
}

/** Builds the typed error of a non-2xx response. */
export async function errorFromResponse(resp: Response): Promise<WarrenError> {
  const requestId = resp.headers.get("x-request-id") ?? undefined;
  const retryAfter = parseRetryAfter(resp.headers.get("retry-after"));
  let text = "";
  try {
    text = await resp.text();
  } catch {
    // the body broke off: the status alone says what happened
  }
  try {
    const env = JSON.parse(text) as { error?: { code?: string; message?: string } };
    if (env?.error?.code) {
      return errorOf({ status: resp.status, code: env.error.code, message: env.error.message ?? "", requestId, retryAfter });
    }
  } catch {
    // not an envelope: a proxy's page, or nothing
  }
  const summary = text.replace(/<[^>]*>/g, " ").replace(/\s+/g, " ").trim().slice(0, 200);
  const head = `HTTP ${resp.status}${resp.statusText ? " " + resp.statusText : ""}`;
  return errorOf({ status: resp.status, code: codeOfStatus(resp.status), message: summary ? `${head}: ${summary}` : head, requestId, retryAfter });
}

/** The typed error of an `error` event (its data is the envelope), or of a shell's error message. */
export function errorFromEnvelope(data: string | { code?: string; message?: string } | undefined): WarrenError {
  let body: { code?: string; message?: string } | undefined;
  if (typeof data === "string") {
    try {
      body = (JSON.parse(data) as { error?: { code?: string; message?: string } }).error;
    } catch {
      body = undefined;
    }
  } else {
    body = data;
  }
  if (!body?.code) {
    return errorOf({ status: 500, code: "internal", message: `the daemon reported an error that is not an envelope: ${String(data).slice(0, 200)}` });
  }
  return errorOf({ status: statusOfCode(body.code), code: body.code, message: body.message ?? "" });
}

/** One server-sent event. */
export interface SSEEvent {
  /** The `event:` field, or `message`. */
  event: string;
  /** The `data:` lines joined by newlines. */
  data: string;
  /** The stream's last event id when the event was dispatched. */
  id: string;
}

/**
 * Parses a text/event-stream as the HTML standard does: CRLF, LF or CR line
 * ends; comments (keep-alives) skipped; an event cut off by the end of the
 * stream dropped.
 */
export async function* readSSE(body: ReadableStream<Uint8Array>): AsyncGenerator<SSEEvent> {
  const reader = body.getReader();
  const dec = new TextDecoder();
  let buf = "";
  let name = "";
  let data: string[] = [];
  let lastId = "";
  let first = true;
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      buf += dec.decode(value, { stream: true });
      if (first && buf.length > 0) {
        if (buf.charCodeAt(0) === 0xfeff) buf = buf.slice(1);
        first = false;
      }
      let start = 0;
      for (;;) {
        let i = start;
        while (i < buf.length && buf[i] !== "\n" && buf[i] !== "\r") i++;
        if (i >= buf.length) break;
        // A CR at the end of the buffer may be followed by an LF not read yet.
        if (buf[i] === "\r" && i + 1 >= buf.length) break;
        const line = buf.slice(start, i);
        start = buf[i] === "\r" && buf[i + 1] === "\n" ? i + 2 : i + 1;
        if (line === "") {
          if (data.length > 0) yield { event: name || "message", data: data.join("\n"), id: lastId };
          name = "";
          data = [];
          continue;
        }
        if (line[0] === ":") continue;
        const c = line.indexOf(":");
        const field = c < 0 ? line : line.slice(0, c);
        let v = c < 0 ? "" : line.slice(c + 1);
        if (v[0] === " ") v = v.slice(1);
        if (field === "event") name = v;
        else if (field === "data") data.push(v);
        else if (field === "id" && !v.includes("\0")) lastId = v;
      }
      buf = buf.slice(start);
    }
  } finally {
    reader.cancel().catch(() => {});
  }
}

/** An output chunk's bytes: its text, or its base64 when it was not UTF-8. */
export function chunkBytes(c: { text?: string; base64?: string }): Uint8Array {
  if (c.base64) return base64ToBytes(c.base64);
  return new TextEncoder().encode(c.text ?? "");
}

/** Decodes standard base64 without Buffer (browsers have atob). */
export function base64ToBytes(b64: string): Uint8Array {
  const bin = atob(b64);
  const out = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
  return out;
}

/** Encodes bytes as standard base64 without Buffer. */
export function bytesToBase64(b: Uint8Array): string {
  let s = "";
  for (let i = 0; i < b.length; i += 0x8000) s += String.fromCharCode(...b.subarray(i, i + 0x8000));
  return btoa(s);
}

/** Resolves after ms, or rejects when signal aborts. */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const t = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    const onAbort = () => {
      clearTimeout(t);
      reject(signal?.reason);
    };
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}
