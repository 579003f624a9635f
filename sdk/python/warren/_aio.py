"""The asyncio client: AsyncWarren, with the same nouns and verbs as Warren.

Its HTTP/1.1 transport is written on asyncio streams (the standard library
has no asyncio HTTP client): keep-alive connections in a pool, bodies by
Content-Length or chunked. A cancelled call closes its connection, so that
no half-read answer is ever reused."""

from __future__ import annotations

import asyncio
import datetime as _dt
import io
import json
import os
import ssl
import stat as _stat
from typing import IO, Any, AsyncIterator, Callable, Dict, List, Optional, Tuple, Union
from urllib.parse import urlencode

from . import _proto as P
from ._client import MAX_RECONNECTS, Command, Data, _env_key, _env_url, _Prefixed, create_body, new_id
from ._errors import StreamInterrupted, WarrenError, error_from_event, error_from_response
from ._http import BLOCK, MAX_ERROR_BODY, ConnectionFailed, Endpoint
from ._tar import pack_dir, safe_extract
from ._types import (ExecChunk, ExecResult, FileEntry, FileWritten, Image, ImagePruneResult, Limits,
                     NetworkDenial, NetworkPolicy, Port, Process, ProcessEvent, PullProgress, SessionInfo,
                     Snapshot, Stats, Workspace)

__all__ = ["AsyncWarren", "AsyncSession", "AsyncExecStream", "AsyncShell"]

_Conn = Tuple[asyncio.StreamReader, asyncio.StreamWriter]


class AsyncResponse:
    """An answer being read; it holds its connection until closed."""

    def __init__(self, pool: "AsyncPool", conn: _Conn, status: int, headers: P.Headers, method: str) -> None:
        self._pool, self._conn = pool, conn
        self.status, self.headers = status, headers
        self._buf = b""
        self._done = False
        te = headers.get("transfer-encoding", "").lower()
        self._chunked = "chunked" in te
        self._left: Optional[int] = None  # bytes left of a Content-Length body (None: until close)
        self._eof = False
        self._keep = headers.get("connection", "").lower() != "close"
        if method == "HEAD" or status in (204, 304) or 100 <= status < 200:
            self._left, self._eof = 0, True
        elif not self._chunked and headers.get("content-length") is not None:
            self._left = int(headers.get("content-length"))
            self._eof = self._left == 0
        elif not self._chunked:
            self._keep = False  # the body ends with the connection
        self._chunk_left = 0

    async def _more(self) -> bytes:
        """The next piece of the body, b"" at its end."""
        if self._eof:
            return b""
        r = self._conn[0]
        if self._chunked:
            if self._chunk_left == 0:
                line = await r.readline()
                if not line.endswith(b"\n"):
                    raise ConnectionError("the answer's chunked body was cut off")
                size = int(line.split(b";")[0].strip(), 16)
                if size == 0:
                    while (await r.readline()) not in (b"\r\n", b"\n", b""):
                        pass  # trailers
                    self._eof = True
                    return b""
                self._chunk_left = size
            b = await r.read(min(self._chunk_left, BLOCK))
            if not b:
                raise ConnectionError("the answer's chunked body was cut off")
            self._chunk_left -= len(b)
            if self._chunk_left == 0:
                await r.readexactly(2)
            return b
        if self._left is None:
            b = await r.read(BLOCK)
            if not b:
                self._eof = True
            return b
        b = await r.read(min(self._left, BLOCK))
        if not b:
            raise ConnectionError("the answer's body was cut off")
        self._left -= len(b)
        self._eof = self._left == 0
        return b

    async def read(self, n: int = -1) -> bytes:
        """Up to n bytes of the body (all of it with n < 0); b"" at its end."""
        if n < 0:
            parts = [self._buf]
            self._buf = b""
            while True:
                b = await self._more()
                if not b:
                    return b"".join(parts)
                parts.append(b)
        if not self._buf:
            self._buf = await self._more()
        out, self._buf = self._buf[:n], self._buf[n:]
        return out

    async def readline(self) -> bytes:
        while b"\n" not in self._buf:
            b = await self._more()
            if not b:
                out, self._buf = self._buf, b""
                return out
            self._buf += b
        i = self._buf.index(b"\n") + 1
        out, self._buf = self._buf[:i], self._buf[i:]
        return out

    def close(self) -> None:
        """Returns the connection to the pool if the body was read to its
        end, else closes it."""
        if self._done:
            return
        self._done = True
        if self._eof and not self._buf and self._keep:
            self._pool.put(self._conn)
        else:
            self._conn[1].close()

    def abort(self) -> None:
        if not self._done:
            self._done = True
            self._conn[1].close()


