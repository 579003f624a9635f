"""The synchronous client: Warren and the nouns hung on it."""

from __future__ import annotations

import datetime as _dt
import json
import os
import select
import shutil
import socket
import ssl
import threading
import time
from typing import IO, Any, Callable, Dict, Iterator, List, Optional, Sequence, Union
from urllib.parse import urlencode

from . import _proto as P
from ._errors import StreamInterrupted, WarrenError, error_from_response
from ._http import CONN_ERRORS, ConnectionFailed, Endpoint, Pool, Response
from ._tar import pack_dir, safe_extract
from ._types import (ExecChunk, ExecResult, FileEntry, FileWritten, Image, ImagePruneResult, Limits,
                     NetworkDenial, NetworkPolicy, Port, Process, ProcessEvent, PullProgress, SessionInfo,
                     Snapshot, Stats, Workspace)

__all__ = ["Warren", "Session", "Sessions", "Files", "Processes", "Network", "Ports", "Snapshots",
           "Workspaces", "Images", "ExecStream", "Shell"]

Command = Union[str, Sequence[str], None]
Data = Union[bytes, bytearray, str, IO[bytes]]

#: How many times a followed process output stream reconnects in a row
#: before it gives up with StreamInterrupted.
MAX_RECONNECTS = 8


# The CLI's names (WARREN_ADDR, WARREN_TOKEN) count too, after the SDKs' own,
# so that a shell set up for `warren` works for a script as well; the
# TypeScript SDK reads the same names in the same order.
def _env_url() -> str:
    return os.environ.get("WARREN_URL") or os.environ.get("WARREN_ADDR") or "http://127.0.0.1:7433"


def _env_key() -> str:
    return (
        os.environ.get("WARREN_API_KEY")
        or os.environ.get("WARREN_KEY")
        or os.environ.get("WARREN_TOKEN")
        or ""
    )


def new_id() -> str:
    """A session id chosen by the client, as the daemon's look ("s-" and 12
    of [a-z0-9]). The SDK names the sessions it creates, so that a create
    interrupted after the daemon acted on it (Ctrl-C, a cancelled task) can
    still be deleted by its id."""
    import secrets
    return "s-" + "".join(secrets.choice("abcdefghijklmnopqrstuvwxyz0123456789") for _ in range(12))


def create_body(image, env, cwd, limits, network, ttl_seconds, max_lifetime_seconds, labels, id, user,
                workspace, workspace_mode, snapshot) -> Dict[str, Any]:
    """The body of POST /v1/sessions."""
    if isinstance(limits, Limits):
        limits = limits.to_dict()
    if isinstance(network, NetworkPolicy):
        network = network.to_dict()
    return P.drop_none({
        "id": id, "image": image, "env": env, "cwd": cwd, "limits": limits, "network": network,
        "ttl_seconds": ttl_seconds, "max_lifetime_seconds": max_lifetime_seconds, "labels": labels,
        "user": user, "workspace": workspace, "workspace_mode": workspace_mode, "snapshot": snapshot,
    })


class Warren:
    """A client of one warren daemon. Safe to share between threads.

    ``url`` defaults to ``$WARREN_URL`` (else ``http://127.0.0.1:7433``) and
    ``key`` to ``$WARREN_API_KEY``. ``timeout`` bounds each socket operation
    in seconds (None: no bound; a long exec or a followed stream may be
    silent for a while). Use it as a context manager, or call close(), to
    close its kept-alive connections::

        with Warren() as w, w.sessions.create() as s:
            print(s.exec("echo hi").stdout)
    """

    def __init__(self, url: Optional[str] = None, key: Optional[str] = None, *, timeout: Optional[float] = None,
                 ssl_context: Optional[ssl.SSLContext] = None, user_agent: Optional[str] = None) -> None:
        kw = {"user_agent": user_agent} if user_agent else {}
        self._ep = Endpoint(url or _env_url(), key if key is not None else _env_key(), timeout, **kw)
        self._ssl = ssl_context
        self._pool = Pool(self._ep, ssl_context)
        self.sessions = Sessions(self)
        self.snapshots = Snapshots(self)
        self.workspaces = Workspaces(self)
        self.images = Images(self)

    @property
    def url(self) -> str:
        """The daemon's base URL."""
        return self._ep.url

    def close(self) -> None:
        """Closes the idle connections; calls after it open new ones."""
        self._pool.close()
        self._pool = Pool(self._ep, self._ssl)

    def __enter__(self) -> "Warren":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _call(self, req: P.Req, parse: Optional[Callable[[Any], Any]] = None, timeout: Optional[float] = None) -> Any:
        return self._pool.call(req, parse, timeout)

    def _open(self, req: P.Req, timeout: Optional[float] = None) -> Response:
        return self._pool.open(req, timeout)

    def run(self, command: Command = None, *, argv: Optional[List[str]] = None, image: Optional[str] = None,
            limits: Union[Limits, Dict[str, Any], None] = None, stdin: Union[str, bytes, None] = None,
            env: Optional[Dict[str, str]] = None, cwd: Optional[str] = None, timeout_ms: Optional[int] = None) -> ExecResult:
        """Runs one command in a fresh sandbox that is destroyed afterwards."""
        b = P.exec_body(command, argv, stdin, env, cwd, timeout_ms, None)
        if isinstance(limits, Limits):
            limits = limits.to_dict()
        b.update(P.drop_none({"image": image, "limits": limits}))
        return self._call(P.json_req("POST", "/v1/run", b), ExecResult.from_dict)

    def stats(self) -> Stats:
        """The daemon's statistics."""
        return self._call(P.json_req("GET", "/v1/stats"), Stats.from_dict)

    def health(self) -> None:
        """Raises unless the daemon is alive (GET /healthz)."""
        self._call(P.json_req("GET", "/healthz"))

    def create_token(self, ttl_seconds: int = 0) -> str:
        """A short-lived token acting as this client's key, for what cannot
        send headers (a browser, a WebSocket): passed as ``?token=``."""
        return self._call(P.json_req("POST", "/v1/tokens", P.drop_none({"ttl_seconds": ttl_seconds or None})),
                          lambda d: d["token"])


