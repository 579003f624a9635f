"""Each error class, as the daemon answers it."""

import unittest

import warren
from tests.support import KEY, URL, needs_daemon, tenant_key, uid


@needs_daemon
class ErrorClassTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.w = warren.Warren(URL, KEY)

    @classmethod
    def tearDownClass(cls):
        cls.w.close()

    def test_invalid_argument(self):
        with self.assertRaises(warren.InvalidArgument) as cm:
            self.w.sessions.create(id="Not A Valid Id")
        self.assertEqual((cm.exception.status, cm.exception.code), (400, "invalid_argument"))
        self.assertTrue(cm.exception.request_id)

    def test_unauthenticated(self):
        with warren.Warren(URL, "wrn_nope_nope") as bad, self.assertRaises(warren.Unauthenticated) as cm:
            bad.sessions.list()
        self.assertEqual(cm.exception.status, 401)

    def test_permission_denied(self):
        with warren.Warren(URL, tenant_key(uid("tn"))) as user, self.assertRaises(warren.PermissionDenied):
            user.sessions.list(all_tenants=True)

    def test_not_found(self):
        with self.assertRaises(warren.NotFound) as cm:
            self.w.sessions.get(uid("missing"))
        self.assertEqual(cm.exception.status, 404)

    def test_not_found_across_tenants(self):
        with self.w.sessions.create() as mine, warren.Warren(URL, tenant_key(uid("tn"))) as other:
            with self.assertRaises(warren.NotFound):
                other.sessions.get(mine.id)

    def test_conflict(self):
        sid = uid("c")
        with self.w.sessions.create(id=sid):
            with self.assertRaises(warren.Conflict):
                self.w.sessions.create(id=sid, labels={"other": "labels"})

    def test_too_large(self):
        with self.w.sessions.create() as s, self.assertRaises(warren.TooLarge) as cm:
            s.exec("wc -c", stdin="x" * (9 << 20))  # over the 8 MiB JSON body limit
        self.assertEqual(cm.exception.status, 413)

    def test_quota_exceeded(self):
        tenant = uid("quota")
        with warren.Warren(URL, tenant_key(tenant, {"max_sessions": 1})) as user:
            with user.sessions.create():
                with self.assertRaises(warren.QuotaExceeded) as cm:
                    user.sessions.create()
        e = cm.exception
        self.assertIsInstance(e, warren.ResourceExhausted)
        self.assertNotIsInstance(e, warren.RateLimited)
        self.assertEqual((e.status, e.quota), (429, "max_sessions"))

    def test_rate_limited(self):
        # A fresh key has its own bucket (default 200/s, bursts of 400).
        # Calls go out 64 at a time, so that they outrun the refill even
        # on a loaded machine where one call takes milliseconds.
        import asyncio

        async def hammer():
            async with warren.AsyncWarren(URL, tenant_key(uid("rate"))) as user:
                for _ in range(100):
                    got = await asyncio.gather(*(user.sessions.list() for _ in range(64)), return_exceptions=True)
                    for r in got:
                        if isinstance(r, warren.RateLimited):
                            return r
                        if isinstance(r, BaseException):
                            raise r
            return None
        e = asyncio.run(hammer())
        self.assertIsNotNone(e, "6400 calls were never rate limited")
        self.assertEqual((e.status, e.code), (429, "resource_exhausted"))
        self.assertGreater(e.retry_after, 0)
        self.assertIsInstance(e, warren.ResourceExhausted)

    def test_unavailable(self):
        # A port with nothing listening cannot be proxied to.
        with self.w.sessions.create() as s, self.assertRaises(warren.Unavailable) as cm:
            self.w._call(warren._proto.Req("GET", warren._proto.session_path(s.id, "/ports/9/"), accept="*/*"))
        self.assertIn(cm.exception.status, (502, 503))

    def test_connection_failed(self):
        with warren.Warren("http://127.0.0.1:1", "k") as dead, self.assertRaises(warren.ConnectionFailed) as cm:
            dead.sessions.list()
        self.assertIsInstance(cm.exception, warren.WarrenError)

    def test_async_errors(self):
        import asyncio

        async def main():
            async with warren.AsyncWarren(URL, KEY) as aw:
                with self.assertRaises(warren.NotFound):
                    await aw.sessions.get(uid("missing"))
                with self.assertRaises(warren.InvalidArgument):
                    await aw.sessions.create(id="Bad Id")
            async with warren.AsyncWarren(URL, "wrn_x_y") as bad:
                with self.assertRaises(warren.Unauthenticated):
                    await bad.stats()
        asyncio.run(main())


if __name__ == "__main__":
    unittest.main()