class AsyncPool:
    def __init__(self, ep: Endpoint, ssl_context: Optional[ssl.SSLContext], size: int = 8) -> None:
        self.ep, self._ssl, self._size = ep, ssl_context, size
        self._idle: List[_Conn] = []

    async def _connect(self) -> _Conn:
        ctx = None
        if self.ep.scheme == "https":
            ctx = self._ssl or ssl.create_default_context()
        try:
            return await asyncio.wait_for(asyncio.open_connection(self.ep.host, self.ep.port, ssl=ctx,
                                                                  limit=P.MAX_WS_MESSAGE), self.ep.timeout)
        except (OSError, asyncio.TimeoutError) as e:
            raise ConnectionFailed(f"connect to {self.ep.url}: {e!r}") from e

    def get_idle(self) -> Optional[_Conn]:
        while self._idle:
            c = self._idle.pop()
            if not c[0].at_eof() and not c[1].is_closing():
                return c
            c[1].close()
        return None

    def put(self, c: _Conn) -> None:
        if len(self._idle) < self._size and not c[0].at_eof():
            self._idle.append(c)
        else:
            c[1].close()

    def close(self) -> None:
        idle, self._idle = self._idle, []
        for c in idle:
            c[1].close()

    async def _send(self, conn: _Conn, req: P.Req, headers: Dict[str, str]) -> None:
        w = conn[1]
        target = req.target(self.ep.prefix)
        body = req.body
        head = [f"{req.method} {target} HTTP/1.1", f"Host: {self.ep.netloc}"]
        chunked = False
        if body is None:
            if req.method in ("POST", "PUT", "PATCH"):
                head.append("Content-Length: 0")
        elif isinstance(body, (bytes, bytearray)):
            head.append(f"Content-Length: {len(body)}")
        else:
            length = None
            try:
                st = os.fstat(body.fileno())
                if _stat.S_ISREG(st.st_mode):
                    length = st.st_size - body.tell()
            except (AttributeError, OSError, ValueError, io.UnsupportedOperation):
                pass
            if length is None:
                chunked = True
                head.append("Transfer-Encoding: chunked")
            else:
                head.append(f"Content-Length: {length}")
        head += [f"{k}: {v}" for k, v in headers.items()]
        w.write(("\r\n".join(head) + "\r\n\r\n").encode("iso-8859-1"))
        if isinstance(body, (bytes, bytearray)):
            w.write(body)
        elif body is not None:
            while True:
                b = body.read(BLOCK)
                if not b:
                    break
                w.write(b"%x\r\n%s\r\n" % (len(b), b) if chunked else b)
                await w.drain()
            if chunked:
                w.write(b"0\r\n\r\n")
        await w.drain()

    async def open(self, req: P.Req) -> AsyncResponse:
        headers = self.ep.headers(req)
        for attempt in (0, 1):
            conn = self.get_idle()
            reused = conn is not None
            if conn is None:
                conn = await self._connect()
            try:
                await self._send(conn, req, headers)
                head = await conn[0].readuntil(b"\r\n\r\n")
                status, h = P.parse_head(head[:-4])
            except (asyncio.IncompleteReadError, ConnectionError) as e:
                conn[1].close()
                # A kept-alive connection the daemon closed as we sent:
                # nothing ran; retry once where the body can be sent again.
                if reused and attempt == 0 and (req.body is None or isinstance(req.body, (bytes, bytearray))):
                    continue
                raise ConnectionFailed(f"{req.method} {req.path}: {e!r}") from e
            except BaseException:
                conn[1].close()  # cancelled or failed midway: never reuse it
                raise
            r = AsyncResponse(self, conn, status, P.Headers(h), req.method)
            if 200 <= status < 300:
                return r
            try:
                data = await r.read()
            except BaseException:
                r.abort()
                raise
            r.close()
            raise error_from_response(status, r.headers, data[:MAX_ERROR_BODY])
        raise AssertionError("unreachable")

    async def call(self, req: P.Req, parse: Optional[Callable[[Any], Any]] = None) -> Any:
        r = await self.open(req)
        try:
            data = await r.read()
        except (ConnectionError, asyncio.IncompleteReadError) as e:
            r.abort()
            raise ConnectionFailed(f"{req.method} {req.path}: reading the answer: {e!r}") from e
        except BaseException:
            r.abort()
            raise
        r.close()
        return None if parse is None else parse(json.loads(data.decode("utf-8")))