class Sessions:
    """``warren.sessions``: create, get, list and delete sessions."""

    def __init__(self, w: Warren) -> None:
        self._w = w

    def create(self, *, image: Optional[str] = None, env: Optional[Dict[str, str]] = None, cwd: Optional[str] = None,
               limits: Union[Limits, Dict[str, Any], None] = None,
               network: Union[str, NetworkPolicy, Dict[str, Any], None] = None,
               ttl_seconds: Optional[int] = None, max_lifetime_seconds: Optional[int] = None,
               labels: Optional[Dict[str, str]] = None, id: Optional[str] = None, user: Optional[str] = None,
               workspace: Optional[str] = None, workspace_mode: Optional[str] = None,
               snapshot: Optional[str] = None) -> "Session":
        """Creates a session (every argument is optional) and returns its
        handle. Used as a context manager, the handle deletes the session
        at the end of the block. With ``id`` of an existing session of the
        caller, that session is returned (idempotent create)."""
        chosen = id is None
        body = create_body(image, env, cwd, limits, network, ttl_seconds, max_lifetime_seconds, labels,
                           id or new_id(), user, workspace, workspace_mode, snapshot)
        try:
            info = self._w._call(P.json_req("POST", "/v1/sessions", body), SessionInfo.from_dict)
        except (KeyboardInterrupt, SystemExit):
            if chosen:
                self._forget(body)
            raise
        return Session(self._w, info, owned=True)

    def _forget(self, body: Dict[str, Any]) -> None:
        """Deletes the session an interrupted create may have made. A
        delete alone could reach the daemon before the create it chases
        (and find nothing); creating the same id again first waits for
        that create, or makes the session, so the delete finds it."""
        try:
            self._w._call(P.json_req("POST", "/v1/sessions", body))
            self.delete(body["id"])
        except Exception:
            pass

    def get(self, id: str) -> "Session":
        """The handle of an existing session. Leaving a ``with`` block of it
        does not delete it: only sessions this client created are."""
        return Session(self._w, self._w._call(P.json_req("GET", P.session_path(id)), SessionInfo.from_dict))

    def list(self, *, all_tenants: bool = False) -> List["Session"]:
        """The caller's sessions (every tenant's with all_tenants, admin only)."""
        q = {"all": "true"} if all_tenants else None
        infos = self._w._call(P.json_req("GET", "/v1/sessions", query=q),
                              lambda d: [SessionInfo.from_dict(s) for s in d.get("sessions") or []])
        return [Session(self._w, i) for i in infos]

    def delete(self, id: str) -> None:
        """Deletes the session and everything of it."""
        self._w._call(P.json_req("DELETE", P.session_path(id)))


