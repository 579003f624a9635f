"""The tools every adapter offers, framework-free: a name, a description,
a strict JSON schema of the arguments, and an async function of a session
that runs it and returns text for the model."""

from __future__ import annotations

import dataclasses
from typing import Any, Awaitable, Callable, Dict, List

from .._errors import WarrenError

#: Output beyond this many characters is cut (from the middle) before it
#: reaches the model, whose context is the scarce resource.
MAX_TOOL_OUTPUT = 20000


@dataclasses.dataclass
class ToolSpec:
    name: str
    description: str
    schema: Dict[str, Any]
    run: Callable[[Any, Dict[str, Any]], Awaitable[str]]  # (AsyncSession, args) -> text


def _obj(props: Dict[str, Any]) -> Dict[str, Any]:
    # Strict mode (OpenAI): every property required, nothing else allowed;
    # optional ones take null.
    return {"type": "object", "properties": props, "required": list(props), "additionalProperties": False}


def clip(text: str, limit: int = MAX_TOOL_OUTPUT) -> str:
    if len(text) <= limit:
        return text
    half = limit // 2
    return text[:half] + f"\n[... {len(text) - limit} characters cut ...]\n" + text[-half:]


async def _exec(s, a: Dict[str, Any]) -> str:
    r = await s.exec(a["command"], timeout_ms=a.get("timeout_ms") or None)
    parts = [f"exit_code: {r.exit_code}" + (" (timed out)" if r.timed_out else "")]
    if r.stdout:
        parts.append("stdout:\n" + r.stdout.rstrip("\n"))
    if r.stderr:
        parts.append("stderr:\n" + r.stderr.rstrip("\n"))
    return clip("\n".join(parts))


async def _read(s, a: Dict[str, Any]) -> str:
    return clip(await s.files.read_text(a["path"]))


async def _write(s, a: Dict[str, Any]) -> str:
    w = await s.files.write(a["path"], a["content"])
    return f"wrote {w.size} bytes to {w.path}"


async def _list(s, a: Dict[str, Any]) -> str:
    entries = await s.files.list(a.get("path") or ".")
    return "\n".join(f"{e.type}\t{e.size}\t{e.name}" for e in entries) or "(empty)"


TOOLS: List[ToolSpec] = [
    ToolSpec("warren_exec",
             "Run a shell command in the sandbox's persistent bash (cd, variables and activated "
             "environments carry over between calls). Returns the exit code, stdout and stderr.",
             _obj({"command": {"type": "string", "description": "The shell command."},
                   "timeout_ms": {"type": ["integer", "null"], "description": "A time limit in milliseconds, or null."}}),
             _exec),
    ToolSpec("warren_read_file", "Read a text file in the sandbox.",
             _obj({"path": {"type": "string", "description": "Absolute, or relative to /workspace."}}), _read),
    ToolSpec("warren_write_file", "Write a text file in the sandbox, creating missing directories.",
             _obj({"path": {"type": "string"}, "content": {"type": "string"}}), _write),
    ToolSpec("warren_list_files", "List a directory in the sandbox: type, size and name per line.",
             _obj({"path": {"type": ["string", "null"], "description": "A directory; null for /workspace."}}), _list),
]


async def invoke(spec: ToolSpec, session, args: Dict[str, Any]) -> str:
    """Runs a tool; errors of the daemon go back to the model as text (it
    can correct a wrong path), anything else propagates."""
    try:
        return await spec.run(session, args)
    except WarrenError as e:
        return f"error ({e.code}): {e.message}"
