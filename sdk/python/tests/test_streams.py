"""Dropped connections, cancellation and cleanup on exit."""

import asyncio
import os
import signal
import subprocess
import sys
import time
import unittest
from unittest import mock

import warren
from tests.support import KEY, URL, Proxy, needs_daemon, uid

# A process that writes 40 numbered lines over about 2 seconds.
COUNTER = "for i in $(seq 1 40); do echo line-$i; sleep 0.05; done"
EXPECTED = b"".join(b"line-%d\n" % i for i in range(1, 41))


@needs_daemon
class DroppedStreamTest(unittest.TestCase):
    def setUp(self):
        self.proxy = Proxy()
        self.w = warren.Warren(self.proxy.url, KEY, timeout=30)
        self.direct = warren.Warren(URL, KEY)
        self.s = self.direct.sessions.create()

    def tearDown(self):
        self.s.delete()
        self.direct.close()
        self.w.close()
        self.proxy.close()

    def test_logs_resume_after_cut(self):
        p = self.s.processes.start(COUNTER)
        got, offsets, cuts = b"", [], 0
        for ev in self.w.sessions.get(self.s.id).processes.logs(p.id, follow=True):
            if ev.kind == "output":
                self.assertEqual(ev.offset, len(got), "a byte was repeated or lost")
                got += ev.data
                offsets.append(ev.offset)
                if cuts < 2 and len(got) > (cuts + 1) * 60:
                    cuts += 1
                    self.proxy.cut()  # the next read fails; logs reconnects from ev.next
            elif ev.kind == "exit":
                self.assertEqual(ev.exit_code, 0)
        self.assertEqual(got, EXPECTED)
        self.assertEqual(cuts, 2)
        self.assertGreaterEqual(self.proxy.accepted, 3, "logs did not reconnect")

    def test_logs_resume_async(self):
        p = self.s.processes.start(COUNTER)

        async def main():
            got, cut = b"", False
            async with warren.AsyncWarren(self.proxy.url, KEY) as aw:
                s = await aw.sessions.get(self.s.id)
                async for ev in s.processes.logs(p.id, follow=True):
                    if ev.kind == "output":
                        self.assertEqual(ev.offset, len(got))
                        got += ev.data
                        if not cut and len(got) > 100:
                            cut = True
                            self.proxy.cut()
            return got
        self.assertEqual(asyncio.run(main()), EXPECTED)

    def test_logs_outlast_timeout(self):
        # A process silent for longer than the client's timeout (many
        # times over) is followed to its end, not given up on.
        p = self.s.processes.start("sleep 2; echo late")
        with warren.Warren(URL, KEY, timeout=0.25) as w, mock.patch.object(warren._client, "MAX_RECONNECTS", 2):
            evs = list(warren.Session(w, self.s.info).processes.logs(p.id, follow=True))
        self.assertEqual([(e.kind, e.data) for e in evs], [("output", b"late\n"), ("exit", b"")])

    def test_logs_give_up(self):
        # A daemon that stays unreachable ends the stream with StreamInterrupted.
        p = self.s.processes.start("sleep 30")
        it = self.w.sessions.get(self.s.id).processes.logs(p.id, follow=True)
        self.proxy.close()
        with self.assertRaises(warren.StreamInterrupted):
            next(it)

    def test_exec_stream_cut(self):
        st = self.w.sessions.get(self.s.id).exec_stream("echo first; sleep 1; echo second")
        with self.assertRaises(warren.StreamInterrupted):
            for c in st:
                self.proxy.cut()
        self.assertIsNone(st.result)


