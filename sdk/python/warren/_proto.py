"""The parts of the wire that do no I/O, shared by the sync and the asyncio
clients: requests as values, server-sent events, output chunks and
WebSocket frames (RFC 6455, client side)."""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import json
import os
import struct
from typing import Any, Callable, Dict, List, Optional, Tuple, Union
from urllib.parse import quote, urlencode

from ._errors import WarrenError, error_from_event

JSON = "application/json"
OCTETS = "application/octet-stream"
TAR = "application/x-tar"
EVENTS = "text/event-stream"

Body = Union[None, bytes, Any]  # bytes, or a binary file object (streamed)


@dataclasses.dataclass
class Req:
    """One call: everything a transport needs to send it."""
    method: str
    path: str  # escaped
    query: Optional[Dict[str, str]] = None
    body: Body = None
    content_type: str = ""
    accept: str = JSON

    def target(self, prefix: str) -> str:
        t = prefix + self.path
        if self.query:
            t += "?" + urlencode(self.query)
        return t


def json_req(method: str, path: str, body: Any = None, query: Optional[Dict[str, str]] = None,
             accept: str = JSON) -> Req:
    """A call whose body (if any) is JSON."""
    if body is None:
        return Req(method, path, query, accept=accept)
    return Req(method, path, query, json.dumps(body, separators=(",", ":")).encode(), JSON, accept)


def esc(segment: str) -> str:
    """A path segment, escaped (as Go's url.PathEscape)."""
    return quote(segment, safe="")


def session_path(sid: str, suffix: str = "") -> str:
    return "/v1/sessions/" + esc(sid) + suffix


def process_path(sid: str, pid: str, suffix: str = "") -> str:
    return session_path(sid, "/processes/" + esc(pid) + suffix)


def drop_none(d: Dict[str, Any]) -> Dict[str, Any]:
    return {k: v for k, v in d.items() if v is not None}


def exec_body(command: Union[str, List[str], None], argv: Optional[List[str]], stdin: Union[str, bytes, None],
              env: Optional[Dict[str, str]], cwd: Optional[str], timeout_ms: Optional[int],
              max_output_bytes: Optional[int]) -> Dict[str, Any]:
    """The body of an exec: a string is a shell command, a list an argv."""
    if isinstance(command, (list, tuple)):
        if argv is not None:
            raise TypeError("give the command as a string or a list, or argv=, not both")
        command, argv = None, list(command)
    if (command is None) == (argv is None):
        raise TypeError("give exactly one of command (a string) and argv (a list)")
    b: Dict[str, Any] = {"command": command, "argv": argv, "env": env, "cwd": cwd, "timeout_ms": timeout_ms,
                         "max_output_bytes": max_output_bytes}
    if isinstance(stdin, bytes):
        b["stdin_base64"] = base64.b64encode(stdin).decode()
    elif stdin is not None:
        b["stdin"] = stdin
    return drop_none(b)


def decode_chunk(data: str) -> Tuple[Dict[str, Any], bytes]:
    """An output event's data and its exact bytes (text, or base64 when they
    were not UTF-8)."""
    c = json.loads(data)
    if c.get("base64"):
        return c, base64.b64decode(c["base64"])
    return c, (c.get("text") or "").encode("utf-8")


@dataclasses.dataclass
class Event:
    name: str
    data: str
    id: str


class SSEParser:
    """Server-sent events from lines, as the HTML standard reads them: a
    comment starts with a colon, one space after "field:" is dropped, an
    empty line dispatches an event that has data, an event cut off by the
    end of the stream is dropped."""

    def __init__(self) -> None:
        self.last_id = ""
        self._name = ""
        self._data: List[str] = []
        self._has = False

    def feed(self, line: bytes) -> Optional[Event]:
        """Takes one line (with or without its line ending) and returns the
        event it completes, if any."""
        line = line.rstrip(b"\r\n")
        if not line:
            if not self._has:
                self._name = ""
                return None
            ev = Event(self._name or "message", "\n".join(self._data), self.last_id)
            self._name, self._data, self._has = "", [], False
            return ev
        if line[:1] == b":":
            return None
        field, sep, value = line.partition(b":")
        if sep and value[:1] == b" ":
            value = value[1:]
        v = value.decode("utf-8", "replace")
        if field == b"event":
            self._name = v
        elif field == b"data":
            self._data.append(v)
            self._has = True
        elif field == b"id" and "\x00" not in v:
            self.last_id = v
        return None


class ExecEvents:
    """Turns the events of a streamed exec into chunks and a final result."""

    def __init__(self) -> None:
        self.result: Optional[Dict[str, Any]] = None

    def handle(self, ev: Event) -> Optional[Tuple[str, bytes]]:
        """Returns (stream, bytes) for an output event; sets result on exit;
        raises the daemon's error on an error event."""
        if ev.name in ("stdout", "stderr"):
            _, b = decode_chunk(ev.data)
            return (ev.name, b) if b else None
        if ev.name == "exit":
            self.result = json.loads(ev.data)
        elif ev.name == "error":
            raise error_from_event(ev.data)
        return None