class Session:
    """A handle on one session. ``info`` is what the daemon said of it last
    (``refresh()`` asks again). As a context manager it deletes the session
    at the end of the block if this client created it."""

    def __init__(self, w: Warren, info: SessionInfo, owned: bool = False) -> None:
        self._w = w
        self.info = info
        self.id = info.id
        self._owned = owned
        self.files = Files(w, self.id)
        self.processes = Processes(w, self.id)
        self.network = Network(w, self.id)
        self.ports = Ports(w, self.id)

    def __repr__(self) -> str:
        return f"Session(id={self.id!r}, state={self.info.state!r})"

    def __enter__(self) -> "Session":
        return self

    def __exit__(self, *exc) -> None:
        if self._owned:
            try:
                self.delete()
            except WarrenError as e:
                if e.code != "not_found":
                    raise

    def delete(self) -> None:
        """Deletes the session and everything of it."""
        self._w.sessions.delete(self.id)

    def refresh(self) -> SessionInfo:
        """Describes the session again (state, expiry, live usage)."""
        self.info = self._w._call(P.json_req("GET", P.session_path(self.id)), SessionInfo.from_dict)
        return self.info

    def renew(self) -> SessionInfo:
        """Refreshes the session's idle TTL and returns it described again.
        There is no REST verb for it: every call that uses a session renews
        it, and a stat of "/" is the cheapest such call."""
        self.files.stat("/")
        return self.refresh()

    def ttl(self) -> float:
        """Seconds until the daemon deletes the session unless it is used."""
        exp = self.refresh().expires_at
        if exp is None:
            return float("inf")
        return max(0.0, (exp - _dt.datetime.now(_dt.timezone.utc)).total_seconds())

    def exec(self, command: Command = None, *, argv: Optional[List[str]] = None, stdin: Union[str, bytes, None] = None,
             env: Optional[Dict[str, str]] = None, cwd: Optional[str] = None, timeout_ms: Optional[int] = None,
             max_output_bytes: Optional[int] = None) -> ExecResult:
        """Runs a command: a string goes to the session's persistent shell
        (cd, variables and functions carry over), a list runs as argv
        directly. A command that fails is not an exception: see
        ``exit_code``."""
        b = P.exec_body(command, argv, stdin, env, cwd, timeout_ms, max_output_bytes)
        return self._w._call(P.json_req("POST", P.session_path(self.id, "/exec"), b), ExecResult.from_dict)

    def exec_stream(self, command: Command = None, *, argv: Optional[List[str]] = None,
                    stdin: Union[str, bytes, None] = None, env: Optional[Dict[str, str]] = None,
                    cwd: Optional[str] = None, timeout_ms: Optional[int] = None) -> "ExecStream":
        """Runs a command as exec does, yielding its output as it is
        written: ``for chunk in s.exec_stream("make"): ...``, then
        ``.result``. Breaking out of the loop (or close()) cancels the
        command. A dropped connection raises StreamInterrupted: the daemon
        never runs a command twice; run a process to survive one."""
        b = P.exec_body(command, argv, stdin, env, cwd, timeout_ms, None)
        return ExecStream(self._w, P.json_req("POST", P.session_path(self.id, "/exec"), b, accept=P.EVENTS))

    def snapshot(self, name: str) -> Snapshot:
        """Stores the session's files as the snapshot name."""
        return self._w._call(P.json_req("POST", P.session_path(self.id, "/snapshot"), {"name": name}),
                             Snapshot.from_dict)

    def fork(self, count: Optional[int] = None, *, ids: Optional[List[str]] = None,
             snapshot: Optional[str] = None) -> List["Session"]:
        """Snapshots the session and starts ``count`` new sessions from it
        (1 to 10), which this client owns (a ``with`` block deletes them)."""
        body = P.drop_none({"count": count, "ids": ids, "snapshot": snapshot})
        res = self._w._call(P.json_req("POST", P.session_path(self.id, "/fork"), body),
                            lambda d: [SessionInfo.from_dict(s) for s in d.get("sessions") or []])
        return [Session(self._w, i, owned=True) for i in res]

    def shell(self, *, cols: int = 0, rows: int = 0, process: str = "", kill_on_close: bool = False,
              timeout: Optional[float] = None) -> "Shell":
        """Opens an interactive shell on a pseudo-terminal over a WebSocket
        (or attaches to the TTY process ``process``)."""
        return Shell(self._w, self.id, P.shell_query(cols, rows, process, kill_on_close), timeout)


class ExecStream:
    """The output of a streamed exec: iterate for ExecChunk values; then
    ``result`` is the ExecResult (its stdout and stderr empty: they were
    streamed)."""

    def __init__(self, w: Warren, req: P.Req) -> None:
        self._w, self._req = w, req
        self._resp: Optional[Response] = None
        self.result: Optional[ExecResult] = None

    def __enter__(self) -> "ExecStream":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        """Stops reading; a command still running is cancelled with the
        connection."""
        if self._resp is not None:
            self._resp.abort() if self.result is None else self._resp.close()

    def __iter__(self) -> Iterator[ExecChunk]:
        self._resp = r = self._w._open(self._req)
        try:
            ctype = (r.headers.get("Content-Type") or "").split(";")[0].strip()
            if ctype == P.JSON:  # a daemon that does not stream
                res = ExecResult.from_dict(json.loads(r.read()))
                for name, b in (("stdout", res.stdout_bytes), ("stderr", res.stderr_bytes)):
                    if b:
                        yield ExecChunk(name, b)
                res.stdout = res.stderr = res.stdout_base64 = res.stderr_base64 = ""
                self.result = res
                return
            sse, ex = P.SSEParser(), P.ExecEvents()
            while True:
                try:
                    line = r.readline()
                except CONN_ERRORS as e:
                    raise StreamInterrupted(f"the exec stream was cut off: {e}") from e
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

    def wait(self) -> ExecResult:
        """Reads the stream to its end, discarding output, and returns the result."""
        for _ in self:
            pass
        assert self.result is not None
        return self.result