@needs_daemon
class CancellationTest(unittest.TestCase):
    def test_async_cancel_exec(self):
        async def main():
            async with warren.AsyncWarren(URL, KEY) as aw:
                async with await aw.sessions.create() as s:
                    marker = "/tmp/" + uid("m")
                    t0 = time.monotonic()
                    with self.assertRaises(asyncio.TimeoutError):
                        await asyncio.wait_for(s.exec(f"sleep 2; touch {marker}"), 0.3)
                    self.assertLess(time.monotonic() - t0, 1.5)
                    await asyncio.sleep(2.5)
                    self.assertFalse(await s.files.exists(marker), "the cancelled exec ran on")
                    # The client is usable after a cancelled call.
                    self.assertEqual((await s.exec("echo ok")).stdout, "ok\n")
        asyncio.run(main())

    def test_async_cancel_stream(self):
        async def main():
            async with warren.AsyncWarren(URL, KEY) as aw:
                async with await aw.sessions.create() as s:
                    p = await s.processes.start("sleep 30")
                    seen = []

                    async def follow():
                        async for ev in s.processes.logs(p.id, follow=True):
                            seen.append(ev)
                    task = asyncio.ensure_future(follow())
                    await asyncio.sleep(0.3)
                    task.cancel()
                    with self.assertRaises(asyncio.CancelledError):
                        await task
                    self.assertEqual(seen, [])
                    self.assertTrue((await s.processes.get(p.id)).running)
        asyncio.run(main())

    def test_sync_timeout(self):
        with warren.Warren(URL, KEY, timeout=0.3) as w, warren.Warren(URL, KEY) as direct:
            with direct.sessions.create() as s:
                with self.assertRaises(TimeoutError):
                    w.sessions.get(s.id).exec("sleep 2")


@needs_daemon
class CleanupTest(unittest.TestCase):
    def setUp(self):
        self.w = warren.Warren(URL, KEY)
        self.addCleanup(self.w.close)

    def gone(self, sid):
        with self.assertRaises(warren.NotFound):
            self.w.sessions.get(sid)

    def test_with_deletes_on_error(self):
        sid = uid("c")
        with self.assertRaises(ZeroDivisionError):
            with self.w.sessions.create(id=sid):
                1 / 0
        self.gone(sid)

    def test_get_does_not_delete(self):
        with self.w.sessions.create() as s:
            with self.w.sessions.get(s.id):
                pass
            s.refresh()  # still there

    def test_async_with_deletes_on_cancel(self):
        sid = uid("c")

        async def main():
            async with warren.AsyncWarren(URL, KEY) as aw:
                inside = asyncio.Event()

                async def body():
                    async with await aw.sessions.create(id=sid):
                        inside.set()
                        await asyncio.sleep(30)
                task = asyncio.ensure_future(body())
                await inside.wait()
                task.cancel()
                with self.assertRaises(asyncio.CancelledError):
                    await task
        asyncio.run(main())
        self.gone(sid)

    def test_async_cancel_during_create(self):
        # Cancelled while the daemon creates it: the SDK named the session,
        # so it deletes it by name.
        async def main():
            async with warren.AsyncWarren(URL, KEY) as aw:
                before = {s.id for s in await aw.sessions.list()}
                cancelled = 0
                for delay in (0.0005, 0.001, 0.002, 0.004, 0.008):
                    try:
                        s = await asyncio.wait_for(aw.sessions.create(), delay)
                    except asyncio.TimeoutError:
                        cancelled += 1
                    else:
                        await s.delete()  # the create beat the timeout
                self.assertGreater(cancelled, 0)
                await asyncio.sleep(0.5)  # a create that reached the daemon finishes
                # A create the daemon finished after the client gave up
                # is deleted as well: nothing new is left behind.
                return before, {s.id for s in await aw.sessions.list()}
        before, after = asyncio.run(main())
        self.assertEqual(after - before, set())

    def test_interrupted_program_deletes(self):
        # A program stopped with Ctrl-C still deletes what its with block created.
        sid = uid("c")
        prog = ("import time, warren\n"
                f"with warren.Warren() as w, w.sessions.create(id={sid!r}):\n"
                "    print('ready', flush=True)\n"
                "    time.sleep(60)\n")
        here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        env = dict(os.environ, WARREN_URL=URL, WARREN_API_KEY=KEY, PYTHONPATH=here)
        p = subprocess.Popen([sys.executable, "-c", prog], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
        try:
            self.assertEqual(p.stdout.readline(), b"ready\n")
            p.send_signal(signal.SIGINT)
            _, err = p.communicate(timeout=30)
            self.assertIn(b"KeyboardInterrupt", err)
        finally:
            if p.poll() is None:
                p.kill()
                p.wait()
            p.stdout.close()
            p.stderr.close()
        self.gone(sid)

    def test_fork_owned(self):
        with self.w.sessions.create() as s:
            forks = s.fork(2)
            with forks[0], forks[1]:
                pass
            for f in forks:
                self.gone(f.id)


if __name__ == "__main__":
    unittest.main()
