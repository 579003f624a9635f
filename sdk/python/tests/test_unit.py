"""Tests of the parts that need no daemon: events, frames, errors, tar, types."""

import io
import os
import tarfile
import tempfile
import unittest

import warren
from warren import _proto as P
from warren._errors import error_from_event, error_from_response, parse_retry_after
from warren._tar import safe_extract
from warren._types import parse_time


class SSETest(unittest.TestCase):
    def events(self, text: bytes):
        p, out = P.SSEParser(), []
        for line in io.BytesIO(text).readlines():
            ev = p.feed(line)
            if ev:
                out.append((ev.name, ev.data, ev.id))
        return out

    def test_fields(self):
        got = self.events(b": keep-alive\nretry: 3000\n\nevent: output\nid: 7\ndata: {\"a\":1}\n\n"
                          b"data: one\ndata:two\n\nevent: x\n\n")
        self.assertEqual(got, [("output", '{"a":1}', "7"), ("message", "one\ntwo", "7")])

    def test_crlf_and_cut(self):
        self.assertEqual(self.events(b"event: e\r\ndata: d\r\n\r\ndata: cut"), [("e", "d", "")])

    def test_output_offsets(self):
        st = P.OutputEvents(0)
        d = st.handle(P.Event("output", '{"offset":5,"stream":"stderr","base64":"/wA="}', "7"))
        self.assertEqual((d["offset"], d["next"], d["data"], d["stream"]), (5, 7, b"\xff\x00", "stderr"))
        d = st.handle(P.Event("gap", '{"from":7,"to":20}', "20"))
        self.assertEqual((d["offset"], st.pos), (7, 20))
        d = st.handle(P.Event("output", '{"text":"abc"}', "23"))
        self.assertEqual((d["offset"], d["next"]), (20, 23))
        d = st.handle(P.Event("exit", '{"exit_code":2}', "23"))
        self.assertTrue(st.exited)
        self.assertEqual(d["exit_code"], 2)
        with self.assertRaises(warren.NotFound):
            st.handle(P.Event("error", '{"error":{"code":"not_found","message":"gone"}}', ""))


class FrameTest(unittest.TestCase):
    def unframe(self, b: bytes):
        fin, op, masked, n7 = P.ws_parse_header(b[:2])
        ext = P.ws_ext_len(n7)
        n = P.ws_length(n7, b[2:2 + ext])
        key = b[2 + ext:6 + ext]
        self.assertTrue(masked, "a client's frames must be masked")
        payload = b[6 + ext:]
        self.assertEqual(len(payload), n)
        return fin, op, P.mask(payload, key)

    def test_lengths(self):
        for n in (0, 1, 125, 126, 65535, 65536, 200000):
            data = os.urandom(n)
            fin, op, got = self.unframe(P.ws_frame(P.OP_BINARY, data))
            self.assertEqual((fin, op, got), (True, P.OP_BINARY, data), n)

    def test_accept(self):
        # RFC 6455, section 1.3.
        self.assertEqual(P.ws_accept("dGhlIHNhbXBsZSBub25jZQ=="), "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=")

    def test_shell_messages(self):
        s = P.ShellState()
        s.text(b'{"type":"process","id":"p3"}')
        s.text(b'{"type":"exit","exit_code":4}')
        s.text(b"not json")
        self.assertEqual((s.process_id, s.exit_code), ("p3", 4))
        with self.assertRaises(warren.ResourceExhausted):
            s.text(b'{"type":"error","error":{"code":"resource_exhausted","message":"too many"}}')


