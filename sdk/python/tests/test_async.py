"""Every method of the asyncio client, against the daemon."""

import asyncio
import io
import os
import tarfile
import tempfile
import time
import unittest
import urllib.request

import warren
from tests.support import KEY, URL, needs_daemon, uid


def run(coro):
    return asyncio.run(coro)


@needs_daemon
class AsyncTest(unittest.TestCase):
    def test_sessions_and_exec(self):
        async def main():
            async with warren.AsyncWarren(URL, KEY, timeout=60) as w:
                sid = uid("as")
                async with await w.sessions.create(id=sid, env={"A": "b"}, ttl_seconds=300) as s:
                    self.assertEqual((await w.sessions.create(id=sid)).id, sid)
                    self.assertIn(sid, [x.id for x in await w.sessions.list()])
                    self.assertEqual((await w.sessions.get(sid)).id, sid)
                    info = await s.refresh()
                    self.assertIsNotNone(info.usage)
                    await asyncio.sleep(0.05)
                    self.assertGreater((await s.renew()).expires_at, info.expires_at)
                    self.assertTrue(290 < await s.ttl() <= 300)
                    await s.exec("cd /tmp; V=7")
                    r = await s.exec("pwd; echo $V$A")
                    self.assertEqual(r.stdout, "/tmp\n7b\n")
                    r = await s.exec(["sh", "-c", "cat; exit 5"], stdin=b"\xff")
                    self.assertEqual((r.stdout_bytes, r.exit_code), (b"\xff", 5))
                    st = s.exec_stream("echo a; sleep 0.05; echo b >&2")
                    chunks = [c async for c in st]
                    self.assertEqual([(c.stream, c.data) for c in chunks], [("stdout", b"a\n"), ("stderr", b"b\n")])
                    self.assertEqual(st.result.exit_code, 0)
                    self.assertEqual((await s.exec_stream(["false"]).wait()).exit_code, 1)
                with self.assertRaises(warren.NotFound):
                    await w.sessions.get(sid)
                other = await w.sessions.create()
                await w.sessions.delete(other.id)
                with self.assertRaises(warren.NotFound):
                    await other.delete()
                self.assertEqual((await w.run("echo once")).stdout, "once\n")
                self.assertIsInstance((await w.stats()).max_sessions, int)
                await w.health()
        run(main())

    def test_exec_stream_cancel(self):
        async def main():
            async with warren.AsyncWarren(URL, KEY) as w, await w.sessions.create() as s:
                marker = "/tmp/" + uid("m")
                async with s.exec_stream(f"echo start; sleep 1.5; touch {marker}") as st:
                    async for c in st:
                        self.assertEqual(c.text, "start\n")
                        break
                await asyncio.sleep(2)
                self.assertFalse(await s.files.exists(marker), "the abandoned command ran on")
                self.assertIsNone(st.result)
        run(main())

    def test_files(self):
        async def main():
            async with warren.AsyncWarren(URL, KEY) as w, await w.sessions.create() as s:
                f = s.files
                await f.mkdir("/tmp/d/e")
                await f.write("/tmp/d/t.txt", "text", mode=0o600)
                self.assertEqual((await f.stat("/tmp/d/t.txt")).mode, "0600")
                self.assertEqual(await f.read_text("/tmp/d/t.txt"), "text")
                self.assertEqual(sorted(e.name for e in await f.list("/tmp/d")), ["e", "t.txt"])
                self.assertTrue(await f.exists("/tmp/d/t.txt"))
                await f.remove("/tmp/d/t.txt")
                self.assertFalse(await f.exists("/tmp/d/t.txt"))
                with tempfile.TemporaryDirectory() as tmp:
                    big = os.path.join(tmp, "big")
                    data = os.urandom(5 << 20)
                    with open(big, "wb") as fh:
                        fh.write(data)
                    self.assertEqual((await f.upload(big, "/tmp/big")).size, len(data))
                    self.assertEqual(await f.read("/tmp/big"), data)
                    back = os.path.join(tmp, "back")
                    self.assertEqual(await f.download("/tmp/big", back), len(data))
                    r, wfd = os.pipe()
                    os.write(wfd, b"chunked")
                    os.close(wfd)
                    with os.fdopen(r, "rb") as pipe:
                        self.assertEqual((await f.write("/tmp/p", pipe)).size, 7)
                    src = os.path.join(tmp, "tree")
                    os.makedirs(os.path.join(src, "x"))
                    with open(os.path.join(src, "x", "y"), "w") as fh:
                        fh.write("deep")
                    await f.upload_dir(src, "/tmp/tree")
                    self.assertEqual(await f.read_text("/tmp/tree/x/y"), "deep")
                    out = os.path.join(tmp, "out")
                    self.assertGreaterEqual(await f.download_dir("/tmp/tree", out), 2)
                    with open(os.path.join(out, "x", "y")) as fh:
                        self.assertEqual(fh.read(), "deep")
                await f.remove("/tmp/d", recursive=True)
        run(main())

    def test_processes_and_shell(self):
        async def main():
            async with warren.AsyncWarren(URL, KEY) as w, await w.sessions.create() as s:
                ps = s.processes
                p = await ps.start("read x; echo $x-back", stdin=True)
                self.assertEqual(await ps.write_stdin(p.id, b"ping\n", eof=True), 5)
                ev = await ps.wait(p.id)
                self.assertEqual(ev.exit_code, 0)
                self.assertEqual(b"".join([e.data async for e in ps.logs(p.id)]), b"ping-back\n")
                self.assertIn(p.id, [x.id for x in await ps.list()])
                self.assertEqual((await ps.get(p.id)).state, "exited")
                q = await ps.start(["sleep", "30"])
                await ps.signal(q.id, 9)
                self.assertEqual((await ps.wait(q.id)).signal, "SIGKILL")
                t = await ps.start("sleep 30", tty=True)
                await ps.resize(t.id, 90, 20)
                await ps.kill(t.id)
                with self.assertRaises(warren.NotFound):
                    await ps.get(t.id)
                sh = await s.shell(cols=90, rows=20)
                async with sh:
                    self.assertTrue(sh.process_id)
                    await sh.write("stty size; echo done-$((3*3))\n")
                    self.assertIn(b"20 90", await sh.read_until("done-9"))
                    await sh.resize(100, 25)
                    await sh.write("exit 3\n")
                    rest = b"".join([c async for c in sh])
                    self.assertIsInstance(rest, bytes)
                    self.assertEqual(sh.exit_code, 3)
        run(main())

    def test_layers_network_ports(self):
        async def main():
            async with warren.AsyncWarren(URL, KEY) as w, await w.sessions.create() as s:
                await s.files.write("f.txt", "v")
                name = uid("asnap")
                self.assertEqual((await s.snapshot(name)).name, name)
                self.assertIn(name, [x.name for x in await w.snapshots.list()])
                self.assertEqual((await w.snapshots.get(name)).session, s.id)
                with tempfile.TemporaryDirectory() as tmp:
                    path = os.path.join(tmp, "s.zst")
                    self.assertGreater(await w.snapshots.export(name, path), 0)
                    name2 = uid("aimp")
                    await w.snapshots.import_(name2, path)
                    await w.snapshots.delete(name2)
                await w.snapshots.delete(name)
                forks = await s.fork(2)
                for f in forks:
                    async with f:
                        self.assertEqual(await f.files.read_text("f.txt"), "v")

                ws = uid("aws")
                self.assertEqual((await w.workspaces.create(ws)).name, ws)
                self.assertIn(ws, [x.name for x in await w.workspaces.list()])
                self.assertEqual((await w.workspaces.get(ws)).mounted_by, [])
                await w.workspaces.delete(ws)

                imgs = await w.images.list()
                self.assertEqual((await w.images.get(imgs[0].name)).name, imgs[0].name)
                buf = io.BytesIO()
                with tarfile.open(fileobj=buf, mode="w") as t:
                    ti = tarfile.TarInfo("bin/sh")
                    ti.size, ti.mode = 2, 0o755
                    t.addfile(ti, io.BytesIO(b"#!"))
                buf.seek(0)
                name = uid("aimg")
                self.assertEqual((await w.images.import_(name, buf)).name, name)
                await w.images.delete(name)
                self.assertIsInstance((await w.images.prune()).deleted, list)
                with self.assertRaises(warren.WarrenError):
                    await w.images.pull("127.0.0.1:1/none:x")

                self.assertEqual((await s.network.get()).mode, "none")
                with self.assertRaises(warren.Conflict):
                    await s.network.allow("example.com")
                with self.assertRaises(warren.Conflict):
                    await s.network.deny("1.2.3.4")
                with self.assertRaises(warren.Conflict):
                    await s.network.set("open")
                self.assertEqual(await s.network.denials(), [])

                p = await s.processes.start("exec python3 -m http.server 8124 --bind 127.0.0.1 --directory /tmp")
                deadline = time.time() + 15
                while not any(x.port == 8124 for x in await s.ports.list()):
                    self.assertLess(time.time(), deadline, "port 8124 never listened")
                    await asyncio.sleep(0.1)
                url = await s.ports.url(8124, token=True)
                self.assertIn("?token=wrt_", url)
                req = urllib.request.Request(await s.ports.url(8124), headers={"Authorization": "Bearer " + KEY})
                with urllib.request.urlopen(req, timeout=10) as r:
                    self.assertEqual(r.status, 200)
                with self.assertRaises(warren.PermissionDenied):
                    await s.ports.set_public(8124)  # the tenant does not allow public ports
                await s.processes.kill(p.id)
        run(main())


if __name__ == "__main__":
    unittest.main()