class AsyncWarren:
    """The asyncio client of one warren daemon; see Warren. Use it in one
    event loop. ``async with AsyncWarren() as w:`` closes its connections.
    ``timeout`` bounds connecting; bound a call with asyncio.wait_for (or
    asyncio.timeout): cancelling a task cancels its call, and closes its
    connection. Leave a stream early with ``async with`` around it (or
    close()): an abandoned async iterator is only finalized later."""

    def __init__(self, url: Optional[str] = None, key: Optional[str] = None, *, timeout: Optional[float] = None,
                 ssl_context: Optional[ssl.SSLContext] = None) -> None:
        self._ep = Endpoint(url or _env_url(), key if key is not None else _env_key(), timeout)
        self._ssl = ssl_context
        self._pool = AsyncPool(self._ep, ssl_context)
        self.sessions = AsyncSessions(self)
        self.snapshots = AsyncSnapshots(self)
        self.workspaces = AsyncWorkspaces(self)
        self.images = AsyncImages(self)

    @property
    def url(self) -> str:
        return self._ep.url

    async def close(self) -> None:
        self._pool.close()

    async def __aenter__(self) -> "AsyncWarren":
        return self

    async def __aexit__(self, *exc) -> None:
        await self.close()

    async def _call(self, req: P.Req, parse: Optional[Callable[[Any], Any]] = None) -> Any:
        return await self._pool.call(req, parse)

    async def _open(self, req: P.Req) -> AsyncResponse:
        return await self._pool.open(req)

    async def run(self, command: Command = None, *, argv: Optional[List[str]] = None, image: Optional[str] = None,
                  limits: Union[Limits, Dict[str, Any], None] = None, stdin: Union[str, bytes, None] = None,
                  env: Optional[Dict[str, str]] = None, cwd: Optional[str] = None,
                  timeout_ms: Optional[int] = None) -> ExecResult:
        b = P.exec_body(command, argv, stdin, env, cwd, timeout_ms, None)
        if isinstance(limits, Limits):
            limits = limits.to_dict()
        b.update(P.drop_none({"image": image, "limits": limits}))
        return await self._call(P.json_req("POST", "/v1/run", b), ExecResult.from_dict)

    async def stats(self) -> Stats:
        return await self._call(P.json_req("GET", "/v1/stats"), Stats.from_dict)

    async def health(self) -> None:
        await self._call(P.json_req("GET", "/healthz"))

    async def create_token(self, ttl_seconds: int = 0) -> str:
        return await self._call(P.json_req("POST", "/v1/tokens", P.drop_none({"ttl_seconds": ttl_seconds or None})),
                                lambda d: d["token"])


class AsyncSessions:
    def __init__(self, w: AsyncWarren) -> None:
        self._w = w

    async def create(self, *, image: Optional[str] = None, env: Optional[Dict[str, str]] = None,
                     cwd: Optional[str] = None, limits: Union[Limits, Dict[str, Any], None] = None,
                     network: Union[str, NetworkPolicy, Dict[str, Any], None] = None,
                     ttl_seconds: Optional[int] = None, max_lifetime_seconds: Optional[int] = None,
                     labels: Optional[Dict[str, str]] = None, id: Optional[str] = None, user: Optional[str] = None,
                     workspace: Optional[str] = None, workspace_mode: Optional[str] = None,
                     snapshot: Optional[str] = None) -> "AsyncSession":
        """Creates a session; ``async with await w.sessions.create() as s``
        deletes it at the end of the block."""
        chosen = id is None
        body = create_body(image, env, cwd, limits, network, ttl_seconds, max_lifetime_seconds, labels,
                           id or new_id(), user, workspace, workspace_mode, snapshot)
        try:
            info = await self._w._call(P.json_req("POST", "/v1/sessions", body), SessionInfo.from_dict)
        except asyncio.CancelledError:
            if chosen:  # the daemon may have created it: delete what nobody will own
                await asyncio.shield(self._forget(body))
            raise
        return AsyncSession(self._w, info, owned=True)

    async def _forget(self, body: Dict[str, Any]) -> None:
        """See Sessions._forget: create the same id again, then delete it."""
        try:
            await self._w._call(P.json_req("POST", "/v1/sessions", body))
            await self.delete(body["id"])
        except Exception:
            pass

    async def get(self, id: str) -> "AsyncSession":
        return AsyncSession(self._w, await self._w._call(P.json_req("GET", P.session_path(id)), SessionInfo.from_dict))

    async def list(self, *, all_tenants: bool = False) -> List["AsyncSession"]:
        q = {"all": "true"} if all_tenants else None
        infos = await self._w._call(P.json_req("GET", "/v1/sessions", query=q),
                                    lambda d: [SessionInfo.from_dict(s) for s in d.get("sessions") or []])
        return [AsyncSession(self._w, i) for i in infos]

    async def delete(self, id: str) -> None:
        await self._w._call(P.json_req("DELETE", P.session_path(id)))


