"""Errors: one exception class per class of the daemon's error envelope."""

from __future__ import annotations

import email.utils
import json
import re
import time
from typing import Dict, Optional, Type

__all__ = [
    "WarrenError",
    "InvalidArgument",
    "Unauthenticated",
    "PermissionDenied",
    "NotFound",
    "Conflict",
    "TooLarge",
    "ResourceExhausted",
    "RateLimited",
    "QuotaExceeded",
    "Unavailable",
    "Internal",
    "StreamInterrupted",
]


class WarrenError(Exception):
    """An error the daemon answered (or a proxy in front of it).

    ``code`` is the envelope's class (``"not_found"``...), ``status`` the
    HTTP status, ``message`` the daemon's sentence and ``request_id`` the
    id the daemon logged the call under (``X-Request-ID``), to quote in a
    bug report.
    """

    code = "unknown"

    def __init__(self, message: str, *, code: Optional[str] = None, status: int = 0,
                 request_id: str = "") -> None:
        super().__init__(message)
        if code is not None:
            self.code = code
        self.message = message
        self.status = status
        self.request_id = request_id

    def __str__(self) -> str:
        return f"{self.code}: {self.message}" if self.message else self.code


class InvalidArgument(WarrenError):
    """400: the request was malformed or named something impossible."""
    code = "invalid_argument"


class Unauthenticated(WarrenError):
    """401: no credential, or one the daemon does not accept."""
    code = "unauthenticated"


class PermissionDenied(WarrenError):
    """403: the credential may not do this (an admin-only call, an unlisted origin)."""
    code = "permission_denied"


class NotFound(WarrenError):
    """404: the session, file, process, image, snapshot or workspace does not exist
    (or belongs to another tenant)."""
    code = "not_found"


class Conflict(WarrenError):
    """409: the call contradicts the current state (an id reused with other
    parameters, a workspace in use, a failed session)."""
    code = "conflict"


class TooLarge(WarrenError):
    """413: a body beyond the daemon's limit."""
    code = "too_large"


class ResourceExhausted(WarrenError):
    """429: a rate limit or a quota. See RateLimited and QuotaExceeded."""
    code = "resource_exhausted"


class RateLimited(ResourceExhausted):
    """429 with Retry-After: the credential made too many calls; retry after
    ``retry_after`` seconds."""

    def __init__(self, message: str, *, retry_after: float = 0.0, **kw) -> None:
        super().__init__(message, **kw)
        self.retry_after = retry_after


class QuotaExceeded(ResourceExhausted):
    """429 without Retry-After: a tenant quota (the message names it, such as
    ``max_sessions``) or a per-session limit; retrying will not help until
    something is freed."""

    @property
    def quota(self) -> str:
        """The quota's name when the message names one (``max_sessions``), else ""."""
        m = re.search(r"\bmax_[a-z_]+", self.message)
        return m.group(0) if m else ""


class Unavailable(WarrenError):
    """503 (or 502/504 from a proxy): the daemon or what it needs is not
    available now, such as a port with nothing listening."""
    code = "unavailable"


class Internal(WarrenError):
    """500: a bug in the daemon; quote ``request_id`` when reporting it."""
    code = "internal"


class StreamInterrupted(WarrenError):
    """A stream ended before its last event: the connection dropped. An
    exec's stream cannot be resumed (the daemon never runs a command
    twice); a process's output can, and ``processes.logs`` does so itself."""
    code = "stream_interrupted"


_BY_CODE: Dict[str, Type[WarrenError]] = {
    c.code: c for c in (InvalidArgument, Unauthenticated, PermissionDenied, NotFound, Conflict,
                        TooLarge, ResourceExhausted, Unavailable, Internal)
}

_BY_STATUS = {
    400: "invalid_argument", 401: "unauthenticated", 403: "permission_denied", 404: "not_found",
    409: "conflict", 413: "too_large", 429: "resource_exhausted", 502: "unavailable",
    503: "unavailable", 504: "unavailable",
}


def parse_retry_after(value: Optional[str], now: Optional[float] = None) -> float:
    """Seconds to wait from a Retry-After header: a number of seconds or an HTTP date."""
    if not value:
        return 0.0
    value = value.strip()
    try:
        return max(0.0, float(int(value)))
    except ValueError:
        pass
    try:
        t = email.utils.parsedate_to_datetime(value).timestamp()
    except (TypeError, ValueError, IndexError):
        return 0.0
    return max(0.0, t - (time.time() if now is None else now))


def _summarize(status: int, body: bytes) -> str:
    text = body.decode("utf-8", "replace")
    m = re.search(r"<title[^>]*>(.*?)</title>", text, re.I | re.S)
    if m:
        text = m.group(1)
    elif text.lstrip().startswith("<"):
        text = re.sub(r"<[^>]*>", " ", text)
    text = " ".join(text.split())
    if len(text) > 200:
        text = text[:200] + "…"
    head = f"HTTP {status}"
    return f"{head}: {text}" if text else head


def make_error(code: str, message: str, *, status: int = 0, retry_after: Optional[float] = None,
               request_id: str = "") -> WarrenError:
    """The exception of an envelope's code. resource_exhausted becomes
    RateLimited when the daemon said when to retry, else QuotaExceeded."""
    if code == "resource_exhausted":
        if retry_after is not None:
            return RateLimited(message, retry_after=retry_after, status=status or 429, request_id=request_id)
        return QuotaExceeded(message, status=status or 429, request_id=request_id)
    cls = _BY_CODE.get(code, WarrenError)
    return cls(message, code=code, status=status, request_id=request_id)


def error_from_response(status: int, headers, body: bytes) -> WarrenError:
    """The exception of a non-2xx answer: from its envelope, or from the
    status when a proxy answered something else."""
    ra_header = headers.get("Retry-After") if headers is not None else None
    retry_after = parse_retry_after(ra_header) if ra_header else None
    rid = (headers.get("X-Request-ID") or "") if headers is not None else ""
    try:
        env = json.loads(body)
        err = env["error"]
        code, message = err["code"], err.get("message", "")
        if isinstance(code, str) and code:
            return make_error(code, message, status=status, retry_after=retry_after, request_id=rid)
    except (ValueError, KeyError, TypeError):
        pass
    code = _BY_STATUS.get(status, "internal" if status >= 500 else "unknown")
    return make_error(code, _summarize(status, body), status=status, retry_after=retry_after, request_id=rid)


_STATUS_OF = {v: k for k, v in _BY_STATUS.items() if k != 502 and k != 504}


def error_from_event(data: str) -> WarrenError:
    """The exception of an "error" event of a stream that had begun with 200."""
    try:
        err = json.loads(data)["error"]
        return make_error(err["code"], err.get("message", ""), status=_STATUS_OF.get(err["code"], 500))
    except (ValueError, KeyError, TypeError):
        return Internal("the daemon reported an error that is not an envelope: " + data[:200], status=500)