class Files:
    """``session.files``: read, write, list and transfer files in a session.
    Relative paths resolve against the session's cwd at creation."""

    def __init__(self, w: Warren, sid: str) -> None:
        self._w, self._sid = w, sid

    def _path(self, suffix: str = "") -> str:
        return P.session_path(self._sid, "/files" + suffix)

    def open(self, path: str) -> IO[bytes]:
        """The file's bytes as a readable binary stream, read as they
        arrive (close it)."""
        return _Reader(self._w._open(P.Req("GET", self._path(), {"path": path}, accept=P.OCTETS)))

    def read(self, path: str) -> bytes:
        """The file's bytes."""
        with self.open(path) as f:
            return f.read()

    def read_text(self, path: str, encoding: str = "utf-8") -> str:
        """The file's text."""
        return self.read(path).decode(encoding)

    def download(self, path: str, local_path: str) -> int:
        """Streams the file into local_path and returns its size."""
        with self.open(path) as src, open(local_path, "wb") as dst:
            shutil.copyfileobj(src, dst, 1 << 20)
            return dst.tell()

    def write(self, path: str, data: Data, *, mode: Optional[int] = None) -> FileWritten:
        """Writes bytes, text (UTF-8) or a binary file object (streamed) to
        path, creating missing parents; ``mode`` sets permission bits
        (0o755)."""
        if isinstance(data, str):
            data = data.encode("utf-8")
        elif isinstance(data, bytearray):
            data = bytes(data)
        q = {"path": path}
        if mode is not None:
            q["mode"] = format(mode, "04o")
        return self._w._call(P.Req("PUT", self._path(), q, data, P.OCTETS), FileWritten.from_dict)

    def upload(self, local_path: str, path: str, *, mode: Optional[int] = None) -> FileWritten:
        """Streams the local file local_path to path."""
        with open(local_path, "rb") as f:
            return self.write(path, f, mode=mode)

    def list(self, path: str = ".") -> List[FileEntry]:
        """The entries of a directory."""
        return self._w._call(P.json_req("GET", self._path("/list"), query={"path": path}),
                             lambda d: [FileEntry.from_dict(e) for e in d.get("entries") or []])

    def stat(self, path: str) -> FileEntry:
        """Describes a file, directory or symlink."""
        return self._w._call(P.json_req("GET", self._path("/stat"), query={"path": path}), FileEntry.from_dict)

    def exists(self, path: str) -> bool:
        """Whether path exists."""
        try:
            self.stat(path)
            return True
        except WarrenError as e:
            if e.code == "not_found":
                return False
            raise

    def remove(self, path: str, *, recursive: bool = False) -> None:
        """Removes a file (a directory and its contents with recursive)."""
        q = {"path": path}
        if recursive:
            q["recursive"] = "true"
        self._w._call(P.json_req("DELETE", self._path(), query=q))

    def mkdir(self, path: str) -> FileEntry:
        """Creates a directory and its missing parents (mkdir -p)."""
        return self._w._call(P.json_req("POST", self._path("/mkdir"), query={"path": path}), FileEntry.from_dict)

    def upload_dir(self, local_dir: str, path: str) -> FileWritten:
        """Copies the contents of local_dir into the directory path, as a
        tar (packed into a temporary file, then streamed)."""
        with pack_dir(local_dir) as tar:
            return self.upload_tar(path, tar)

    def upload_tar(self, path: str, tar: IO[bytes]) -> FileWritten:
        """Extracts the tar that the file object yields into path."""
        return self._w._call(P.Req("PUT", P.session_path(self._sid, "/archive"), {"path": path}, tar, P.TAR),
                             FileWritten.from_dict)

    def download_tar(self, path: str) -> IO[bytes]:
        """A tar of the directory path as a readable stream (close it)."""
        return _Reader(self._w._open(P.Req("GET", P.session_path(self._sid, "/archive"), {"path": path},
                                           accept=P.TAR)))

    def download_dir(self, path: str, local_dir: str) -> int:
        """Copies the directory path into local_dir, streaming its tar and
        refusing entries that would land outside local_dir; returns how
        many entries it wrote."""
        with self.download_tar(path) as tar:
            return safe_extract(tar, local_dir)


