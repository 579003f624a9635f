"""warren: the Python client of the warren sandbox daemon.

A synchronous client, ``Warren``, and an asyncio one, ``AsyncWarren``, with
the same nouns and verbs (docs/SDK.md in the warren repository)::

    from warren import Warren

    with Warren("http://127.0.0.1:7433", key) as w:
        with w.sessions.create() as s:          # deleted at the end of the block
            print(s.exec("echo hi").stdout)

Errors the daemon answers are exceptions of one class per error code
(NotFound, RateLimited, QuotaExceeded, ...), all WarrenError. The package
uses the standard library only.
"""

from ._errors import (Conflict, Internal, InvalidArgument, NotFound, PermissionDenied, QuotaExceeded,
                      RateLimited, ResourceExhausted, StreamInterrupted, TooLarge, Unauthenticated, Unavailable,
                      WarrenError)
from ._http import ConnectionFailed
from ._types import (ExecChunk, ExecResult, FileEntry, FileWritten, Image, ImagePruneResult, Limits, NetworkDenial,
                     NetworkPolicy, Port, Process, ProcessEvent, PullProgress, SessionInfo, Snapshot, Stats, Usage,
                     Workspace, WorkspaceMount)
from ._client import (ExecStream, Files, Images, Network, Ports, Processes, Session, Sessions, Shell, Snapshots,
                      Warren, Workspaces)
from ._aio import AsyncWarren, AsyncSession, AsyncShell, AsyncExecStream

__version__ = "0.1.0"

__all__ = [
    "Warren", "AsyncWarren", "Session", "AsyncSession", "Sessions", "Files", "Processes", "Network", "Ports",
    "Snapshots", "Workspaces", "Images", "ExecStream", "AsyncExecStream", "Shell", "AsyncShell",
    "WarrenError", "InvalidArgument", "Unauthenticated", "PermissionDenied", "NotFound", "Conflict", "TooLarge",
    "ResourceExhausted", "RateLimited", "QuotaExceeded", "Unavailable", "Internal", "StreamInterrupted",
    "ConnectionFailed",
    "ExecChunk", "ExecResult", "FileEntry", "FileWritten", "Image", "ImagePruneResult", "Limits", "NetworkDenial",
    "NetworkPolicy", "Port", "Process", "ProcessEvent", "PullProgress", "SessionInfo", "Snapshot", "Stats", "Usage",
    "Workspace", "WorkspaceMount",
]