class AsyncSession:
    """A handle on one session; see Session."""

    def __init__(self, w: AsyncWarren, info: SessionInfo, owned: bool = False) -> None:
        self._w, self.info, self.id, self._owned = w, info, info.id, owned
        self.files = AsyncFiles(w, self.id)
        self.processes = AsyncProcesses(w, self.id)
        self.network = AsyncNetwork(w, self.id)
        self.ports = AsyncPorts(w, self.id)

    def __repr__(self) -> str:
        return f"AsyncSession(id={self.id!r}, state={self.info.state!r})"

    async def __aenter__(self) -> "AsyncSession":
        return self

    async def __aexit__(self, *exc) -> None:
        if self._owned:
            try:
                # Shielded: a block left by cancellation still deletes.
                await asyncio.shield(self.delete())
            except WarrenError as e:
                if e.code != "not_found":
                    raise

    async def delete(self) -> None:
        await self._w.sessions.delete(self.id)

    async def refresh(self) -> SessionInfo:
        self.info = await self._w._call(P.json_req("GET", P.session_path(self.id)), SessionInfo.from_dict)
        return self.info

    async def renew(self) -> SessionInfo:
        await self.files.stat("/")
        return await self.refresh()

    async def ttl(self) -> float:
        exp = (await self.refresh()).expires_at
        if exp is None:
            return float("inf")
        return max(0.0, (exp - _dt.datetime.now(_dt.timezone.utc)).total_seconds())

    async def exec(self, command: Command = None, *, argv: Optional[List[str]] = None,
                   stdin: Union[str, bytes, None] = None, env: Optional[Dict[str, str]] = None,
                   cwd: Optional[str] = None, timeout_ms: Optional[int] = None,
                   max_output_bytes: Optional[int] = None) -> ExecResult:
        b = P.exec_body(command, argv, stdin, env, cwd, timeout_ms, max_output_bytes)
        return await self._w._call(P.json_req("POST", P.session_path(self.id, "/exec"), b), ExecResult.from_dict)

    def exec_stream(self, command: Command = None, *, argv: Optional[List[str]] = None,
                    stdin: Union[str, bytes, None] = None, env: Optional[Dict[str, str]] = None,
                    cwd: Optional[str] = None, timeout_ms: Optional[int] = None) -> "AsyncExecStream":
        """``async for chunk in s.exec_stream(...)``, then ``.result``."""
        b = P.exec_body(command, argv, stdin, env, cwd, timeout_ms, None)
        return AsyncExecStream(self._w, P.json_req("POST", P.session_path(self.id, "/exec"), b, accept=P.EVENTS))

    async def snapshot(self, name: str) -> Snapshot:
        return await self._w._call(P.json_req("POST", P.session_path(self.id, "/snapshot"), {"name": name}),
                                   Snapshot.from_dict)

    async def fork(self, count: Optional[int] = None, *, ids: Optional[List[str]] = None,
                   snapshot: Optional[str] = None) -> List["AsyncSession"]:
        body = P.drop_none({"count": count, "ids": ids, "snapshot": snapshot})
        res = await self._w._call(P.json_req("POST", P.session_path(self.id, "/fork"), body),
                                  lambda d: [SessionInfo.from_dict(s) for s in d.get("sessions") or []])
        return [AsyncSession(self._w, i, owned=True) for i in res]

    async def shell(self, *, cols: int = 0, rows: int = 0, process: str = "",
                    kill_on_close: bool = False) -> "AsyncShell":
        sh = AsyncShell(self._w, self.id, P.shell_query(cols, rows, process, kill_on_close))
        await sh._open()
        return sh


class AsyncExecStream:
    """An async iterator of ExecChunk; then ``result``."""

    def __init__(self, w: AsyncWarren, req: P.Req) -> None:
        self._w, self._req = w, req
        self._resp: Optional[AsyncResponse] = None
        self.result: Optional[ExecResult] = None

    async def __aenter__(self) -> "AsyncExecStream":
        return self

    async def __aexit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        if self._resp is not None:
            self._resp.abort() if self.result is None else self._resp.close()

    def __aiter__(self) -> AsyncIterator[ExecChunk]:
        return self._gen()

    async def _gen(self) -> AsyncIterator[ExecChunk]:
        self._resp = r = await self._w._open(self._req)
        try:
            if (r.headers.get("content-type") or "").startswith(P.JSON):
                res = ExecResult.from_dict(json.loads(await r.read()))
                for name, b in (("stdout", res.stdout_bytes), ("stderr", res.stderr_bytes)):
                    if b:
                        yield ExecChunk(name, b)
                res.stdout = res.stderr = res.stdout_base64 = res.stderr_base64 = ""
                self.result = res
                return
            sse, ex = P.SSEParser(), P.ExecEvents()
            while True:
                try:
                    line = await r.readline()
                except (ConnectionError, asyncio.IncompleteReadError, ValueError) as e:
                    raise StreamInterrupted(f"the exec stream was cut off: {e!r}") from e
                if not line:
                    raise StreamInterrupted("the exec stream ended before its exit event")
                ev = sse.feed(line)
                if ev is None:
                    continue
                out = ex.handle(ev)
                if out is not None:
                    yield ExecChunk(*out)
                if ex.result is not None:
                    self.result = ExecResult.from_dict(ex.result)
                    return
        finally:
            self.close()

    async def wait(self) -> ExecResult:
        async for _ in self:
            pass
        assert self.result is not None
        return self.result


class AsyncReader:
    """An answer's body, read as it arrives."""

    def __init__(self, r: AsyncResponse) -> None:
        self._r = r

    async def read(self, n: int = -1) -> bytes:
        try:
            return await self._r.read(n)
        except (ConnectionError, asyncio.IncompleteReadError) as e:
            self._r.abort()
            raise StreamInterrupted(f"the download was cut off: {e!r}") from e

    def close(self) -> None:
        self._r.close()

    async def __aenter__(self) -> "AsyncReader":
        return self

    async def __aexit__(self, *exc) -> None:
        self.close()