class OutputEvents:
    """Tracks a process's output stream: turns events into (kind, offset,
    next, stream, data, exit) tuples and remembers the offset to resume
    from."""

    def __init__(self, offset: int) -> None:
        self.pos = offset
        self.exited = False

    def handle(self, ev: Event) -> Optional[Dict[str, Any]]:
        if ev.name == "output":
            c, b = decode_chunk(ev.data)
            start = c.get("offset")
            if start is None:
                try:
                    start = int(ev.id) - len(b)
                except ValueError:
                    start = self.pos
            self.pos = start + len(b)
            return {"kind": "output", "offset": start, "next": self.pos, "stream": c.get("stream", "stdout"), "data": b}
        if ev.name == "gap":
            g = json.loads(ev.data)
            self.pos = max(self.pos, g["to"])
            return {"kind": "gap", "offset": g["from"], "next": self.pos}
        if ev.name == "exit":
            x = json.loads(ev.data)
            self.exited = True
            return {"kind": "exit", "offset": self.pos, "next": self.pos, "exit_code": x.get("exit_code"),
                    "signal": x.get("signal", "")}
        if ev.name == "error":
            raise error_from_event(ev.data)
        return None


def retry_backoff(attempt: int) -> float:
    """Seconds before reconnect attempt n (0-based) of a dropped stream."""
    return min(2.0, 0.05 * (2 ** attempt))


# WebSocket (RFC 6455), client side.

WS_GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
OP_CONT, OP_TEXT, OP_BINARY, OP_CLOSE, OP_PING, OP_PONG = 0x0, 0x1, 0x2, 0x8, 0x9, 0xA
MAX_WS_MESSAGE = 16 << 20  # a frame larger than this from the daemon is a broken peer


def ws_key() -> str:
    return base64.b64encode(os.urandom(16)).decode()


def ws_accept(key: str) -> str:
    return base64.b64encode(hashlib.sha1(key.encode() + WS_GUID).digest()).decode()


def ws_handshake(host: str, target: str, key: str, headers: Dict[str, str]) -> bytes:
    lines = [f"GET {target} HTTP/1.1", f"Host: {host}", "Upgrade: websocket", "Connection: Upgrade",
             f"Sec-WebSocket-Key: {key}", "Sec-WebSocket-Version: 13"]
    lines += [f"{k}: {v}" for k, v in headers.items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def parse_head(head: bytes) -> Tuple[int, Dict[str, str]]:
    """The status and headers (lower-cased names) of an HTTP response head."""
    lines = head.decode("iso-8859-1").split("\r\n")
    parts = lines[0].split(" ", 2)
    if len(parts) < 2 or not parts[0].startswith("HTTP/"):
        raise WarrenError(f"not an HTTP response: {lines[0][:100]!r}", code="unavailable")
    hdrs: Dict[str, str] = {}
    for ln in lines[1:]:
        if ":" in ln:
            k, v = ln.split(":", 1)
            hdrs[k.strip().lower()] = v.strip()
    return int(parts[1]), hdrs


class Headers(dict):
    """Lower-cased header names with a case-insensitive get."""

    def get(self, k, default=None):  # type: ignore[override]
        return super().get(k.lower(), default)


def mask(payload: bytes, key: bytes) -> bytes:
    """XOR payload with the 4-byte key repeated, in one big-integer
    operation (a byte loop would cost a second per few MiB)."""
    n = len(payload)
    if n == 0:
        return b""
    k = (key * (n // 4 + 1))[:n]
    return (int.from_bytes(payload, "big") ^ int.from_bytes(k, "big")).to_bytes(n, "big")


def ws_frame(opcode: int, payload: bytes, fin: bool = True) -> bytes:
    """A masked frame, as every frame from a client must be."""
    b0 = (0x80 if fin else 0) | opcode
    n = len(payload)
    if n < 126:
        head = struct.pack("!BB", b0, 0x80 | n)
    elif n < 1 << 16:
        head = struct.pack("!BBH", b0, 0x80 | 126, n)
    else:
        head = struct.pack("!BBQ", b0, 0x80 | 127, n)
    key = os.urandom(4)
    return head + key + mask(payload, key)


def ws_close_payload(code: int = 1000, reason: str = "") -> bytes:
    return struct.pack("!H", code) + reason.encode()[:120]


def ws_parse_header(b2: bytes) -> Tuple[bool, int, bool, int]:
    """fin, opcode, masked and the 7-bit length of a frame's first two bytes."""
    return bool(b2[0] & 0x80), b2[0] & 0x0F, bool(b2[1] & 0x80), b2[1] & 0x7F


def ws_ext_len(n7: int) -> int:
    """How many bytes of extended length follow."""
    return 2 if n7 == 126 else 8 if n7 == 127 else 0


def ws_length(n7: int, ext: bytes) -> int:
    if n7 == 126:
        return struct.unpack("!H", ext)[0]
    if n7 == 127:
        return struct.unpack("!Q", ext)[0]
    return n7


def shell_query(cols: int, rows: int, process: str, kill_on_close: bool) -> Dict[str, str]:
    q: Dict[str, str] = {}
    if process:
        q["process"] = process
    if cols:
        q["cols"] = str(cols)
    if rows:
        q["rows"] = str(rows)
    if kill_on_close:
        q["kill_on_close"] = "true"
    return q


class ShellState:
    """What the daemon told a shell connection in its text messages."""

    def __init__(self) -> None:
        self.process_id = ""
        self.exit_code: Optional[int] = None
        self.signal = ""

    def text(self, payload: bytes) -> None:
        try:
            m = json.loads(payload)
        except ValueError:
            return
        if not isinstance(m, dict):
            return
        t = m.get("type")
        if t == "process":
            self.process_id = m.get("id", "")
        elif t == "exit":
            self.exit_code = m.get("exit_code")
            self.signal = m.get("signal", "")
        elif t == "error":
            e = m.get("error") or {}
            raise error_from_event(json.dumps({"error": e}))


Parse = Callable[[Any], Any]
