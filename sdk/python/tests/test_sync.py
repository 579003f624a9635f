"""Every method of the synchronous client, against the daemon."""

import hashlib
import http.cookiejar
import io
import os
import tempfile
import time
import unittest
import urllib.error
import urllib.request

import warren
from tests.support import KEY, URL, admin, needs_daemon, uid


def fetch(req, opener=None):
    with (opener.open if opener else urllib.request.urlopen)(req, timeout=10) as r:
        return r.read()


@needs_daemon
class SyncTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.w = warren.Warren(URL, KEY, timeout=60)
        cls.s = cls.w.sessions.create(labels={"suite": "sync"})

    @classmethod
    def tearDownClass(cls):
        cls.s.delete()
        cls.w.close()

    # sessions

    def test_sessions(self):
        sid = uid("sess")
        with self.w.sessions.create(id=sid, env={"GREETING": "hi"}, ttl_seconds=600, labels={"k": "v"}) as s:
            self.assertEqual((s.id, s.info.state, s.info.labels), (sid, "running", {"k": "v"}))
            again = self.w.sessions.create(id=sid)  # idempotent
            self.assertEqual(again.id, sid)
            with self.assertRaises(warren.Conflict):
                self.w.sessions.create(id=sid, env={"GREETING": "other"})
            self.assertEqual(self.w.sessions.get(sid).info.labels, {"k": "v"})
            self.assertIn(sid, [x.id for x in self.w.sessions.list()])
            self.assertEqual(s.exec("echo $GREETING").stdout, "hi\n")
            info = s.refresh()
            self.assertIsNotNone(info.usage)
            before = info.expires_at
            time.sleep(0.05)
            self.assertGreater(s.renew().expires_at, before)
            ttl = s.ttl()
            self.assertTrue(590 < ttl <= 600, ttl)
        with self.assertRaises(warren.NotFound):
            self.w.sessions.get(sid)

    def test_delete(self):
        s = self.w.sessions.create()
        self.w.sessions.delete(s.id)
        with self.assertRaises(warren.NotFound):
            s.refresh()

    def test_run(self):
        r = self.w.run("echo $((6*7))")
        self.assertEqual((r.stdout, r.exit_code, r.ok), ("42\n", 0, True))
        self.assertIsInstance(self.w.stats().sessions, int)
        self.w.health()

    # exec

    def test_exec(self):
        s = self.s
        s.exec("cd /tmp && export V=1 && f() { echo fn$1; }")
        r = s.exec("pwd; echo $V; f 2")
        self.assertEqual(r.stdout, "/tmp\n1\nfn2\n")
        r = s.exec(["sh", "-c", "printf '\\377'; echo e >&2; exit 4"])
        self.assertEqual((r.stdout_bytes, r.stderr, r.exit_code, r.ok), (b"\xff", "e\n", 4, False))
        self.assertEqual(s.exec("cat", stdin=b"\x00\x01").stdout_bytes, b"\x00\x01")
        self.assertEqual(s.exec("pwd", cwd="/", env={"X": "y"}).stdout, "/\n")
        r = s.exec("sleep 5", timeout_ms=200)
        self.assertTrue(r.timed_out)
        r = s.exec("head -c 5000 /dev/zero", max_output_bytes=100)
        self.assertTrue(r.truncated)

    def test_exec_stream(self):
        st = self.s.exec_stream("for i in 1 2 3; do echo out$i; sleep 0.05; done; echo err >&2; exit 2")
        chunks = list(st)
        self.assertEqual(b"".join(c.data for c in chunks if c.stream == "stdout"), b"out1\nout2\nout3\n")
        self.assertEqual([c.text for c in chunks if c.stream == "stderr"], ["err\n"])
        self.assertEqual(st.result.exit_code, 2)
        self.assertEqual(self.s.exec_stream(["true"]).wait().exit_code, 0)

    def test_exec_stream_cancel(self):
        # Leaving the loop early cancels the command with its connection.
        marker = "/tmp/" + uid("cancel")
        with self.s.exec_stream(f"echo start; sleep 3; touch {marker}") as st:
            for c in st:
                self.assertEqual(c.text, "start\n")
                break
        time.sleep(3.5)
        self.assertFalse(self.s.files.exists(marker), "the cancelled command ran on")
        self.assertEqual(self.s.exec("echo alive").stdout, "alive\n")

    # files

    def test_files(self):
        f = self.s.files
        d = "/tmp/" + uid("files")
        self.assertEqual(f.mkdir(d + "/sub").type, "dir")
        self.assertEqual(f.write(d + "/a.txt", "héllo").size, 6)
        self.assertEqual(f.read_text(d + "/a.txt"), "héllo")
        f.write(d + "/b.bin", b"\x00\xff", mode=0o755)
        st = f.stat(d + "/b.bin")
        self.assertEqual((st.size, st.mode, st.type, st.is_dir), (2, "0755", "file", False))
        self.assertEqual(f.read(d + "/b.bin"), b"\x00\xff")
        self.assertEqual(sorted(e.name for e in f.list(d)), ["a.txt", "b.bin", "sub"])
        self.assertTrue(f.exists(d + "/a.txt"))
        f.remove(d + "/a.txt")
        self.assertFalse(f.exists(d + "/a.txt"))
        with self.assertRaises(warren.NotFound):
            f.read(d + "/a.txt")
        f.remove(d, recursive=True)
        self.assertFalse(f.exists(d))

    def test_large_file_streamed(self):
        # 24 MiB from a file object, both ways, compared by digest.
        size = 24 << 20
        with tempfile.TemporaryDirectory() as tmp:
            src = os.path.join(tmp, "big")
            with open(src, "wb") as out:
                for _ in range(size // (1 << 20)):
                    out.write(os.urandom(1 << 20))
            self.assertEqual(self.s.files.upload(src, "/tmp/big").size, size)
            dst = os.path.join(tmp, "back")
            self.assertEqual(self.s.files.download("/tmp/big", dst), size)
            def digest(p):
                with open(p, "rb") as fh:
                    return hashlib.sha256(fh.read()).hexdigest()
            self.assertEqual(digest(src), digest(dst))
            with self.s.files.open("/tmp/big") as r:
                self.assertEqual(len(r.read(1000)), 1000)  # closed early: the connection is dropped
        # A pipe has no length: sent chunked.
        r, wfd = os.pipe()
        os.write(wfd, b"piped")
        os.close(wfd)
        with os.fdopen(r, "rb") as pipe:
            self.assertEqual(self.s.files.write("/tmp/piped", pipe).size, 5)
        self.s.files.remove("/tmp/big")

    def test_dirs_as_tar(self):
        with tempfile.TemporaryDirectory() as tmp:
            src = os.path.join(tmp, "src")
            os.makedirs(os.path.join(src, "pkg", "deep"))
            with open(os.path.join(src, "pkg", "deep", "x.py"), "w") as fh:
                fh.write("print(1)\n")
            with open(os.path.join(src, ".env"), "w") as fh:
                fh.write("A=1\n")
            d = "/tmp/" + uid("tree")
            self.s.files.upload_dir(src, d)
            self.assertEqual(self.s.files.read_text(d + "/pkg/deep/x.py"), "print(1)\n")
            self.s.exec(f"ln -s /etc/hostname {d}/link")
            back = os.path.join(tmp, "back")
            with self.assertRaises(ValueError):  # a link out of the destination
                self.s.files.download_dir(d, back)
            self.s.files.remove(d + "/link")
            self.assertGreaterEqual(self.s.files.download_dir(d, back), 4)
            with open(os.path.join(back, ".env")) as fh:
                self.assertEqual(fh.read(), "A=1\n")

    # processes

    def test_processes(self):
        ps = self.s.processes
        p = ps.start("read line; echo got:$line; sleep 0.2; echo bye >&2", stdin=True)
        self.assertEqual(p.state, "running")
        self.assertEqual(ps.write_stdin(p.id, "ping\n", eof=True), 5)
        ev = ps.wait(p.id)
        self.assertEqual((ev.kind, ev.exit_code), ("exit", 0))
        out = list(ps.logs(p.id))
        self.assertEqual(b"".join(e.data for e in out if e.kind == "output"), b"got:ping\nbye\n")
        self.assertEqual([e.stream for e in out if e.kind == "output"], ["stdout", "stderr"])
        tail = list(ps.logs(p.id, offset=4))
        self.assertEqual(tail[0].offset, 4)
        self.assertEqual(tail[0].data, b"ping\n")
        self.assertIn(p.id, [x.id for x in ps.list()])
        self.assertEqual(ps.get(p.id).exit_code, 0)

        q = ps.start(["sleep", "30"])
        ps.signal(q.id, "TERM")
        ev = ps.wait(q.id)
        self.assertEqual(ev.signal, "SIGTERM")
        t = ps.start("sleep 30", tty=True, cols=100, rows=30)
        ps.resize(t.id, 120, 40)
        ps.kill(t.id)
        with self.assertRaises(warren.NotFound):
            ps.get(t.id)

    # snapshots, fork, workspaces, images

    def test_snapshots_and_fork(self):
        src = self.w.sessions.create()
        with src:
            src.files.write("state.txt", "v1")
            name = uid("snap")
            snap = src.snapshot(name)
            self.assertEqual((snap.name, snap.session), (name, src.id))
            self.assertIn(name, [x.name for x in self.w.snapshots.list()])
            self.assertEqual(self.w.snapshots.get(name).name, name)
            with self.w.sessions.create(snapshot=name) as restored:
                self.assertEqual(restored.files.read_text("state.txt"), "v1")
                with self.assertRaises(warren.Conflict):
                    self.w.snapshots.delete(name)  # in use
            with tempfile.TemporaryDirectory() as tmp:
                path = os.path.join(tmp, "snap.tar.zst")
                self.assertGreater(self.w.snapshots.export(name, path), 0)
                name2 = uid("imported")
                self.assertEqual(self.w.snapshots.import_(name2, path).name, name2)
                self.w.snapshots.delete(name2)
            self.w.snapshots.delete(name)
            with self.assertRaises(warren.NotFound):
                self.w.snapshots.get(name)

            forks = src.fork(2)
            self.assertEqual(len(forks), 2)
            for f in forks:
                with f:
                    self.assertEqual(f.files.read_text("state.txt"), "v1")
            for f in forks:
                with self.assertRaises(warren.NotFound):
                    f.refresh()

    def test_workspaces(self):
        name = uid("ws")
        ws = self.w.workspaces.create(name, size_mb=64)
        self.assertEqual((ws.name, ws.size_mb, ws.shared), (name, 64, False))
        with self.w.sessions.create(workspace=name) as s:
            s.files.write("/workspace/kept.txt", "outlives")
            self.assertEqual([m.session for m in self.w.workspaces.get(name).mounted_by], [s.id])
            with self.assertRaises(warren.Conflict):
                self.w.workspaces.delete(name)
        with self.w.sessions.create(workspace=name) as s:
            self.assertEqual(s.files.read_text("/workspace/kept.txt"), "outlives")
        self.assertIn(name, [x.name for x in self.w.workspaces.list()])
        self.w.workspaces.delete(name)
        with self.assertRaises(warren.NotFound):
            self.w.workspaces.get(name)

    def test_images(self):
        imgs = self.w.images.list()
        self.assertTrue(imgs)
        self.assertEqual(self.w.images.get(imgs[0].name).digest, imgs[0].digest)
        import tarfile
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w:gz") as t:
            for path, data, mode in (("etc/motd", b"imported\n", 0o644), ("bin/sh", b"#!not a shell\n", 0o755)):
                ti = tarfile.TarInfo(path)
                ti.size, ti.mode = len(data), mode
                t.addfile(ti, io.BytesIO(data))
        buf.seek(0)
        name = uid("img")
        img = self.w.images.import_(name, buf)
        self.assertEqual(img.name, name)
        self.w.images.delete(name)
        with self.assertRaises(warren.NotFound):
            self.w.images.get(name)
        self.assertIsInstance(self.w.images.prune().reclaimed_bytes, int)
        # No registry is reachable from a test: the pull fails, classified.
        with self.assertRaises(warren.WarrenError) as cm:
            self.w.images.pull("127.0.0.1:1/nothing:here", on_progress=lambda p: None)
        self.assertIn(cm.exception.code, ("unavailable", "not_found", "invalid_argument"))

    # network and ports

    def test_network(self):
        self.assertEqual(self.s.network.get().mode, "none")
        with self.assertRaises(warren.Conflict):  # a session without a link keeps none
            self.s.network.set("open")
        self.assertEqual(self.s.network.denials(), [])
        try:
            s = self.w.sessions.create(network={"mode": "allowlist", "allow": ["example.com"]})
        except warren.Unavailable as e:
            self.skipTest(f"the daemon cannot give sessions a network here: {e}")
        with s:
            if s.info.network == "none":
                self.skipTest("the daemon has no working network here: " + (s.info.reason or "mode none"))
            pol = s.network.allow("*.example.org:443")
            self.assertEqual((pol.mode, pol.allow), ("allowlist", ["example.com", "*.example.org:443"]))
            pol = s.network.deny("10.1.2.3")
            self.assertEqual(pol.deny, ["10.1.2.3"])
            pol = s.network.set("allowlist", allow=["example.net"])
            self.assertEqual((pol.allow, pol.deny), (["example.net"], []))
            with self.assertRaises(warren.InvalidArgument):
                s.network.allow("not a rule!")
            self.assertIsInstance(s.network.denials(), list)
            names = os.environ.get("WARREN_TEST_INTERNET", "")
            if not names:
                return  # a daemon of your own: no fake internet to reach
            good, bad = names.split(",")
            s.network.set("allowlist", allow=[good])
            get = "python3 -c \"import urllib.request as u; print(u.urlopen('http://%s/', timeout=5).read().decode())\""
            r = s.exec(get % good)
            self.assertEqual(r.exit_code, 0, r.stderr)
            self.assertIn("hello from", r.stdout)
            self.assertNotEqual(s.exec(get % bad).exit_code, 0)
            self.assertIn(bad, [d.host for d in s.network.denials()])

    def test_ports(self):
        p = self.s.processes.start("mkdir -p /tmp/site && echo served > /tmp/site/index.html && "
                                   "exec python3 -m http.server 8123 --bind 127.0.0.1 --directory /tmp/site")
        try:
            deadline = time.time() + 15
            while time.time() < deadline:
                if any(x.port == 8123 for x in self.s.ports.list()):
                    break
                time.sleep(0.1)
            else:
                self.fail("port 8123 never listened: %s" % list(self.s.processes.logs(p.id)))
            port = [x for x in self.s.ports.list() if x.port == 8123][0]
            self.assertTrue(port.loopback_only)
            url = self.s.ports.url(8123)
            self.assertEqual(url, f"{URL}/v1/sessions/{self.s.id}/ports/8123/")
            req = urllib.request.Request(url, headers={"Authorization": "Bearer " + KEY})
            self.assertEqual(fetch(req), b"served\n")
            with self.assertRaises(urllib.error.HTTPError):
                fetch(url)  # no credential
            # With a token, as a browser opens it (a cookie after the first visit).
            opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(http.cookiejar.CookieJar()))
            self.assertEqual(fetch(self.s.ports.url(8123, token=True), opener), b"served\n")
            admin("PUT", "/v1/tenants/default", {"quota": {}, "policy": {"allow_public_ports": True}})
            try:
                self.assertTrue(self.s.ports.set_public(8123).public)
                self.assertEqual(fetch(url), b"served\n")
                self.assertFalse(self.s.ports.set_public(8123, False).public)
            finally:
                admin("PUT", "/v1/tenants/default", {"quota": {}, "policy": {}})
        finally:
            self.s.processes.kill(p.id)

    # shell

    def test_shell(self):
        with self.s.shell(cols=100, rows=30) as sh:
            self.assertTrue(sh.process_id)
            sh.write("stty size; echo mark-$((40+2))\n")
            out = sh.read_until("mark-42")
            self.assertIn(b"30 100", out)
            sh.resize(120, 40)
            sh.ping(b"x")
            sh.write("stty size; echo again-$((1+1))\n")
            self.assertIn(b"40 120", sh.read_until("again-2"))
            pid = sh.process_id
        # The shell outlived the connection: attach to it again.
        with self.s.shell(process=pid) as sh:
            self.assertEqual(sh.process_id, pid)
            sh.write("exit 7\n")
            with self.assertRaises(EOFError):
                sh.read_until("never")
            self.assertEqual(sh.exit_code, 7)
        with self.s.shell(kill_on_close=True) as sh:
            pid = sh.process_id
        deadline = time.time() + 5
        while time.time() < deadline:
            try:
                if self.s.processes.get(pid).state == "exited":
                    break
            except warren.NotFound:
                break
            time.sleep(0.05)
        else:
            self.fail("kill_on_close left the shell running")


if __name__ == "__main__":
    unittest.main()