class AsyncFiles:
    def __init__(self, w: AsyncWarren, sid: str) -> None:
        self._w, self._sid = w, sid

    def _path(self, suffix: str = "") -> str:
        return P.session_path(self._sid, "/files" + suffix)

    async def open(self, path: str) -> AsyncReader:
        return AsyncReader(await self._w._open(P.Req("GET", self._path(), {"path": path}, accept=P.OCTETS)))

    async def read(self, path: str) -> bytes:
        async with await self.open(path) as f:
            return await f.read()

    async def read_text(self, path: str, encoding: str = "utf-8") -> str:
        return (await self.read(path)).decode(encoding)

    async def download(self, path: str, local_path: str) -> int:
        n = 0
        async with await self.open(path) as src:
            with open(local_path, "wb") as dst:
                while True:
                    b = await src.read(BLOCK)
                    if not b:
                        return n
                    dst.write(b)
                    n += len(b)

    async def write(self, path: str, data: Data, *, mode: Optional[int] = None) -> FileWritten:
        if isinstance(data, str):
            data = data.encode("utf-8")
        elif isinstance(data, bytearray):
            data = bytes(data)
        q = {"path": path}
        if mode is not None:
            q["mode"] = format(mode, "04o")
        return await self._w._call(P.Req("PUT", self._path(), q, data, P.OCTETS), FileWritten.from_dict)

    async def upload(self, local_path: str, path: str, *, mode: Optional[int] = None) -> FileWritten:
        with open(local_path, "rb") as f:
            return await self.write(path, f, mode=mode)

    async def list(self, path: str = ".") -> List[FileEntry]:
        return await self._w._call(P.json_req("GET", self._path("/list"), query={"path": path}),
                                   lambda d: [FileEntry.from_dict(e) for e in d.get("entries") or []])

    async def stat(self, path: str) -> FileEntry:
        return await self._w._call(P.json_req("GET", self._path("/stat"), query={"path": path}), FileEntry.from_dict)

    async def exists(self, path: str) -> bool:
        try:
            await self.stat(path)
            return True
        except WarrenError as e:
            if e.code == "not_found":
                return False
            raise

    async def remove(self, path: str, *, recursive: bool = False) -> None:
        q = {"path": path}
        if recursive:
            q["recursive"] = "true"
        await self._w._call(P.json_req("DELETE", self._path(), query=q))

    async def mkdir(self, path: str) -> FileEntry:
        return await self._w._call(P.json_req("POST", self._path("/mkdir"), query={"path": path}),
                                   FileEntry.from_dict)

    async def upload_dir(self, local_dir: str, path: str) -> FileWritten:
        with pack_dir(local_dir) as tar:
            return await self.upload_tar(path, tar)

    async def upload_tar(self, path: str, tar: IO[bytes]) -> FileWritten:
        return await self._w._call(P.Req("PUT", P.session_path(self._sid, "/archive"), {"path": path}, tar, P.TAR),
                                   FileWritten.from_dict)

    async def download_dir(self, path: str, local_dir: str) -> int:
        """Copies the directory path into local_dir; the tar is spooled to a
        temporary file first (tarfile reads synchronously)."""
        import tempfile
        with tempfile.SpooledTemporaryFile(max_size=8 << 20) as tmp:
            async with AsyncReader(await self._w._open(P.Req("GET", P.session_path(self._sid, "/archive"),
                                                             {"path": path}, accept=P.TAR))) as src:
                while True:
                    b = await src.read(BLOCK)
                    if not b:
                        break
                    tmp.write(b)
            tmp.seek(0)
            return safe_extract(tmp, local_dir)


