"""warren as LangChain tools (``pip install langchain-core``).

``tools(session)`` returns ``langchain_core.tools.StructuredTool`` values
whose ``ainvoke`` runs in an AsyncSession, and whose ``invoke`` runs in a
sync Session::

    from warren import Warren
    from warren.adapters.langchain import tools

    with Warren() as w, w.sessions.create() as s:
        llm_with_tools = llm.bind_tools(tools(s))

Written against StructuredTool.from_function(func=, coroutine=, name=,
description=, args_schema=<JSON schema dict>) of langchain-core 0.3; see
README.md here for how it is tested.
"""

from __future__ import annotations

import asyncio
import inspect
from typing import Any, List, Optional

from ._tools import TOOLS, ToolSpec, invoke


def _structured_tool_class():
    try:
        from langchain_core.tools import StructuredTool  # type: ignore[import-not-found]
    except ImportError as e:
        raise ImportError("warren.adapters.langchain needs LangChain: pip install langchain-core") from e
    return StructuredTool


class _SyncAsAsync:
    """Runs a sync Session's calls as coroutines, so that one tool body
    serves both kinds of session."""

    def __init__(self, target: Any) -> None:
        self._t = target

    def __getattr__(self, name: str) -> Any:
        v = getattr(self._t, name)
        if callable(v):
            async def call(*a: Any, **kw: Any) -> Any:
                return v(*a, **kw)
            return call
        return _SyncAsAsync(v) if hasattr(v, "_w") else v


def tools(session, *, structured_tool: Optional[type] = None) -> List[Any]:
    """StructuredTool values for exec, read, write and list in session (a
    Session or an AsyncSession). structured_tool replaces LangChain's class
    (tests)."""
    cls = structured_tool or _structured_tool_class()
    is_async = inspect.iscoroutinefunction(session.exec)

    def make(spec: ToolSpec):
        async def coroutine(**kw: Any) -> str:
            s = session if is_async else _SyncAsAsync(session)
            return await invoke(spec, s, kw)

        def func(**kw: Any) -> str:
            if is_async:
                raise RuntimeError(f"{spec.name} runs in an AsyncSession: call it with ainvoke")
            return asyncio.run(coroutine(**kw))
        return cls.from_function(func=func, coroutine=coroutine, name=spec.name, description=spec.description,
                                 args_schema=spec.schema)
    return [make(s) for s in TOOLS]
