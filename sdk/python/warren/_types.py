"""Typed results: dataclasses of the daemon's JSON answers (api/openapi.yaml)."""

from __future__ import annotations

import base64
import dataclasses
import datetime as _dt
import re
from typing import Any, Dict, List, Optional

__all__ = [
    "Limits", "Usage", "SessionInfo", "ExecResult", "ExecChunk", "FileEntry", "FileWritten",
    "Process", "ProcessEvent", "NetworkPolicy", "NetworkDenial", "Port", "Snapshot",
    "Workspace", "WorkspaceMount", "Image", "ImagePruneResult", "PullProgress", "Stats",
]

_RFC3339 = re.compile(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d+))?(Z|[+-]\d\d:\d\d)?$")


def parse_time(v: Optional[str]) -> Optional[_dt.datetime]:
    """An RFC 3339 time as Go writes it (nanoseconds, "Z"), which
    datetime.fromisoformat of Python 3.9 does not take."""
    if not v:
        return None
    m = _RFC3339.match(v)
    if not m:
        raise ValueError(f"not an RFC 3339 time: {v!r}")
    base, frac, tz = m.groups()
    s = base + ("." + (frac + "000000")[:6] if frac else "")
    if tz in (None, "Z"):
        tz = "+00:00"
    return _dt.datetime.fromisoformat(s + tz)


_NAMES: Dict[type, frozenset] = {}


def _fields(cls, d: Dict[str, Any], times=(), nested=None) -> Dict[str, Any]:
    names = _NAMES.get(cls)
    if names is None:  # dataclasses.fields costs more than the rest of a decode
        names = _NAMES[cls] = frozenset(f.name for f in dataclasses.fields(cls))
    out: Dict[str, Any] = {}
    for k, v in d.items():
        if k not in names:
            continue  # a field of a newer daemon
        if k in times:
            v = parse_time(v)
        elif nested and k in nested and v is not None:
            v = nested[k](v)
        out[k] = v
    return out


@dataclasses.dataclass
class Limits:
    """A session's hard limits; 0 takes the daemon's default."""
    memory_mb: int = 0
    cpus: float = 0.0
    pids: int = 0
    disk_mb: int = 0

    @classmethod
    def from_dict(cls, d: Dict[str, Any]) -> "Limits":
        return cls(**_fields(cls, d))

    def to_dict(self) -> Dict[str, Any]:
        return {k: v for k, v in dataclasses.asdict(self).items() if v}


@dataclasses.dataclass
class Usage:
    """A session's live resource use."""
    memory_bytes: int = 0
    pids: int = 0
    cpu_seconds: float = 0.0
    disk_bytes: int = 0

    @classmethod
    def from_dict(cls, d: Dict[str, Any]) -> "Usage":
        return cls(**_fields(cls, d))


@dataclasses.dataclass
class SessionInfo:
    """What the daemon says of a session (GET /v1/sessions/{id})."""
    id: str
    image: str = ""
    state: str = ""
    created_at: Optional[_dt.datetime] = None
    last_used_at: Optional[_dt.datetime] = None
    expires_at: Optional[_dt.datetime] = None
    cwd: str = ""
    limits: Limits = dataclasses.field(default_factory=Limits)
    network: str = ""
    labels: Dict[str, str] = dataclasses.field(default_factory=dict)
    user: str = ""
    usage: Optional[Usage] = None
    reason: str = ""
    tenant: str = ""
    #: In a fleet's lists, the node that holds the session.
    node: str = ""

    @classmethod
    def from_dict(cls, d: Dict[str, Any]) -> "SessionInfo":
        f = _fields(cls, d, times=("created_at", "last_used_at", "expires_at"),
                    nested={"limits": Limits.from_dict, "usage": Usage.from_dict})
        f["labels"] = f.get("labels") or {}
        return cls(**f)


def _b64_or_text(text: str, b64: str) -> bytes:
    return base64.b64decode(b64) if b64 else text.encode("utf-8")


