"""Writes API.md, the Python SDK's API reference, from its docstrings.

    python3 tools/gen_api.py          # rewrite API.md
    python3 tools/gen_api.py --check  # exit 1 if API.md is stale

tests/test_docs.py runs the check, so a docstring changed without
regenerating fails the suite. Signatures are printed from the source's own
annotations (strings, under `from __future__ import annotations`), so the
output is the same on every Python version.
"""

import dataclasses
import inspect
import os
import sys

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, HERE)

import warren  # noqa: E402
from warren import _aio, _client  # noqa: E402

SECTIONS = [
    ("Synchronous client", [warren.Warren, _client.Sessions, warren.Session, warren.ExecStream, warren.Files,
                            warren.Processes, warren.Network, warren.Ports, warren.Shell, warren.Snapshots,
                            warren.Workspaces, warren.Images]),
    ("Asyncio client", [warren.AsyncWarren, _aio.AsyncSessions, warren.AsyncSession, warren.AsyncExecStream,
                        _aio.AsyncFiles, _aio.AsyncProcesses, _aio.AsyncNetwork, _aio.AsyncPorts, warren.AsyncShell,
                        _aio.AsyncSnapshots, _aio.AsyncWorkspaces, _aio.AsyncImages]),
    ("Results", [warren.SessionInfo, warren.Limits, warren.Usage, warren.ExecResult, warren.ExecChunk,
                 warren.FileEntry, warren.FileWritten, warren.Process, warren.ProcessEvent, warren.NetworkPolicy,
                 warren.NetworkDenial, warren.Port, warren.Snapshot, warren.Workspace, warren.WorkspaceMount,
                 warren.Image, warren.ImagePruneResult, warren.PullProgress, warren.Stats]),
    ("Errors", [warren.WarrenError, warren.InvalidArgument, warren.Unauthenticated, warren.PermissionDenied,
                warren.NotFound, warren.Conflict, warren.TooLarge, warren.ResourceExhausted, warren.RateLimited,
                warren.QuotaExceeded, warren.Unavailable, warren.Internal, warren.StreamInterrupted,
                warren.ConnectionFailed]),
]


def fmt_ann(a):
    if a is inspect.Parameter.empty:
        return ""
    a = a if isinstance(a, str) else getattr(a, "__name__", repr(a))
    return a.replace("'", "")


def signature(fn, skip_self=True):
    sig = inspect.signature(fn)
    parts, star = [], False
    for i, p in enumerate(sig.parameters.values()):
        if skip_self and i == 0 and p.name in ("self", "cls"):
            continue
        if p.kind == p.KEYWORD_ONLY and not star:
            parts.append("*")
            star = True
        s = ("*" if p.kind == p.VAR_POSITIONAL else "**" if p.kind == p.VAR_KEYWORD else "") + p.name
        if p.kind == p.VAR_POSITIONAL:
            star = True
        ann = fmt_ann(p.annotation)
        if ann:
            s += ": " + ann
        if p.default is not inspect.Parameter.empty:
            s += (" = " if ann else "=") + repr(p.default)
        parts.append(s)
    ret = fmt_ann(sig.return_annotation)
    return "(" + ", ".join(parts) + ")" + (" -> " + ret if ret else "")


def doc(obj):
    d = inspect.getdoc(obj) or ""
    return d.strip()


def sync_doc(cls, name):
    """An asyncio method without a docstring has its sync twin's."""
    twin = getattr(warren, cls.__name__.replace("Async", "", 1), None) or getattr(
        _client, cls.__name__.replace("Async", "", 1), None)
    m = getattr(twin, name, None) if twin else None
    return doc(m) if m else ""


def render():
    out = ["# warren Python SDK: API reference", "",
           "Generated from the docstrings by `tools/gen_api.py`; do not edit by hand. "
           "The shared design of the Go, Python and TypeScript clients is `docs/SDK.md` in the repository.", ""]
    for title, classes in SECTIONS:
        out += [f"## {title}", ""]
        for cls in classes:
            out.append(f"### `{cls.__name__}`")
            out.append("")
            if dataclasses.is_dataclass(cls):
                fields = ", ".join(f"{f.name}: {fmt_ann(f.type)}" for f in dataclasses.fields(cls))
                out += [f"`{cls.__name__}({fields})`", ""]
            d = doc(cls)
            if d and not (issubclass(cls, Exception) and d == doc(cls.__mro__[1])):
                out += [d, ""]
            for name, member in cls.__dict__.items():
                if name.startswith("_") and name not in ("__init__",):
                    continue
                if isinstance(member, property):
                    pd = doc(member)
                    out += [f"- **`{name}`** (property)" + (f": {pd}" if pd else "")]
                    continue
                if isinstance(member, (staticmethod, classmethod)):
                    member = member.__func__
                if not inspect.isfunction(member) or name == "from_dict" or name == "to_dict":
                    continue
                if name == "__init__":
                    if cls not in (warren.Warren, warren.AsyncWarren):
                        continue  # handles are made by the client, not by hand
                    out.append(f"- **`{cls.__name__}{signature(member)}`**")
                else:
                    prefix = "async " if inspect.iscoroutinefunction(member) or inspect.isasyncgenfunction(member) else ""
                    out.append(f"- **`{prefix}{name}{signature(member)}`**")
                md = doc(member) or sync_doc(cls, name)
                if md and name != "__init__":
                    out += ["", "  " + md.replace("\n", "\n  ")]
                out.append("")
            out.append("")
    return "\n".join(line.rstrip() for line in out).rstrip() + "\n"


def main():
    path = os.path.join(HERE, "API.md")
    text = render()
    if "--check" in sys.argv:
        with open(path, encoding="utf-8") as f:
            if f.read() != text:
                print("API.md is stale: run python3 tools/gen_api.py", file=sys.stderr)
                sys.exit(1)
        return
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)


if __name__ == "__main__":
    main()
