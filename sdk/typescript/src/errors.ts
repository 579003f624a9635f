// Typed errors. The daemon answers every failure with the envelope
// {"error":{"code","message"}} and one status per class (internal/edge owns
// the map); each class is one subclass here, so that callers write
// `catch (e) { if (e instanceof NotFoundError) ... }` and never parse
// messages.

/** What every error of the daemon carries. */
export interface WarrenErrorInit {
  /** The HTTP status (for an error event of a stream: the class's status). */
  status: number;
  /** The envelope's class, such as `not_found`. */
  code: string;
  /** The envelope's sentence. */
  message: string;
  /** The `X-Request-ID` the call was served and logged under, if known. */
  requestId?: string | undefined;
  /** Seconds the daemon asked to wait before retrying (`Retry-After`), if any. */
  retryAfter?: number | undefined;
}

/**
 * An error answered by the daemon (or by something in front of it, such as
 * a proxy). Its subclass tells the class; `code` is the wire name.
 */
export class WarrenError extends Error {
  /** The HTTP status. */
  readonly status: number;
  /** The envelope's class, such as `not_found`. */
  readonly code: string;
  /** The request id the daemon logged the call under, if it said. */
  readonly requestId: string | undefined;
  /** Seconds to wait before retrying (`Retry-After`), or undefined. */
  readonly retryAfter: number | undefined;

  constructor(init: WarrenErrorInit) {
    super(init.message ? `${init.code}: ${init.message}` : init.code);
    this.name = new.target.name;
    this.status = init.status;
    this.code = init.code;
    this.requestId = init.requestId;
    this.retryAfter = init.retryAfter;
  }
}

/** 400 `invalid_argument`: the request was malformed or named something impossible. */
export class InvalidArgumentError extends WarrenError {}
/** 401 `unauthenticated`: no credential, or one the daemon does not accept. */
export class UnauthenticatedError extends WarrenError {}
/** 403 `permission_denied`: the credential may not do this. */
export class PermissionDeniedError extends WarrenError {}
/** 404 `not_found`: no such session, process, file, image, snapshot or workspace (or another tenant's). */
export class NotFoundError extends WarrenError {}
/** 409 `conflict`: the request contradicts the state of what it names. */
export class ConflictError extends WarrenError {}
/** 413 `too_large`: a command, file or body past a documented limit. */
export class TooLargeError extends WarrenError {}
/**
 * 429 `resource_exhausted`: a bounded resource is used up (a session's
 * processes or terminals, its disk). Its subclasses say when it is a rate
 * limit or a tenant's quota.
 */
export class ResourceExhaustedError extends WarrenError {}
/** 429 with `Retry-After`: the credential's rate limit; wait `retryAfter` seconds. */
export class RateLimitedError extends ResourceExhaustedError {
  declare readonly retryAfter: number;
}
/** 429: the call would exceed one of the tenant's quotas, named by `quota` (such as `max_sessions`). */
export class QuotaExceededError extends ResourceExhaustedError {
  /** The quota, such as `max_sessions`. */
  readonly quota: string;
  constructor(init: WarrenErrorInit, quota: string) {
    super(init);
    this.quota = quota;
  }
}
/** 503 `unavailable` (also 502 and 504 from a proxy): try again later. */
export class UnavailableError extends WarrenError {}
/**
 * The daemon could not be reached at all (refused, reset, DNS, TLS): no
 * answer, so `status` is 0. An {@link UnavailableError}, since waiting and
 * retrying is what helps; `cause` is the runtime's own error.
 */
export class ConnectionFailedError extends UnavailableError {
  constructor(init: WarrenErrorInit, options?: { cause?: unknown }) {
    super(init);
    if (options?.cause !== undefined) (this as { cause?: unknown }).cause = options.cause;
  }
}
/** 500 `internal`: a bug in the daemon; its message and request id are for the report. */
export class InternalError extends WarrenError {}

/**
 * A stream that broke and cannot be resumed: an exec whose connection was
 * lost after part of its output (the daemon keeps no copy of an exec's
 * stream; run what must survive reconnects as a process), or a process
 * stream that failed more times in a row than its retry budget allows.
 */
export class StreamInterruptedError extends Error {
  /** The offset after the last byte delivered (processes), or undefined (exec). */
  readonly offset: number | undefined;
  constructor(message: string, offset?: number, options?: { cause?: unknown }) {
    super(message, options);
    this.name = "StreamInterruptedError";
    this.offset = offset;
  }
}

const byCode: Record<string, new (init: WarrenErrorInit) => WarrenError> = {
  invalid_argument: InvalidArgumentError,
  unauthenticated: UnauthenticatedError,
  permission_denied: PermissionDeniedError,
  not_found: NotFoundError,
  conflict: ConflictError,
  too_large: TooLargeError,
  resource_exhausted: ResourceExhaustedError,
  unavailable: UnavailableError,
  internal: InternalError,
};

// The quota message of internal/session/tenants.go: "tenant T is over its Q quota: ...".
const quotaRe = /\bover its ([a-z_]+) quota\b/;

/** Builds the error of a class, choosing the subclass of a 429 by what it says. */
export function errorOf(init: WarrenErrorInit): WarrenError {
  if (init.code === "resource_exhausted") {
    if (init.retryAfter !== undefined) return new RateLimitedError(init);
    const q = quotaRe.exec(init.message);
    if (q?.[1]) return new QuotaExceededError(init, q[1]);
  }
  const C = byCode[init.code] ?? WarrenError;
  return new C(init);
}

/** The class the daemon would have used for a status, for bodies that are no envelope (a proxy's page). */
export function codeOfStatus(status: number): string {
  switch (status) {
    case 400: return "invalid_argument";
    case 401: return "unauthenticated";
    case 403: return "permission_denied";
    case 404: return "not_found";
    case 409: return "conflict";
    case 413: return "too_large";
    case 429: return "resource_exhausted";
    case 502: case 503: case 504: return "unavailable";
  }
  return status >= 500 ? "internal" : "unknown";
}

/** The status of a class, for errors that arrive without one (an error event of a stream, a shell message). */
export function statusOfCode(code: string): number {
  switch (code) {
    case "invalid_argument": return 400;
    case "unauthenticated": return 401;
    case "permission_denied": return 403;
    case "not_found": return 404;
    case "conflict": return 409;
    case "too_large": return 413;
    case "resource_exhausted": return 429;
    case "unavailable": return 503;
  }
  return 500;
}

/** Parses `Retry-After`: seconds, or an HTTP date. */
export function parseRetryAfter(v: string | null, now = Date.now()): number | undefined {
  if (!v) return undefined;
  const t = v.trim();
  if (/^\d+$/.test(t)) return Number(t);
  const d = Date.parse(t);
  if (Number.isNaN(d)) return undefined;
  return Math.max(0, Math.ceil((d - now) / 1000));
}