class _Reader:
    """A binary file object over an answer's body."""

    def __init__(self, r: Response) -> None:
        self._r = r

    def read(self, n: int = -1) -> bytes:
        try:
            return self._r.read(n)
        except CONN_ERRORS as e:
            self._r.abort()
            raise StreamInterrupted(f"the download was cut off: {e}") from e

    def readable(self) -> bool:
        return True

    def close(self) -> None:
        if self._r.raw.isclosed():
            self._r.close()
        else:
            self._r.abort()

    def __enter__(self) -> "_Reader":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class Processes:
    """``session.processes``: commands that run on their own, with output
    kept for clients that come and go."""

    def __init__(self, w: Warren, sid: str) -> None:
        self._w, self._sid = w, sid

    def start(self, command: Command = None, *, argv: Optional[List[str]] = None, env: Optional[Dict[str, str]] = None,
              cwd: Optional[str] = None, tty: bool = False, cols: Optional[int] = None, rows: Optional[int] = None,
              stdin: bool = False) -> Process:
        """Starts a process: a string runs through ``bash -c`` (or ``sh -c``)
        in the session's current cwd and environment, a list as argv.
        ``stdin=True`` keeps its stdin open for write_stdin."""
        if isinstance(command, (list, tuple)):
            command, argv = None, list(command)
        body = P.drop_none({"command": command, "argv": argv, "env": env, "cwd": cwd, "tty": tty or None,
                            "cols": cols, "rows": rows, "stdin": stdin or None})
        return self._w._call(P.json_req("POST", P.session_path(self._sid, "/processes"), body), Process.from_dict)

    def list(self) -> List[Process]:
        """The session's processes, running and exited."""
        return self._w._call(P.json_req("GET", P.session_path(self._sid, "/processes")),
                             lambda d: [Process.from_dict(p) for p in d.get("processes") or []])

    def get(self, pid: str) -> Process:
        """Describes the process pid (such as "p1")."""
        return self._w._call(P.json_req("GET", P.process_path(self._sid, pid)), Process.from_dict)

    def signal(self, pid: str, signal: Union[str, int] = "TERM") -> None:
        """Sends a signal: a name ("TERM", "SIGINT") or a number."""
        self._w._call(P.json_req("POST", P.process_path(self._sid, pid, "/signal"), {"signal": str(signal)}))

    def kill(self, pid: str) -> None:
        """Kills the process and its group, and removes it from the list."""
        self._w._call(P.json_req("DELETE", P.process_path(self._sid, pid)))

    def resize(self, pid: str, cols: int, rows: int) -> None:
        """Sets the terminal size of a TTY process."""
        self._w._call(P.json_req("POST", P.process_path(self._sid, pid, "/resize"), {"cols": cols, "rows": rows}))

    def write_stdin(self, pid: str, data: Data, *, eof: bool = False) -> int:
        """Sends data to the process's stdin (then closes it with eof) and
        returns how many bytes it took."""
        if isinstance(data, str):
            data = data.encode("utf-8")
        q = {"eof": "true"} if eof else None
        return self._w._call(P.Req("POST", P.process_path(self._sid, pid, "/stdin"), q, bytes(data)
                                   if isinstance(data, bytearray) else data, P.OCTETS), lambda d: d["written"])

    def logs(self, pid: str, *, follow: bool = False, offset: int = 0) -> Iterator[ProcessEvent]:
        """The process's output from ``offset`` as ProcessEvent values
        (output, gap, and a last exit once it has exited). With follow it
        waits for more until the process exits, and reconnects by itself
        from the offset after the last event when the connection drops, so
        no byte is repeated or lost (bytes the daemon's bounded buffer
        dropped meanwhile come as a gap event). Close the iterator (or
        break) to stop."""
        state = P.OutputEvents(offset)
        failures = 0
        while True:
            q = {"offset": str(state.pos), "follow": "true" if follow else "false"}
            req = P.Req("GET", P.process_path(self._sid, pid, "/output"), q, accept=P.EVENTS)
            try:
                r = self._w._open(req)
            except (ConnectionFailed, TimeoutError) as e:
                failures += 1
                if not follow or failures > MAX_RECONNECTS:
                    raise StreamInterrupted(f"process output: {e}") from e
                time.sleep(P.retry_backoff(failures - 1))
                continue
            if r.status == 204:  # nothing more: the process ended and all was read
                r.close()
                return
            sse = P.SSEParser()
            silent = False  # the client's timeout passed without a byte: not a failure
            try:
                while True:
                    try:
                        line = r.readline()
                    except socket.timeout:
                        silent, line = True, None
                    except CONN_ERRORS:
                        line = None
                    if not line:
                        break  # the stream ended: done, or dropped
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
                r.abort() if not r.raw.isclosed() else r.close()
            if not follow:
                return
            if silent:
                continue  # a quiet process outlasted the client's timeout: ask again
            failures += 1
            if failures > MAX_RECONNECTS:
                raise StreamInterrupted("process output: the stream kept ending before the exit event")
            time.sleep(P.retry_backoff(failures - 1))

    def wait(self, pid: str) -> ProcessEvent:
        """Follows the process's output to its end and returns the exit event."""
        last = None
        for ev in self.logs(pid, follow=True):
            last = ev
        if last is None or last.kind != "exit":
            p = self.get(pid)
            return ProcessEvent("exit", p.output_bytes, p.output_bytes, exit_code=p.exit_code, signal=p.signal)
        return last


