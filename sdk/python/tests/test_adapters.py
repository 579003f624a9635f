"""The framework adapters, with stand-ins of the frameworks' documented
classes (the real packages cannot be installed here: see
warren/adapters/README.md), invoked as the frameworks invoke them, against
a real session."""

import asyncio
import dataclasses
import json
import unittest
from typing import Any, Awaitable, Callable, Dict, Optional

import warren
from tests.support import KEY, URL, needs_daemon
from warren.adapters import langchain as lc
from warren.adapters import openai_agents as oa


@dataclasses.dataclass
class FunctionTool:
    """agents.FunctionTool's documented fields."""
    name: str
    description: str
    params_json_schema: Dict[str, Any]
    on_invoke_tool: Callable[[Any, str], Awaitable[Any]]
    strict_json_schema: bool = True


class StructuredTool:
    """langchain_core.tools.StructuredTool's documented constructor and calls."""

    def __init__(self, func, coroutine, name, description, args_schema):
        self.func, self.coroutine, self.name, self.description, self.args_schema = (
            func, coroutine, name, description, args_schema)

    @classmethod
    def from_function(cls, func: Optional[Callable] = None, coroutine: Optional[Callable] = None, name: str = "",
                      description: str = "", args_schema: Any = None, **kw: Any) -> "StructuredTool":
        return cls(func, coroutine, name, description, args_schema)

    def invoke(self, args: Dict[str, Any]) -> str:
        return self.func(**args)

    async def ainvoke(self, args: Dict[str, Any]) -> str:
        return await self.coroutine(**args)


def check_strict(tc: unittest.TestCase, schema: Dict[str, Any]) -> None:
    # OpenAI's strict mode: an object, every property required, no others.
    tc.assertEqual(schema["type"], "object")
    tc.assertIs(schema["additionalProperties"], False)
    tc.assertEqual(sorted(schema["required"]), sorted(schema["properties"]))


class SchemaTest(unittest.TestCase):
    def test_without_framework(self):
        try:
            import agents  # noqa: F401
        except ImportError:
            with self.assertRaises(ImportError) as cm:
                oa.tools(object())
            self.assertIn("pip install openai-agents", str(cm.exception))
        try:
            import langchain_core  # noqa: F401
        except ImportError:
            with self.assertRaises(ImportError):
                lc.tools(object())

    def test_schemas(self):
        for spec in oa.TOOLS:
            check_strict(self, spec.schema)

    def test_clip(self):
        from warren.adapters._tools import clip
        out = clip("a" * 50 + "b" * 50, 20)
        self.assertTrue(out.startswith("a" * 10) and out.endswith("b" * 10))
        self.assertIn("80 characters cut", out)


@needs_daemon
class AdapterTest(unittest.TestCase):
    def test_openai_agents(self):
        async def main():
            async with warren.AsyncWarren(URL, KEY) as w:
                async with oa.WarrenSandbox(w, function_tool=FunctionTool, labels={"by": "agents"}) as sb:
                    tools = {t.name: t for t in sb.tools()}
                    self.assertEqual(set(tools), {"warren_exec", "warren_read_file", "warren_write_file",
                                                  "warren_list_files"})
                    for t in tools.values():
                        self.assertTrue(t.strict_json_schema)
                        check_strict(self, t.params_json_schema)
                    call = lambda name, **a: tools[name].on_invoke_tool(None, json.dumps(a))
                    self.assertEqual(await call("warren_write_file", path="hi.py", content="print(6*7)\n"),
                                     "wrote 11 bytes to hi.py")
                    out = await call("warren_exec", command="python3 hi.py; echo oops >&2; exit 3", timeout_ms=None)
                    self.assertEqual(out, "exit_code: 3\nstdout:\n42\nstderr:\noops")
                    self.assertEqual(await call("warren_read_file", path="hi.py"), "print(6*7)\n")
                    self.assertIn("file\t11\thi.py", await call("warren_list_files", path=None))
                    err = await call("warren_read_file", path="/nope")
                    self.assertTrue(err.startswith("error (not_found):"), err)
                    sid = sb.session.id
                with self.assertRaises(warren.NotFound):
                    await w.sessions.get(sid)
        asyncio.run(main())

    def test_langchain_sync(self):
        with warren.Warren(URL, KEY) as w, w.sessions.create() as s:
            tools = {t.name: t for t in lc.tools(s, structured_tool=StructuredTool)}
            for t in tools.values():
                check_strict(self, t.args_schema)
            tools["warren_write_file"].invoke({"path": "a.txt", "content": "x"})
            self.assertEqual(tools["warren_exec"].invoke({"command": "cat a.txt", "timeout_ms": 5000}),
                             "exit_code: 0\nstdout:\nx")
            self.assertEqual(tools["warren_read_file"].invoke({"path": "a.txt"}), "x")

    def test_langchain_async(self):
        async def main():
            async with warren.AsyncWarren(URL, KEY) as w:
                async with await w.sessions.create() as s:
                    tools = {t.name: t for t in lc.tools(s, structured_tool=StructuredTool)}
                    self.assertEqual(await tools["warren_exec"].ainvoke({"command": "echo hi", "timeout_ms": None}),
                                     "exit_code: 0\nstdout:\nhi")
                    with self.assertRaises(RuntimeError):
                        tools["warren_exec"].invoke({"command": "true", "timeout_ms": None})
        asyncio.run(main())


if __name__ == "__main__":
    unittest.main()