class AsyncProcesses:
    def __init__(self, w: AsyncWarren, sid: str) -> None:
        self._w, self._sid = w, sid

    async def start(self, command: Command = None, *, argv: Optional[List[str]] = None,
                    env: Optional[Dict[str, str]] = None, cwd: Optional[str] = None, tty: bool = False,
                    cols: Optional[int] = None, rows: Optional[int] = None, stdin: bool = False) -> Process:
        if isinstance(command, (list, tuple)):
            command, argv = None, list(command)
        body = P.drop_none({"command": command, "argv": argv, "env": env, "cwd": cwd, "tty": tty or None,
                            "cols": cols, "rows": rows, "stdin": stdin or None})
        return await self._w._call(P.json_req("POST", P.session_path(self._sid, "/processes"), body),
                                   Process.from_dict)

    async def list(self) -> List[Process]:
        return await self._w._call(P.json_req("GET", P.session_path(self._sid, "/processes")),
                                   lambda d: [Process.from_dict(p) for p in d.get("processes") or []])

    async def get(self, pid: str) -> Process:
        return await self._w._call(P.json_req("GET", P.process_path(self._sid, pid)), Process.from_dict)

    async def signal(self, pid: str, signal: Union[str, int] = "TERM") -> None:
        await self._w._call(P.json_req("POST", P.process_path(self._sid, pid, "/signal"), {"signal": str(signal)}))

    async def kill(self, pid: str) -> None:
        await self._w._call(P.json_req("DELETE", P.process_path(self._sid, pid)))

    async def resize(self, pid: str, cols: int, rows: int) -> None:
        await self._w._call(P.json_req("POST", P.process_path(self._sid, pid, "/resize"),
                                       {"cols": cols, "rows": rows}))

    async def write_stdin(self, pid: str, data: Data, *, eof: bool = False) -> int:
        if isinstance(data, str):
            data = data.encode("utf-8")
        q = {"eof": "true"} if eof else None
        return await self._w._call(P.Req("POST", P.process_path(self._sid, pid, "/stdin"), q, data, P.OCTETS),
                                   lambda d: d["written"])

    async def logs(self, pid: str, *, follow: bool = False, offset: int = 0) -> AsyncIterator[ProcessEvent]:
        """See Processes.logs: resumes by itself after a dropped connection."""
        state = P.OutputEvents(offset)
        failures = 0
        while True:
            q = {"offset": str(state.pos), "follow": "true" if follow else "false"}
            req = P.Req("GET", P.process_path(self._sid, pid, "/output"), q, accept=P.EVENTS)
            try:
                r = await self._w._open(req)
            except ConnectionFailed as e:
                failures += 1
                if not follow or failures > MAX_RECONNECTS:
                    raise StreamInterrupted(f"process output: {e}") from e
                await asyncio.sleep(P.retry_backoff(failures - 1))
                continue
            if r.status == 204:
                r.close()
                return
            sse = P.SSEParser()
            try:
                while True:
                    try:
                        line = await r.readline()
                    except (ConnectionError, asyncio.IncompleteReadError, ValueError):
                        line = b""
                    if not line:
                        break
                    ev = sse.feed(line)
                    if ev is None:
                        continue
                    d = state.handle(ev)
                    if d is None:
                        continue
                    failures = 0
                    yield ProcessEvent(**d)
                    if state.exited:
                        return
            finally:
                r.close() if r._eof else r.abort()
            if not follow:
                return
            failures += 1
            if failures > MAX_RECONNECTS:
                raise StreamInterrupted("process output: the stream kept ending before the exit event")
            await asyncio.sleep(P.retry_backoff(failures - 1))

    async def wait(self, pid: str) -> ProcessEvent:
        last = None
        async for ev in self.logs(pid, follow=True):
            last = ev
        if last is None or last.kind != "exit":
            p = await self.get(pid)
            return ProcessEvent("exit", p.output_bytes, p.output_bytes, exit_code=p.exit_code, signal=p.signal)
        return last


class AsyncNetwork:
    def __init__(self, w: AsyncWarren, sid: str) -> None:
        self._w, self._sid = w, sid

    async def get(self) -> NetworkPolicy:
        return await self._w._call(P.json_req("GET", P.session_path(self._sid, "/network")), NetworkPolicy.from_dict)

    async def set(self, mode: Optional[str] = None, *, allow: Optional[List[str]] = None,
                  deny: Optional[List[str]] = None) -> NetworkPolicy:
        body = NetworkPolicy(mode or "", list(allow or []), list(deny or [])).to_dict()
        return await self._w._call(P.json_req("PATCH", P.session_path(self._sid, "/network"), body),
                                   NetworkPolicy.from_dict)

    async def allow(self, *rules: str) -> NetworkPolicy:
        cur = await self.get()
        return await self.set(cur.mode, allow=cur.allow + [r for r in rules if r not in cur.allow], deny=cur.deny)

    async def deny(self, *rules: str) -> NetworkPolicy:
        cur = await self.get()
        return await self.set(cur.mode, allow=cur.allow, deny=cur.deny + [r for r in rules if r not in cur.deny])

    async def denials(self) -> List[NetworkDenial]:
        return await self._w._call(P.json_req("GET", P.session_path(self._sid, "/network/denials")),
                                   lambda d: [NetworkDenial.from_dict(x) for x in d.get("denials") or []])


class AsyncPorts:
    def __init__(self, w: AsyncWarren, sid: str) -> None:
        self._w, self._sid = w, sid

    async def list(self) -> List[Port]:
        return await self._w._call(P.json_req("GET", P.session_path(self._sid, "/ports")),
                                   lambda d: [Port.from_dict(p) for p in d.get("ports") or []])

    async def url(self, port: int, *, token: bool = False, token_ttl_seconds: int = 0) -> str:
        u = self._w.url + P.session_path(self._sid, f"/ports/{int(port)}/")
        if token:
            u += "?" + urlencode({"token": await self._w.create_token(token_ttl_seconds)})
        return u

    async def set_public(self, port: int, public: bool = True) -> Port:
        return await self._w._call(P.json_req("PUT", P.session_path(self._sid, f"/ports/{int(port)}"),
                                              {"public": public}), Port.from_dict)