class Network:
    """``session.network``: the session's egress policy, changed live."""

    def __init__(self, w: Warren, sid: str) -> None:
        self._w, self._sid = w, sid

    def get(self) -> NetworkPolicy:
        return self._w._call(P.json_req("GET", P.session_path(self._sid, "/network")), NetworkPolicy.from_dict)

    def set(self, mode: Optional[str] = None, *, allow: Optional[List[str]] = None,
            deny: Optional[List[str]] = None) -> NetworkPolicy:
        """Replaces the allow and deny rules whole (and the mode, if
        given), at once or not at all, and returns the policy in force."""
        body = NetworkPolicy(mode or "", list(allow or []), list(deny or [])).to_dict()
        return self._w._call(P.json_req("PATCH", P.session_path(self._sid, "/network"), body),
                             NetworkPolicy.from_dict)

    def allow(self, *rules: str) -> NetworkPolicy:
        """Adds allow rules (names, "*." wildcards, addresses, CIDRs, each
        with an optional ":port") to those in force."""
        cur = self.get()
        return self.set(cur.mode, allow=cur.allow + [r for r in rules if r not in cur.allow], deny=cur.deny)

    def deny(self, *rules: str) -> NetworkPolicy:
        """Adds deny rules, which win over allow rules."""
        cur = self.get()
        return self.set(cur.mode, allow=cur.allow, deny=cur.deny + [r for r in rules if r not in cur.deny])

    def denials(self) -> List[NetworkDenial]:
        """The latest connections and names the policy refused, oldest first."""
        return self._w._call(P.json_req("GET", P.session_path(self._sid, "/network/denials")),
                             lambda d: [NetworkDenial.from_dict(x) for x in d.get("denials") or []])


class Ports:
    """``session.ports``: what listens in the session, reached from outside."""

    def __init__(self, w: Warren, sid: str) -> None:
        self._w, self._sid = w, sid

    def list(self) -> List[Port]:
        return self._w._call(P.json_req("GET", P.session_path(self._sid, "/ports")),
                             lambda d: [Port.from_dict(p) for p in d.get("ports") or []])

    def url(self, port: int, *, token: bool = False, token_ttl_seconds: int = 0) -> str:
        """The daemon's URL of the port (its HTTP and WebSocket proxy).
        With token, it carries a short-lived token, so that a browser can
        open it without headers."""
        u = self._w.url + P.session_path(self._sid, f"/ports/{int(port)}/")
        if token:
            u += "?" + urlencode({"token": self._w.create_token(token_ttl_seconds)})
        return u

    def set_public(self, port: int, public: bool = True) -> Port:
        """Serves the port without authentication (or with it again)."""
        return self._w._call(P.json_req("PUT", P.session_path(self._sid, f"/ports/{int(port)}"), {"public": public}),
                             Port.from_dict)


class Snapshots:
    """``warren.snapshots``: frozen session files that new sessions start from."""

    def __init__(self, w: Warren) -> None:
        self._w = w

    def list(self) -> List[Snapshot]:
        return self._w._call(P.json_req("GET", "/v1/snapshots"),
                             lambda d: [Snapshot.from_dict(s) for s in d.get("snapshots") or []])

    def get(self, name: str) -> Snapshot:
        return self._w._call(P.json_req("GET", "/v1/snapshots/" + P.esc(name)), Snapshot.from_dict)

    def delete(self, name: str) -> None:
        """Deletes a snapshot; one that sessions use is a Conflict."""
        self._w._call(P.json_req("DELETE", "/v1/snapshots/" + P.esc(name)))

    def export(self, name: str, local_path: str) -> int:
        """Streams the snapshot's zstd tarball into local_path; returns its size."""
        r = self._w._open(P.Req("GET", "/v1/snapshots/" + P.esc(name) + "/export", accept="application/zstd"))
        with _Reader(r) as src, open(local_path, "wb") as dst:
            shutil.copyfileobj(src, dst, 1 << 20)
            return dst.tell()

    def import_(self, name: str, local_path: str) -> Snapshot:
        """Stores a zstd tarball (as export wrote it) as the snapshot name."""
        with open(local_path, "rb") as f:
            return self._w._call(P.Req("PUT", "/v1/snapshots/" + P.esc(name) + "/import", None, f,
                                       "application/zstd"), Snapshot.from_dict)