@dataclasses.dataclass
class ExecResult:
    """The outcome of a command. ``stdout`` and ``stderr`` are text (with
    U+FFFD for bytes that are not UTF-8); ``stdout_bytes`` and
    ``stderr_bytes`` are exact. A command that fails is not an exception:
    see ``exit_code`` and ``ok``."""
    stdout: str = ""
    stderr: str = ""
    exit_code: int = 0
    signal: str = ""
    duration_ms: float = 0.0
    timed_out: bool = False
    truncated: bool = False
    shell_restarted: bool = False
    oom_killed: bool = False
    stdout_base64: str = ""
    stderr_base64: str = ""

    @classmethod
    def from_dict(cls, d: Dict[str, Any]) -> "ExecResult":
        return cls(**_fields(cls, d))

    @property
    def ok(self) -> bool:
        """The command exited 0, in time."""
        return self.exit_code == 0 and not self.timed_out and not self.signal

    @property
    def stdout_bytes(self) -> bytes:
        return _b64_or_text(self.stdout, self.stdout_base64)

    @property
    def stderr_bytes(self) -> bytes:
        return _b64_or_text(self.stderr, self.stderr_base64)


@dataclasses.dataclass
class ExecChunk:
    """A piece of a streamed command's output, exact bytes."""
    stream: str  # "stdout" or "stderr"
    data: bytes

    @property
    def text(self) -> str:
        return self.data.decode("utf-8", "replace")


@dataclasses.dataclass
class FileEntry:
    """A file, directory or symlink in a session. ``type`` is file, dir,
    symlink or other; ``mode`` the permission bits in octal ("0644")."""
    name: str = ""
    path: str = ""
    type: str = ""
    size: int = 0
    mode: str = ""
    mtime: Optional[_dt.datetime] = None
    target: str = ""

    @classmethod
    def from_dict(cls, d: Dict[str, Any]) -> "FileEntry":
        return cls(**_fields(cls, d, times=("mtime",)))

    @property
    def is_dir(self) -> bool:
        return self.type == "dir"


@dataclasses.dataclass
class FileWritten:
    """What a write or an upload stored."""
    path: str = ""
    size: int = 0

    @classmethod
    def from_dict(cls, d: Dict[str, Any]) -> "FileWritten":
        return cls(**_fields(cls, d))


@dataclasses.dataclass
class Process:
    """A process started with processes.start. ``state`` is running or
    exited; ``output_bytes`` is the offset the next byte of output will
    have, ``output_start`` the oldest still kept."""
    id: str
    command: str = ""
    argv: List[str] = dataclasses.field(default_factory=list)
    tty: bool = False
    state: str = ""
    pid: int = 0
    exit_code: Optional[int] = None
    signal: str = ""
    started_at: Optional[_dt.datetime] = None
    ended_at: Optional[_dt.datetime] = None
    output_bytes: int = 0
    output_start: int = 0

    @classmethod
    def from_dict(cls, d: Dict[str, Any]) -> "Process":
        f = _fields(cls, d, times=("started_at", "ended_at"))
        f["argv"] = f.get("argv") or []
        return cls(**f)

    @property
    def running(self) -> bool:
        return self.state == "running"


@dataclasses.dataclass
class ProcessEvent:
    """One event of a process's output. ``kind`` is "output" (``data``,
    from ``stream``), "gap" (bytes ``offset`` to ``next`` were dropped from
    the daemon's bounded buffer before they were read) or "exit" (the last:
    ``exit_code``, ``signal``). ``next`` is where reading resumes."""
    kind: str
    offset: int
    next: int
    stream: str = ""
    data: bytes = b""
    exit_code: Optional[int] = None
    signal: str = ""

    @property
    def text(self) -> str:
        return self.data.decode("utf-8", "replace")


@dataclasses.dataclass
class NetworkPolicy:
    """A session's egress: ``mode`` none, open or allowlist; ``allow`` and
    ``deny`` rules (docs/NETWORKING.md)."""
    mode: str = ""
    allow: List[str] = dataclasses.field(default_factory=list)
    deny: List[str] = dataclasses.field(default_factory=list)

    @classmethod
    def from_dict(cls, d: Any) -> "NetworkPolicy":
        if isinstance(d, str):
            return cls(mode=d)
        return cls(mode=d.get("mode", ""), allow=list(d.get("allow") or []), deny=list(d.get("deny") or []))

    def to_dict(self) -> Dict[str, Any]:
        out: Dict[str, Any] = {}
        if self.mode:
            out["mode"] = self.mode
        if self.allow:
            out["allow"] = list(self.allow)
        if self.deny:
            out["deny"] = list(self.deny)
        return out


