"""The docs run as written: the README's code, the examples, the generated
API reference is current, and the package builds into a wheel."""

import contextlib
import glob
import inspect
import io
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest
import zipfile

import warren
from tests.support import KEY, URL, needs_daemon

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run_py(code: str, timeout: float = 120) -> str:
    env = dict(os.environ, WARREN_URL=URL, WARREN_API_KEY=KEY, PYTHONPATH=HERE)
    p = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, timeout=timeout, text=True)
    if p.returncode != 0:
        raise AssertionError(f"exit {p.returncode}\n{p.stdout}\n{p.stderr}")
    return p.stdout


@needs_daemon
class ReadmeTest(unittest.TestCase):
    def blocks(self):
        with open(os.path.join(HERE, "README.md"), encoding="utf-8") as f:
            return re.findall(r"```python\n(.*?)```", f.read(), re.S)

    def test_quick_start(self):
        blocks = self.blocks()
        self.assertEqual(len(blocks), 2)
        out = run_py(blocks[0])
        self.assertIn("hello from /tmp\n 0", out)
        self.assertIn("42", out)
        self.assertIn("stdout 3", out)
        self.assertIn("exit", out)
        self.assertTrue(out.endswith("deleted\n"), out)
        self.assertIn("streamed", run_py(blocks[1]))


@needs_daemon
class ExamplesTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        sys.path.insert(0, os.path.join(HERE, "examples"))
        cls.w = warren.Warren(URL, KEY)

    @classmethod
    def tearDownClass(cls):
        sys.path.remove(os.path.join(HERE, "examples"))
        cls.w.close()

    def setUp(self):
        quiet = contextlib.redirect_stdout(io.StringIO())  # the examples narrate
        quiet.__enter__()
        self.addCleanup(quiet.__exit__, None, None, None)

    def test_fix_failing_test(self):
        import fix_failing_test
        self.assertEqual(fix_failing_test.main(self.w), 1)

    def test_serve_web_app(self):
        import serve_web_app
        self.assertEqual(serve_web_app.main(self.w), b'{"hello": "from warren", "path": "/api"}')

    def test_fork_best_of_five(self):
        import fork_best_of_five
        before = {s.id for s in self.w.sessions.list()}
        score, sid = fork_best_of_five.main(self.w)
        self.assertEqual(score, -2)  # 44 is the closest to 42 of 0, 11, 22, 33, 44
        self.assertEqual({s.id for s in self.w.sessions.list()} - before, {sid}, "only the best is kept")
        self.w.sessions.delete(sid)


class APIDocTest(unittest.TestCase):
    def test_current(self):
        p = subprocess.run([sys.executable, os.path.join(HERE, "tools", "gen_api.py"), "--check"],
                           capture_output=True, text=True)
        self.assertEqual(p.returncode, 0, p.stderr)


class WheelTest(unittest.TestCase):
    def builder(self):
        # An interpreter with setuptools and wheel (Debian: python3-setuptools,
        # python3-wheel); pyenv's may lack them while /usr/bin/python3 has them.
        for py in dict.fromkeys([sys.executable, "/usr/bin/python3"]):
            if os.path.exists(py) and subprocess.run([py, "-c", "import setuptools, wheel, pip"],
                                                     capture_output=True).returncode == 0:
                return py
        self.skipTest("building the wheel needs setuptools, wheel and pip in python3 "
                      "(Debian: apt install python3-setuptools python3-wheel python3-pip)")

    def test_wheel(self):
        py = self.builder()
        with tempfile.TemporaryDirectory() as tmp:
            src = os.path.join(tmp, "src")
            shutil.copytree(HERE, src, ignore=shutil.ignore_patterns("__pycache__", "build", "dist", "*.egg-info"))
            p = subprocess.run([py, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index",
                                "-w", os.path.join(tmp, "dist"), src], capture_output=True, text=True, timeout=300)
            self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
            whl, = glob.glob(os.path.join(tmp, "dist", "warren_sdk-*-py3-none-any.whl"))
            with zipfile.ZipFile(whl) as z:
                names = set(z.namelist())
                meta = z.read(next(n for n in names if n.endswith("METADATA"))).decode()
            for need in ("warren/__init__.py", "warren/py.typed", "warren/_aio.py", "warren/adapters/openai_agents.py"):
                self.assertIn(need, names)
            self.assertIn("Requires-Python: >=3.9", meta)
            self.assertNotIn("Requires-Dist: ", meta.split("Provides-Extra")[0], "no runtime dependency")


if __name__ == "__main__":
    unittest.main()


class SDKTableTest(unittest.TestCase):
    """docs/SDK.md is the contract between the three SDKs: every Python
    name in its tables exists, in the sync and the asyncio client."""

    NOUNS = {
        "warren": "Warren", "w": "Warren", "sessions": "Sessions", "session": "Session", "files": "Files",
        "processes": "Processes", "network": "Network", "ports": "Ports", "shell": "Shell",
        "snapshots": "Snapshots", "workspaces": "Workspaces", "images": "Images",
    }

    def python_cells(self):
        with open(os.path.join(HERE, "..", "..", "docs", "SDK.md"), encoding="utf-8") as f:
            lines = f.read().splitlines()
        col = None
        for ln in lines:
            if not ln.startswith("|"):
                col = None
                continue
            cells = [c.strip() for c in ln.strip("|").split("|")]
            if col is None:
                col = cells.index("Python") if "Python" in cells else -1
                continue
            if col >= 0 and col < len(cells) and not set(cells[col]) <= set("- "):
                yield cells[col]

    def test_names_exist(self):
        from warren import _aio, _client
        checked = 0
        for cell in self.python_cells():
            for span in re.findall(r"`([^`]+)`", cell):
                chain = re.match(r"([a-z_]+(?:\.[a-z_/]+)+)", span)
                if not chain:
                    continue
                parts = chain.group(1).split(".")
                noun, verbs = parts[-2], parts[-1].split("/")
                if noun not in self.NOUNS:
                    continue
                for verb in verbs:
                    for mod, prefix in ((_client, ""), (_aio, "Async")):
                        cls = getattr(mod, prefix + self.NOUNS[noun])
                        # Attributes the constructor sets count too (session.info).
                        init = inspect.getsource(cls.__init__)
                        has = hasattr(cls, verb) or re.search(r"self\.%s\b[^=]*=" % verb, init)
                        self.assertTrue(has, f"docs/SDK.md names {span!r}: no {cls.__name__}.{verb}")
                        checked += 1
        self.assertGreater(checked, 100)