class Workspaces:
    """``warren.workspaces``: named directories that outlive sessions."""

    def __init__(self, w: Warren) -> None:
        self._w = w

    def create(self, name: str, *, size_mb: Optional[int] = None, shared: bool = False) -> Workspace:
        body = P.drop_none({"name": name, "size_mb": size_mb, "shared": shared or None})
        return self._w._call(P.json_req("POST", "/v1/workspaces", body), Workspace.from_dict)

    def list(self) -> List[Workspace]:
        return self._w._call(P.json_req("GET", "/v1/workspaces"),
                             lambda d: [Workspace.from_dict(x) for x in d.get("workspaces") or []])

    def get(self, name: str) -> Workspace:
        return self._w._call(P.json_req("GET", "/v1/workspaces/" + P.esc(name)), Workspace.from_dict)

    def delete(self, name: str) -> None:
        """Deletes the workspace and its files; one a session mounts is a Conflict."""
        self._w._call(P.json_req("DELETE", "/v1/workspaces/" + P.esc(name)))


class Images:
    """``warren.images``: root filesystems that sessions start from."""

    def __init__(self, w: Warren) -> None:
        self._w = w

    def list(self) -> List[Image]:
        return self._w._call(P.json_req("GET", "/v1/images"),
                             lambda d: [Image.from_dict(x) for x in d.get("images") or []])

    def get(self, name: str) -> Image:
        return self._w._call(P.json_req("GET", "/v1/images/" + P.esc(name)), Image.from_dict)

    def delete(self, name: str) -> None:
        self._w._call(P.json_req("DELETE", "/v1/images/" + P.esc(name)))

    def prune(self) -> ImagePruneResult:
        """Removes content no image or session uses."""
        return self._w._call(P.json_req("POST", "/v1/images/prune"), ImagePruneResult.from_dict)

    def import_(self, name: str, tar: Union[str, IO[bytes]], *, format: Optional[str] = None,
                platform: Optional[str] = None) -> Image:
        """Stores a root filesystem tar (plain or gzip; a path or a binary
        file object, streamed) as the image name. format is rootfs (the
        default), oci-layout or docker-archive."""
        if isinstance(tar, str):
            with open(tar, "rb") as f:
                return self.import_(name, f, format=format, platform=platform)
        head = tar.read(2)
        ctype = "application/gzip" if head == b"\x1f\x8b" else P.TAR
        q = P.drop_none({"name": name, "format": format, "platform": platform})
        return self._w._call(P.Req("POST", "/v1/images", q, _Prefixed(head, tar), ctype), Image.from_dict)

    def pull(self, ref: str, *, name: Optional[str] = None, platform: Optional[str] = None,
             on_progress: Optional[Callable[[PullProgress], None]] = None) -> Image:
        """Has the daemon pull an image from its registry; on_progress gets
        each step as the daemon reports it."""
        body = P.drop_none({"ref": ref, "name": name, "platform": platform})
        req = P.json_req("POST", "/v1/images/pull", body, accept=P.EVENTS if on_progress else P.JSON)
        r = self._w._open(req)
        try:
            if (r.headers.get("Content-Type") or "").startswith(P.JSON):
                return Image.from_dict(json.loads(r.read()))
            sse = P.SSEParser()
            while True:
                line = r.readline()
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
                    raise P.error_from_event(ev.data)
        finally:
            r.abort() if not r.raw.isclosed() else r.close()


class _Prefixed:
    """A file object that yields head, then the rest of f (the bytes read
    to sniff gzip are not lost)."""

    def __init__(self, head: bytes, f: IO[bytes]) -> None:
        self._head, self._f = head, f

    def read(self, n: int = -1) -> bytes:
        if self._head:
            h, self._head = self._head, b""
            if n < 0:
                return h + self._f.read()
            return h if len(h) >= n else h + self._f.read(n - len(h))
        return self._f.read(n)


