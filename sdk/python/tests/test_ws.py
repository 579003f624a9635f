"""The WebSocket client against a scripted server on a loopback socket:
the handshake, masking, fragments, ping/pong and the closing handshake,
which the daemon's own shell exercises only in part."""

import socket
import struct
import threading
import unittest

import warren
from warren import _proto as P


def server_frame(opcode: int, payload: bytes, fin: bool = True) -> bytes:
    # A server's frames are not masked.
    n = len(payload)
    head = struct.pack("!BB", (0x80 if fin else 0) | opcode, n) if n < 126 else struct.pack("!BBH", (0x80 if fin else 0) | opcode, 126, n)
    return head + payload


def read_client_frame(conn: socket.socket):
    def exact(n):
        b = b""
        while len(b) < n:
            c = conn.recv(n - len(b))
            if not c:
                raise EOFError
            b += c
        return b
    fin, op, masked, n7 = P.ws_parse_header(exact(2))
    n = P.ws_length(n7, exact(P.ws_ext_len(n7)))
    if not masked:
        raise AssertionError("an unmasked frame from the client")
    key = exact(4)
    return op, P.mask(exact(n), key)


class ScriptedServer:
    def __init__(self, script, status_line="HTTP/1.1 101 Switching Protocols", body=b""):
        self.ls = socket.socket()
        self.ls.bind(("127.0.0.1", 0))
        self.ls.listen(1)
        self.url = "http://127.0.0.1:%d" % self.ls.getsockname()[1]
        self.script, self.status_line, self.body = script, status_line, body
        self.got = []
        self.request = b""
        self.error = None
        self.t = threading.Thread(target=self.run, daemon=True)
        self.t.start()

    def run(self):
        conn, _ = self.ls.accept()
        try:
            while b"\r\n\r\n" not in self.request:
                self.request += conn.recv(4096)
            key = [ln.split(b": ", 1)[1] for ln in self.request.split(b"\r\n")
                   if ln.lower().startswith(b"sec-websocket-key")][0].decode()
            if self.body:
                conn.sendall(f"{self.status_line}\r\nContent-Type: application/json\r\n"
                             f"Content-Length: {len(self.body)}\r\n\r\n".encode() + self.body)
                return
            conn.sendall(f"{self.status_line}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                         f"Sec-WebSocket-Accept: {P.ws_accept(key)}\r\n\r\n".encode())
            self.script(conn, self)
        except Exception as e:  # reported by the test
            self.error = e
        finally:
            conn.close()
            self.ls.close()


class WebSocketTest(unittest.TestCase):
    def test_conversation(self):
        def script(conn, srv):
            conn.sendall(server_frame(P.OP_TEXT, b'{"type":"process","id":"p9"}'))
            conn.sendall(server_frame(P.OP_PING, b"hb"))
            srv.got.append(read_client_frame(conn))  # the pong
            conn.sendall(server_frame(P.OP_BINARY, b"out-", fin=False) + server_frame(P.OP_CONT, b"put"))
            srv.got.append(read_client_frame(conn))  # the client's input
            srv.got.append(read_client_frame(conn))  # its resize
            conn.sendall(server_frame(P.OP_TEXT, b'{"type":"exit","exit_code":3}'))
            conn.sendall(server_frame(P.OP_CLOSE, struct.pack("!H", 1000)))
            srv.got.append(read_client_frame(conn))  # its close reply

        srv = ScriptedServer(script)
        w = warren.Warren(srv.url, "k3y")
        self.addCleanup(w.close)
        shell = warren.Shell(w, "demo", {"cols": "80"}, timeout=5)
        self.assertEqual(shell.process_id, "p9")
        self.assertEqual(shell.read(), b"out-put")
        shell.write("ls\n")
        shell.resize(100, 30)
        self.assertEqual(shell.read(), b"")
        self.assertEqual(shell.exit_code, 3)
        shell.close()
        srv.t.join(5)
        self.assertIsNone(srv.error)
        self.assertEqual(srv.got[0], (P.OP_PONG, b"hb"))
        self.assertEqual(srv.got[1], (P.OP_BINARY, b"ls\n"))
        self.assertEqual(srv.got[2], (P.OP_TEXT, b'{"type": "resize", "cols": 100, "rows": 30}'))
        self.assertEqual(srv.got[3], (P.OP_CLOSE, struct.pack("!H", 1000)))
        req = srv.request.decode()
        self.assertIn("GET /v1/sessions/demo/shell?cols=80 HTTP/1.1", req)
        self.assertIn("Authorization: Bearer k3y", req)
        self.assertIn("Sec-WebSocket-Version: 13", req)

    def test_refused_upgrade(self):
        srv = ScriptedServer(None, "HTTP/1.1 404 Not Found",
                             b'{"error":{"code":"not_found","message":"session \\"demo\\" not found"}}')
        with warren.Warren(srv.url, "k") as w, self.assertRaises(warren.NotFound):
            warren.Shell(w, "demo", {}, timeout=5)

    def test_bad_accept(self):
        # A server that answers 101 with a wrong accept key is refused.
        ls = socket.socket()
        ls.bind(("127.0.0.1", 0))
        ls.listen(1)

        def bad():
            c, _ = ls.accept()
            c.recv(4096)
            c.sendall(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                      b"Sec-WebSocket-Accept: wrong\r\n\r\n")
            c.close()
        t = threading.Thread(target=bad, daemon=True)
        t.start()
        with self.assertRaises(warren.WarrenError):
            warren.Shell(warren.Warren("http://127.0.0.1:%d" % ls.getsockname()[1], "k"), "demo", {}, timeout=5)
        t.join(5)
        ls.close()


if __name__ == "__main__":
    unittest.main()