@dataclasses.dataclass
class NetworkDenial:
    """A connection or a DNS name the policy refused."""
    time: Optional[_dt.datetime] = None
    host: str = ""
    port: int = 0
    proto: str = ""
    reason: str = ""

    @classmethod
    def from_dict(cls, d: Dict[str, Any]) -> "NetworkDenial":
        return cls(**_fields(cls, d, times=("time",)))


@dataclasses.dataclass
class Port:
    """A TCP port of a session: what listens on it, and where the daemon
    serves it (``path``, ``preview_host``)."""
    port: int
    addresses: List[str] = dataclasses.field(default_factory=list)
    loopback_only: bool = False
    public: bool = False
    path: str = ""
    preview_host: str = ""

    @classmethod
    def from_dict(cls, d: Dict[str, Any]) -> "Port":
        f = _fields(cls, d)
        f["addresses"] = f.get("addresses") or []
        return cls(**f)


@dataclasses.dataclass
class Snapshot:
    """A session's files frozen into a layer new sessions start from."""
    name: str
    image: str = ""
    image_digest: str = ""
    session: str = ""
    size_bytes: int = 0
    created_at: Optional[_dt.datetime] = None
    auto_delete: bool = False
    used_by: List[str] = dataclasses.field(default_factory=list)

    @classmethod
    def from_dict(cls, d: Dict[str, Any]) -> "Snapshot":
        f = _fields(cls, d, times=("created_at",))
        f["used_by"] = f.get("used_by") or []
        return cls(**f)


@dataclasses.dataclass
class WorkspaceMount:
    session: str = ""
    mode: str = ""


@dataclasses.dataclass
class Workspace:
    """A named directory that outlives sessions, mounted at /workspace."""
    name: str
    size_mb: int = 0
    shared: bool = False
    used_bytes: int = 0
    created_at: Optional[_dt.datetime] = None
    mounted_by: List[WorkspaceMount] = dataclasses.field(default_factory=list)

    @classmethod
    def from_dict(cls, d: Dict[str, Any]) -> "Workspace":
        f = _fields(cls, d, times=("created_at",))
        f["mounted_by"] = [WorkspaceMount(**m) for m in (f.get("mounted_by") or [])]
        return cls(**f)


@dataclasses.dataclass
class Image:
    """A stored root filesystem that sessions start from."""
    name: str
    digest: str = ""
    size: int = 0
    created_at: Optional[_dt.datetime] = None
    source: str = ""
    repo_digest: str = ""
    image_id: str = ""
    platform: str = ""
    layers: int = 0
    env: List[str] = dataclasses.field(default_factory=list)
    working_dir: str = ""
    user: str = ""
    entrypoint: List[str] = dataclasses.field(default_factory=list)
    cmd: List[str] = dataclasses.field(default_factory=list)

    @classmethod
    def from_dict(cls, d: Dict[str, Any]) -> "Image":
        f = _fields(cls, d, times=("created_at",))
        for k in ("env", "entrypoint", "cmd"):
            f[k] = f.get(k) or []
        return cls(**f)


@dataclasses.dataclass
class ImagePruneResult:
    deleted: List[str] = dataclasses.field(default_factory=list)
    reclaimed_bytes: int = 0

    @classmethod
    def from_dict(cls, d: Dict[str, Any]) -> "ImagePruneResult":
        return cls(deleted=list(d.get("deleted") or []), reclaimed_bytes=d.get("reclaimed_bytes", 0))


@dataclasses.dataclass
class PullProgress:
    """One step of an image pull."""
    status: str = ""
    layer: int = 0
    layers: int = 0
    digest: str = ""
    current: int = 0
    total: int = 0

    @classmethod
    def from_dict(cls, d: Dict[str, Any]) -> "PullProgress":
        return cls(**_fields(cls, d))


@dataclasses.dataclass
class Stats:
    sessions: int = 0
    max_sessions: int = 0
    cgroup_mode: str = ""
    version: str = ""

    @classmethod
    def from_dict(cls, d: Dict[str, Any]) -> "Stats":
        return cls(**_fields(cls, d))