class AsyncSnapshots:
    def __init__(self, w: AsyncWarren) -> None:
        self._w = w

    async def list(self) -> List[Snapshot]:
        return await self._w._call(P.json_req("GET", "/v1/snapshots"),
                                   lambda d: [Snapshot.from_dict(s) for s in d.get("snapshots") or []])

    async def get(self, name: str) -> Snapshot:
        return await self._w._call(P.json_req("GET", "/v1/snapshots/" + P.esc(name)), Snapshot.from_dict)

    async def delete(self, name: str) -> None:
        await self._w._call(P.json_req("DELETE", "/v1/snapshots/" + P.esc(name)))

    async def export(self, name: str, local_path: str) -> int:
        n = 0
        r = await self._w._open(P.Req("GET", "/v1/snapshots/" + P.esc(name) + "/export", accept="application/zstd"))
        async with AsyncReader(r) as src:
            with open(local_path, "wb") as dst:
                while True:
                    b = await src.read(BLOCK)
                    if not b:
                        return n
                    dst.write(b)
                    n += len(b)

    async def import_(self, name: str, local_path: str) -> Snapshot:
        with open(local_path, "rb") as f:
            return await self._w._call(P.Req("PUT", "/v1/snapshots/" + P.esc(name) + "/import", None, f,
                                             "application/zstd"), Snapshot.from_dict)


class AsyncWorkspaces:
    def __init__(self, w: AsyncWarren) -> None:
        self._w = w

    async def create(self, name: str, *, size_mb: Optional[int] = None, shared: bool = False) -> Workspace:
        body = P.drop_none({"name": name, "size_mb": size_mb, "shared": shared or None})
        return await self._w._call(P.json_req("POST", "/v1/workspaces", body), Workspace.from_dict)

    async def list(self) -> List[Workspace]:
        return await self._w._call(P.json_req("GET", "/v1/workspaces"),
                                   lambda d: [Workspace.from_dict(x) for x in d.get("workspaces") or []])

    async def get(self, name: str) -> Workspace:
        return await self._w._call(P.json_req("GET", "/v1/workspaces/" + P.esc(name)), Workspace.from_dict)

    async def delete(self, name: str) -> None:
        await self._w._call(P.json_req("DELETE", "/v1/workspaces/" + P.esc(name)))


class AsyncImages:
    def __init__(self, w: AsyncWarren) -> None:
        self._w = w

    async def list(self) -> List[Image]:
        return await self._w._call(P.json_req("GET", "/v1/images"),
                                   lambda d: [Image.from_dict(x) for x in d.get("images") or []])

    async def get(self, name: str) -> Image:
        return await self._w._call(P.json_req("GET", "/v1/images/" + P.esc(name)), Image.from_dict)

    async def delete(self, name: str) -> None:
        await self._w._call(P.json_req("DELETE", "/v1/images/" + P.esc(name)))

    async def prune(self) -> ImagePruneResult:
        return await self._w._call(P.json_req("POST", "/v1/images/prune"), ImagePruneResult.from_dict)

    async def import_(self, name: str, tar: Union[str, IO[bytes]], *, format: Optional[str] = None,
                      platform: Optional[str] = None) -> Image:
        if isinstance(tar, str):
            with open(tar, "rb") as f:
                return await self.import_(name, f, format=format, platform=platform)
        head = tar.read(2)
        ctype = "application/gzip" if head == b"\x1f\x8b" else P.TAR
        q = P.drop_none({"name": name, "format": format, "platform": platform})
        return await self._w._call(P.Req("POST", "/v1/images", q, _Prefixed(head, tar), ctype), Image.from_dict)

    async def pull(self, ref: str, *, name: Optional[str] = None, platform: Optional[str] = None,
                   on_progress: Optional[Callable[[PullProgress], None]] = None) -> Image:
        body = P.drop_none({"ref": ref, "name": name, "platform": platform})
        r = await self._w._open(P.json_req("POST", "/v1/images/pull", body,
                                           accept=P.EVENTS if on_progress else P.JSON))
        try:
            if (r.headers.get("content-type") or "").startswith(P.JSON):
                return Image.from_dict(json.loads(await r.read()))
            sse = P.SSEParser()
            while True:
                line = await r.readline()
                if not line:
                    raise StreamInterrupted("the pull's stream ended before the image event")
                ev = sse.feed(line)
                if ev is None:
                    continue
                if ev.name == "progress" and on_progress:
                    on_progress(PullProgress.from_dict(json.loads(ev.data)))
                elif ev.name == "image":
                    return Image.from_dict(json.loads(ev.data))
                elif ev.name == "error":
                    raise error_from_event(ev.data)
        finally:
            r.close() if r._eof else r.abort()


