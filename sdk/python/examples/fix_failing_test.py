"""Let an agent fix a failing test in a repo.

A small repository goes into a session, its tests run and fail, the
"agent" reads the failure, patches the code and runs the tests again until
they pass. The agent here is a few lines of rules so that the example runs
without a model; the loop (write files, run tests, read output, edit) is
the one an LLM agent drives through the same calls, or through
warren.adapters.

    WARREN_URL=... WARREN_API_KEY=... python3 examples/fix_failing_test.py
"""

import re

from warren import Warren

REPO = {
    "calc/__init__.py": "",
    "calc/ops.py": "def add(a, b):\n    return a - b\n\n\ndef mul(a, b):\n    return a * b\n",
    "tests/__init__.py": "",
    "tests/test_ops.py": (
        "import unittest\n"
        "from calc.ops import add, mul\n\n\n"
        "class OpsTest(unittest.TestCase):\n"
        "    def test_add(self):\n"
        "        self.assertEqual(add(2, 3), 5)\n\n"
        "    def test_mul(self):\n"
        "        self.assertEqual(mul(2, 3), 6)\n"
    ),
}


def propose_fix(source: str, failure: str) -> str:
    """The agent's move: from a failed assertion on add, fix the operator."""
    if "test_add" in failure and "return a - b" in source:
        return source.replace("return a - b", "return a + b")
    raise RuntimeError("no idea how to fix:\n" + failure)


def main(w: Warren) -> int:
    """Returns how many fixes it took."""
    with w.sessions.create(labels={"example": "fix-failing-test"}) as s:
        s.files.mkdir("repo")
        for path, text in REPO.items():
            s.files.write("repo/" + path, text)
        s.exec("cd repo")  # the shell remembers it for every later call
        for attempt in range(3):
            # No bytecode cache: a fix of the same size written within the
            # same second as the first run would leave Python's cached
            # .pyc looking current, and the old code would run again.
            r = s.exec("python3 -m unittest -q 2>&1", env={"PYTHONDONTWRITEBYTECODE": "1"}, timeout_ms=60000)
            print(f"attempt {attempt}: exit {r.exit_code}")
            if r.ok:
                return attempt
            failing = re.findall(r"FAIL: (\w+)", r.stdout)
            print("failing:", failing)
            src = s.files.read_text("repo/calc/ops.py")
            s.files.write("repo/calc/ops.py", propose_fix(src, r.stdout))
        raise RuntimeError("the tests still fail")


if __name__ == "__main__":
    with Warren() as w:
        print("fixed in", main(w), "step(s)")