class ErrorTest(unittest.TestCase):
    def test_classes(self):
        cases = [
            (400, "invalid_argument", warren.InvalidArgument), (401, "unauthenticated", warren.Unauthenticated),
            (403, "permission_denied", warren.PermissionDenied), (404, "not_found", warren.NotFound),
            (409, "conflict", warren.Conflict), (413, "too_large", warren.TooLarge),
            (429, "resource_exhausted", warren.QuotaExceeded), (503, "unavailable", warren.Unavailable),
            (500, "internal", warren.Internal), (418, "teapot", warren.WarrenError),
        ]
        for status, code, cls in cases:
            body = b'{"error":{"code":"%s","message":"m"}}' % code.encode()
            e = error_from_response(status, {"X-Request-ID": "r1"}, body)
            self.assertIs(type(e), cls, code)
            self.assertEqual((e.code, e.status, e.message, e.request_id), (code, status, "m", "r1"))

    def test_rate_limited(self):
        e = error_from_response(429, {"Retry-After": "3"}, b'{"error":{"code":"resource_exhausted","message":"x"}}')
        self.assertIsInstance(e, warren.RateLimited)
        self.assertIsInstance(e, warren.ResourceExhausted)
        self.assertEqual(e.retry_after, 3.0)

    def test_quota_name(self):
        e = error_from_response(429, {}, b'{"error":{"code":"resource_exhausted","message":"quota max_sessions (1) reached"}}')
        self.assertEqual(e.quota, "max_sessions")

    def test_not_an_envelope(self):
        e = error_from_response(502, {}, b"<html><title>Bad Gateway</title></html>")
        self.assertIsInstance(e, warren.Unavailable)
        self.assertEqual(e.message, "HTTP 502: Bad Gateway")

    def test_event(self):
        self.assertIsInstance(error_from_event('{"error":{"code":"conflict","message":"c"}}'), warren.Conflict)
        self.assertIsInstance(error_from_event("garbage"), warren.Internal)

    def test_retry_after(self):
        self.assertEqual(parse_retry_after("7"), 7.0)
        self.assertEqual(parse_retry_after("-1"), 0.0)
        self.assertAlmostEqual(parse_retry_after("Thu, 01 Jan 1970 00:01:40 GMT", now=90.0), 10.0)
        self.assertEqual(parse_retry_after("junk"), 0.0)


class TarTest(unittest.TestCase):
    def tar(self, *members):
        b = io.BytesIO()
        with tarfile.open(fileobj=b, mode="w") as t:
            for ti, data in members:
                t.addfile(ti, io.BytesIO(data) if data is not None else None)
        b.seek(0)
        return b

    def info(self, name, data=b"", typ=tarfile.REGTYPE, link=""):
        ti = tarfile.TarInfo(name)
        ti.type, ti.linkname, ti.size = typ, link, len(data) if typ == tarfile.REGTYPE else 0
        return ti, (data if typ == tarfile.REGTYPE else None)

    def test_extracts(self):
        with tempfile.TemporaryDirectory() as d:
            n = safe_extract(self.tar(self.info("./a/.hidden", b"x"), self.info("b", b"yy")), d)
            self.assertEqual(n, 2)
            with open(os.path.join(d, "a", ".hidden"), "rb") as f:
                self.assertEqual(f.read(), b"x")

    def test_refuses_escapes(self):
        bad = [
            [self.info("../evil", b"x")],
            [self.info("/abs", b"x")],
            [self.info("l", typ=tarfile.SYMTYPE, link="/etc")],
            [self.info("l", typ=tarfile.SYMTYPE, link="../../x")],
            [self.info("h", typ=tarfile.LNKTYPE, link="../x")],
        ]
        for members in bad:
            with tempfile.TemporaryDirectory() as d, self.subTest(members[0][0].name):
                with self.assertRaises(ValueError):
                    safe_extract(self.tar(*members), os.path.join(d, "out"))
                self.assertFalse(os.path.exists(os.path.join(d, "evil")))


class TypesTest(unittest.TestCase):
    def test_time(self):
        t = parse_time("2026-11-26T14:54:33.822325123Z")
        self.assertEqual((t.microsecond, t.utcoffset().total_seconds()), (822325, 0))
        self.assertEqual(parse_time("2026-01-02T03:04:05+02:00").utcoffset().total_seconds(), 7200)

    def test_unknown_fields_ignored(self):
        s = warren.SessionInfo.from_dict({"id": "a", "limits": {"memory_mb": 5}, "future_field": 1})
        self.assertEqual(s.limits.memory_mb, 5)

    def test_exec_bytes(self):
        r = warren.ExecResult.from_dict({"stdout": "\ufffd", "stdout_base64": "/w==", "exit_code": 0})
        self.assertEqual(r.stdout_bytes, b"\xff")
        self.assertTrue(r.ok)

    def test_exec_body(self):
        self.assertEqual(P.exec_body(["ls", "-l"], None, b"\x00", None, None, None, None),
                         {"argv": ["ls", "-l"], "stdin_base64": "AA=="})
        with self.assertRaises(TypeError):
            P.exec_body(None, None, None, None, None, None, None)


if __name__ == "__main__":
    unittest.main()
