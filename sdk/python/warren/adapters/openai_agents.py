"""warren as a sandbox of the OpenAI Agents SDK (``pip install openai-agents``).

``tools(session)`` returns ``agents.FunctionTool`` values that run in an
AsyncSession; ``WarrenSandbox`` creates the session and deletes it after::

    from agents import Agent, Runner
    from warren import AsyncWarren
    from warren.adapters.openai_agents import WarrenSandbox

    async with AsyncWarren() as w, WarrenSandbox(w) as sandbox:
        agent = Agent(name="coder", instructions="Use the sandbox.", tools=sandbox.tools())
        result = await Runner.run(agent, "Write fizzbuzz.py and run it.")

Written against the SDK's documented FunctionTool (name, description,
params_json_schema, on_invoke_tool(ctx, args_json) -> awaitable,
strict_json_schema); see README.md here for how it is tested.
"""

from __future__ import annotations

import json
from typing import Any, List, Optional

from ._tools import TOOLS, ToolSpec, invoke


def _function_tool_class():
    try:
        from agents import FunctionTool  # type: ignore[import-not-found]
    except ImportError as e:
        raise ImportError("warren.adapters.openai_agents needs the OpenAI Agents SDK: pip install openai-agents") from e
    return FunctionTool


def tools(session, *, function_tool: Optional[type] = None) -> List[Any]:
    """FunctionTool values for exec, read, write and list in session (an
    AsyncSession). function_tool replaces agents.FunctionTool (tests)."""
    cls = function_tool or _function_tool_class()

    def make(spec: ToolSpec):
        async def on_invoke(ctx: Any, args_json: str) -> str:
            return await invoke(spec, session, json.loads(args_json or "{}"))
        return cls(name=spec.name, description=spec.description, params_json_schema=spec.schema,
                   on_invoke_tool=on_invoke, strict_json_schema=True)
    return [make(s) for s in TOOLS]


class WarrenSandbox:
    """A session for one agent run: created on enter, deleted on exit.
    ``create`` takes sessions.create's arguments (image, limits, network...)."""

    def __init__(self, client, *, function_tool: Optional[type] = None, **create: Any) -> None:
        self._client, self._create, self._cls = client, create, function_tool
        self.session = None

    async def __aenter__(self) -> "WarrenSandbox":
        self.session = await self._client.sessions.create(**self._create)
        return self

    async def __aexit__(self, *exc: Any) -> None:
        if self.session is not None:
            await self.session.__aexit__(*exc)

    def tools(self) -> List[Any]:
        if self.session is None:
            raise RuntimeError("enter the WarrenSandbox (async with) before asking for its tools")
        return tools(self.session, function_tool=self._cls)
