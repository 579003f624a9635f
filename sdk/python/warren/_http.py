"""The synchronous transport: http.client connections kept alive in a
small pool, so that a call costs one round trip and a streamed answer
(which holds its connection until it ends) never blocks other calls."""

from __future__ import annotations

import http.client
import io
import json
import os
import select
import socket
import ssl
import stat
import threading
import time
from typing import Any, Callable, List, Optional, Tuple
from urllib.parse import urlsplit

from ._errors import Unavailable, error_from_response
from ._proto import Req

MAX_ERROR_BODY = 64 << 10
BLOCK = 64 << 10
USER_AGENT = "warren-python/0.1"

# Errors of a connection that the daemon (or the network) closed.
CONN_ERRORS = (ConnectionError, http.client.HTTPException, socket.timeout, OSError)


class ConnectionFailed(Unavailable):
    """The daemon could not be reached, or the connection broke midway
    (refused, reset); an Unavailable that never reached the daemon's
    answer."""


def _dropped(conn: http.client.HTTPConnection) -> bool:
    """Whether an idle kept-alive connection was closed by the daemon: its
    socket is readable (EOF, or junk) when no answer is due."""
    s = conn.sock
    if s is None:
        return True
    try:
        r, _, _ = select.select([s], [], [], 0)
    except (OSError, ValueError):
        return True
    return bool(r)


class Endpoint:
    """Where the daemon is and how to authenticate to it."""

    def __init__(self, url: str, key: str, timeout: Optional[float], user_agent: str = USER_AGENT) -> None:
        u = urlsplit(url.rstrip("/"))
        if u.scheme not in ("http", "https"):
            raise ValueError(f"warren URL {url!r}: the scheme must be http or https")
        self.url = url.rstrip("/")
        self.scheme = u.scheme
        self.host = u.hostname or "127.0.0.1"
        self.port = u.port or (443 if u.scheme == "https" else 80)
        self.netloc = u.netloc
        self.prefix = u.path.rstrip("/")
        self.key = key
        self.timeout = timeout
        self.base_headers = {"User-Agent": user_agent}
        if key:
            self.base_headers["Authorization"] = "Bearer " + key

    def headers(self, req: Req) -> dict:
        h = dict(self.base_headers)
        if req.accept:
            h["Accept"] = req.accept
        if req.body is not None and req.content_type:
            h["Content-Type"] = req.content_type
        return h


class Response:
    """An answer being read; it holds its connection until closed, then
    returns it to the pool if the answer was read to its end."""

    def __init__(self, pool: "Pool", conn: http.client.HTTPConnection, resp: http.client.HTTPResponse) -> None:
        self._pool, self._conn, self.raw = pool, conn, resp
        self.status = resp.status
        self.headers = resp.headers
        self._done = False

    def read(self, n: int = -1) -> bytes:
        return self.raw.read() if n < 0 else self.raw.read(n)

    def readline(self) -> bytes:
        return self.raw.readline()

    def close(self) -> None:
        if self._done:
            return
        self._done = True
        reusable = self.raw.isclosed() and not self.raw.will_close
        if reusable:
            self._pool.put(self._conn)
        else:
            self.raw.close()
            self._conn.close()

    def abort(self) -> None:
        """Closes the connection at once, whatever is left unread (this is
        how a stream is cancelled)."""
        if self._done:
            return
        self._done = True
        try:
            if self._conn.sock is not None:
                self._conn.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.raw.close()
        self._conn.close()


class Pool:
    """Idle keep-alive connections to one daemon."""

    def __init__(self, ep: Endpoint, ssl_context: Optional[ssl.SSLContext] = None, size: int = 8) -> None:
        self.ep = ep
        self._ssl = ssl_context
        self._size = size
        self._idle: List[Tuple[http.client.HTTPConnection, float]] = []
        self._lock = threading.Lock()
        self._closed = False

    def _new(self) -> http.client.HTTPConnection:
        if self.ep.scheme == "https":
            return http.client.HTTPSConnection(self.ep.host, self.ep.port, timeout=self.ep.timeout,
                                               context=self._ssl, blocksize=BLOCK)
        return http.client.HTTPConnection(self.ep.host, self.ep.port, timeout=self.ep.timeout, blocksize=BLOCK)

    def get(self) -> Tuple[http.client.HTTPConnection, bool]:
        """A connection, and whether it was used before."""
        with self._lock:
            while self._idle:
                c, since = self._idle.pop()
                # The daemon closes a connection after 2 minutes idle; one
                # idle for less than a second needs no check (a syscall),
                # and open's retry covers a close in that window.
                if time.monotonic() - since < 1.0 or not _dropped(c):
                    return c, True
                c.close()
        return self._new(), False

    def put(self, c: http.client.HTTPConnection) -> None:
        with self._lock:
            if not self._closed and len(self._idle) < self._size:
                self._idle.append((c, time.monotonic()))
                return
        c.close()

    def close(self) -> None:
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
        for c, _ in idle:
            c.close()

    def open(self, req: Req, timeout: Optional[float] = None) -> Response:
        """Sends req and returns its answer when the status is 2xx; any
        other status raises the error of its class."""
        target = req.target(self.ep.prefix)
        headers = self.ep.headers(req)
        body = req.body
        if body is not None and not isinstance(body, (bytes, bytearray)):
            try:  # a regular file has a length: no chunking
                st = os.fstat(body.fileno())
                if stat.S_ISREG(st.st_mode):
                    headers["Content-Length"] = str(st.st_size - body.tell())
            except (AttributeError, OSError, ValueError, io.UnsupportedOperation):
                pass
        for attempt in (0, 1):
            conn, reused = self.get()
            if timeout is not None:
                conn.timeout = timeout
                if conn.sock is not None:
                    conn.sock.settimeout(timeout)
            try:
                conn.request(req.method, target, body=body, headers=headers)
                resp = conn.getresponse()
            except (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError) as e:
                conn.close()
                # A kept-alive connection the daemon closed just as we sent:
                # nothing ran. Retry once where the body can be sent again.
                if reused and attempt == 0 and (body is None or isinstance(body, (bytes, bytearray))):
                    continue
                raise ConnectionFailed(f"{req.method} {req.path}: {e}") from e
            except socket.timeout as e:
                conn.close()
                raise TimeoutError(f"{req.method} {req.path}: timed out") from e
            except OSError as e:
                conn.close()
                raise ConnectionFailed(f"{req.method} {req.path}: {e}") from e
            if timeout is not None and self.ep.timeout != timeout:
                conn.timeout = self.ep.timeout
            r = Response(self, conn, resp)
            if 200 <= resp.status < 300:
                return r
            try:
                data = resp.read(MAX_ERROR_BODY)
            except CONN_ERRORS:
                data = b""
            r.abort() if not resp.isclosed() else r.close()
            raise error_from_response(resp.status, resp.headers, data)
        raise AssertionError("unreachable")

    def call(self, req: Req, parse: Optional[Callable[[Any], Any]] = None, timeout: Optional[float] = None) -> Any:
        """Sends req and decodes its JSON answer with parse (None: no body)."""
        r = self.open(req, timeout)
        try:
            data = r.read()
        except socket.timeout as e:
            r.abort()
            raise TimeoutError(f"{req.method} {req.path}: timed out reading the answer") from e
        except CONN_ERRORS as e:
            r.abort()
            raise ConnectionFailed(f"{req.method} {req.path}: reading the answer: {e}") from e
        r.close()
        if parse is None:
            return None
        return parse(json.loads(data.decode("utf-8")))