class Shell:
    """An interactive shell on a pseudo-terminal in a session, over a
    WebSocket. read() returns the terminal's output (b"" once the shell
    ended: see exit_code), write() sends input, resize() changes the
    terminal's size. Close it (or use ``with``). Read from one thread at a
    time; write and resize may come from any."""

    def __init__(self, w: Warren, sid: str, query: Dict[str, str], timeout: Optional[float]) -> None:
        ep = w._ep
        self._state = P.ShellState()
        self._send_lock = threading.Lock()
        self._closed = False
        self._eof = False
        self._pending: List[bytes] = []
        raw = socket.create_connection((ep.host, ep.port), timeout=timeout if timeout is not None else ep.timeout)
        if ep.scheme == "https":
            ctx = w._ssl or ssl.create_default_context()
            raw = ctx.wrap_socket(raw, server_hostname=ep.host)
        self._sock = raw
        self._buf = b""
        target = P.Req("GET", P.session_path(sid, "/shell"), query or None).target(ep.prefix)
        key = P.ws_key()
        hdrs = {k: v for k, v in ep.base_headers.items()}
        try:
            self._sock.sendall(P.ws_handshake(ep.netloc, target, key, hdrs))
            head = self._read_until(b"\r\n\r\n")
            status, h = P.parse_head(head[:-4])
            if status != 101:
                n = int(h.get("content-length", "0") or 0)
                body = self._read_exact(min(n, 64 << 10)) if n else b""
                raise error_from_response(status, P.Headers(h), body)
            if h.get("sec-websocket-accept") != P.ws_accept(key):
                raise WarrenError("the daemon's WebSocket handshake is invalid", code="unavailable")
            # The daemon names the process first (or reports an error).
            while not self._state.process_id and not self._eof:
                data = self._next_message()
                if data:
                    self._pending.append(data)
        except BaseException:
            self._sock.close()
            self._closed = True
            raise

    @property
    def process_id(self) -> str:
        """The id of the shell's process (reattach with shell(process=...))."""
        return self._state.process_id

    @property
    def exit_code(self) -> Optional[int]:
        """How the shell exited, once it has."""
        return self._state.exit_code

    def _read_exact(self, n: int) -> bytes:
        while len(self._buf) < n:
            b = self._sock.recv(max(65536, n - len(self._buf)))
            if not b:
                raise ConnectionError("the shell connection closed")
            self._buf += b
        out, self._buf = self._buf[:n], self._buf[n:]
        return out

    def _read_until(self, marker: bytes) -> bytes:
        while marker not in self._buf:
            if len(self._buf) > 1 << 20:
                raise WarrenError("the WebSocket handshake's answer is too long", code="unavailable")
            b = self._sock.recv(65536)
            if not b:
                raise ConnectionFailed("the daemon closed the connection during the WebSocket handshake")
            self._buf += b
        i = self._buf.index(marker) + len(marker)
        out, self._buf = self._buf[:i], self._buf[i:]
        return out

    def _send(self, opcode: int, payload: bytes) -> None:
        with self._send_lock:
            self._sock.sendall(P.ws_frame(opcode, payload))

    def _next_message(self) -> bytes:
        """The next binary message's bytes; b"" after a text message, or at
        the end (then _eof is set)."""
        parts: List[bytes] = []
        op = None
        while True:
            try:
                fin, opcode, masked, n7 = P.ws_parse_header(self._read_exact(2))
                n = P.ws_length(n7, self._read_exact(P.ws_ext_len(n7)))
                if n > P.MAX_WS_MESSAGE:
                    raise WarrenError(f"a WebSocket frame of {n} bytes", code="unavailable")
                mkey = self._read_exact(4) if masked else b""
                payload = self._read_exact(n)
            except (ConnectionError, OSError):
                self._eof = True
                return b""
            if masked:
                payload = P.mask(payload, mkey)
            if opcode == P.OP_PING:
                self._send(P.OP_PONG, payload)
                continue
            if opcode == P.OP_PONG:
                continue
            if opcode == P.OP_CLOSE:
                try:
                    self._send(P.OP_CLOSE, payload[:2])
                except OSError:
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

    def read(self) -> bytes:
        """The next output of the terminal; b"" once the shell has ended."""
        if self._pending:
            return self._pending.pop(0)
        while not self._eof:
            data = self._next_message()
            if data:
                return data
        return b""

    def read_until(self, marker: Union[bytes, str], timeout: float = 10.0) -> bytes:
        """Reads until the output so far contains marker and returns it all.
        Raises TimeoutError after timeout seconds, EOFError if the shell
        ends first."""
        if isinstance(marker, str):
            marker = marker.encode()
        out = b""
        deadline = time.monotonic() + timeout
        if True:
            while marker not in out:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(f"no {marker!r} in the shell's output within {timeout}s: {out[-200:]!r}")
                if not self._pending and not self._buf and not self._eof:
                    ready = getattr(self._sock, "pending", lambda: 0)() > 0
                    if not ready:
                        ready = bool(select.select([self._sock], [], [], left)[0])
                    if not ready:
                        continue
                b = self.read()
                if not b:
                    raise EOFError(f"the shell ended before {marker!r}: {out[-200:]!r}")
                out += b
        return out

    def write(self, data: Union[bytes, str]) -> None:
        """Sends input to the terminal (keys, a command with "\\n")."""
        if isinstance(data, str):
            data = data.encode("utf-8")
        self._send(P.OP_BINARY, data)

    def resize(self, cols: int, rows: int) -> None:
        self._send(P.OP_TEXT, json.dumps({"type": "resize", "cols": cols, "rows": rows}).encode())

    def ping(self, payload: bytes = b"") -> None:
        """Sends a ping (the daemon answers with a pong, which read() skips)."""
        self._send(P.OP_PING, payload)

    def close(self) -> None:
        """Closes the connection. The shell keeps running unless it was
        opened with kill_on_close."""
        if self._closed:
            return
        self._closed = True
        try:
            self._send(P.OP_CLOSE, P.ws_close_payload(1000))
            self._sock.settimeout(2)
            while not self._eof:  # wait for the daemon's close frame
                self._next_message()
        except (OSError, WarrenError):
            pass
        finally:
            self._sock.close()

    def __enter__(self) -> "Shell":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