class AsyncShell:
    """The asyncio form of Shell: ``await shell.read()``, ``async for
    chunk in shell``, ``await shell.write(...)``."""

    def __init__(self, w: AsyncWarren, sid: str, query: Dict[str, str]) -> None:
        self._w, self._sid, self._query = w, sid, query
        self._state = P.ShellState()
        self._eof = False
        self._closed = False
        self._pending: List[bytes] = []
        self._lock = asyncio.Lock()

    @property
    def process_id(self) -> str:
        return self._state.process_id

    @property
    def exit_code(self) -> Optional[int]:
        return self._state.exit_code

    async def _open(self) -> None:
        ep = self._w._ep
        ctx = (self._w._ssl or ssl.create_default_context()) if ep.scheme == "https" else None
        self._r, self._wr = await asyncio.open_connection(ep.host, ep.port, ssl=ctx, limit=P.MAX_WS_MESSAGE)
        try:
            key = P.ws_key()
            target = P.Req("GET", P.session_path(self._sid, "/shell"), self._query or None).target(ep.prefix)
            self._wr.write(P.ws_handshake(ep.netloc, target, key, dict(ep.base_headers)))
            await self._wr.drain()
            head = await self._r.readuntil(b"\r\n\r\n")
            status, h = P.parse_head(head[:-4])
            if status != 101:
                n = int(h.get("content-length", "0") or 0)
                body = await self._r.readexactly(min(n, 64 << 10)) if n else b""
                raise error_from_response(status, P.Headers(h), body)
            if h.get("sec-websocket-accept") != P.ws_accept(key):
                raise WarrenError("the daemon's WebSocket handshake is invalid", code="unavailable")
            while not self._state.process_id and not self._eof:
                data = await self._next_message()
                if data:
                    self._pending.append(data)
        except BaseException:
            self._wr.close()
            self._closed = True
            raise

    async def _send(self, opcode: int, payload: bytes) -> None:
        async with self._lock:
            self._wr.write(P.ws_frame(opcode, payload))
            await self._wr.drain()

    async def _next_message(self) -> bytes:
        parts: List[bytes] = []
        op = None
        while True:
            try:
                fin, opcode, masked, n7 = P.ws_parse_header(await self._r.readexactly(2))
                ext = P.ws_ext_len(n7)
                n = P.ws_length(n7, await self._r.readexactly(ext) if ext else b"")
                if n > P.MAX_WS_MESSAGE:
                    raise WarrenError(f"a WebSocket frame of {n} bytes", code="unavailable")
                mkey = await self._r.readexactly(4) if masked else b""
                payload = await self._r.readexactly(n) if n else b""
            except (asyncio.IncompleteReadError, ConnectionError):
                self._eof = True
                return b""
            if masked:
                payload = P.mask(payload, mkey)
            if opcode == P.OP_PING:
                await self._send(P.OP_PONG, payload)
                continue
            if opcode == P.OP_PONG:
                continue
            if opcode == P.OP_CLOSE:
                try:
                    await self._send(P.OP_CLOSE, payload[:2])
                except (ConnectionError, RuntimeError):
                    pass
                self._eof = True
                return b""
            if opcode != P.OP_CONT:
                op = opcode
            parts.append(payload)
            if not fin:
                continue
            data = b"".join(parts)
            if op == P.OP_TEXT:
                self._state.text(data)
                return b""
            return data

    async def read(self) -> bytes:
        if self._pending:
            return self._pending.pop(0)
        while not self._eof:
            data = await self._next_message()
            if data:
                return data
        return b""

    async def read_until(self, marker: Union[bytes, str], timeout: float = 10.0) -> bytes:
        if isinstance(marker, str):
            marker = marker.encode()
        out = b""

        async def loop() -> bytes:
            nonlocal out
            while marker not in out:
                b = await self.read()
                if not b:
                    raise EOFError(f"the shell ended before {marker!r}: {out[-200:]!r}")
                out += b
            return out
        try:
            return await asyncio.wait_for(loop(), timeout)
        except asyncio.TimeoutError:
            raise TimeoutError(f"no {marker!r} in the shell's output within {timeout}s: {out[-200:]!r}") from None

    def __aiter__(self) -> "AsyncShell":
        return self

    async def __anext__(self) -> bytes:
        b = await self.read()
        if not b:
            raise StopAsyncIteration
        return b

    async def write(self, data: Union[bytes, str]) -> None:
        if isinstance(data, str):
            data = data.encode("utf-8")
        await self._send(P.OP_BINARY, data)

    async def resize(self, cols: int, rows: int) -> None:
        await self._send(P.OP_TEXT, json.dumps({"type": "resize", "cols": cols, "rows": rows}).encode())

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            await self._send(P.OP_CLOSE, P.ws_close_payload(1000))

            async def drain() -> None:
                while not self._eof:
                    await self._next_message()
            await asyncio.wait_for(drain(), 2)
        except (OSError, asyncio.TimeoutError, WarrenError, RuntimeError):
            pass
        finally:
            self._wr.close()

    async def __aenter__(self) -> "AsyncShell":
        return self

    async def __aexit__(self, *exc) -> None:
        await self.close()
