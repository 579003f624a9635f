"""What the tests share: the daemon the Go test started (WARREN_URL,
WARREN_API_KEY), admin calls the SDK does not offer, and a TCP proxy that
can cut its connections."""

from __future__ import annotations

import json
import os
import socket
import threading
import unittest
import urllib.request
import uuid
from typing import List, Optional

URL = os.environ.get("WARREN_URL", "")
KEY = os.environ.get("WARREN_API_KEY", "")


def needs_daemon(cls):
    """Skips a test class, saying why, without a daemon to test against."""
    if not URL:
        return unittest.skip("needs a daemon: run through `go test ./test/sdk-python` (make test), "
                             "or set WARREN_URL and WARREN_API_KEY")(cls)
    return cls


def uid(prefix: str = "t") -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def admin(method: str, path: str, body=None) -> dict:
    """An admin call through urllib, for what the SDK leaves out (keys, tenants)."""
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(URL + path, data=data, method=method,
                                 headers={"Authorization": "Bearer " + KEY, "Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=30) as r:
        raw = r.read()
    return json.loads(raw) if raw else {}


def tenant_key(tenant: str, quota: Optional[dict] = None) -> str:
    """A new non-admin key of tenant, whose quota is set first if given."""
    if quota is not None:
        admin("PUT", "/v1/tenants/" + tenant, {"quota": quota, "policy": {}})
    return admin("POST", "/v1/keys", {"tenant": tenant, "name": "sdk-test"})["secret"]


class Proxy:
    """A TCP proxy to the daemon whose connections cut() closes at once,
    as a network that drops them would."""

    def __init__(self, url: str = URL) -> None:
        host, port = url.split("//", 1)[1].rstrip("/").rsplit(":", 1)
        self._up = (host, int(port))
        self._ls = socket.socket()
        self._ls.bind(("127.0.0.1", 0))
        self._ls.listen(16)
        self.url = "http://127.0.0.1:%d" % self._ls.getsockname()[1]
        self._conns: List[socket.socket] = []
        self._lock = threading.Lock()
        self.accepted = 0
        self._closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                c, _ = self._ls.accept()
            except OSError:
                return
            u = socket.create_connection(self._up)
            with self._lock:
                self.accepted += 1
                self._conns += [c, u]
            for a, b in ((c, u), (u, c)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    @staticmethod
    def _pump(a: socket.socket, b: socket.socket) -> None:
        try:
            while True:
                d = a.recv(65536)
                if not d:
                    break
                b.sendall(d)
        except OSError:
            pass
        for s in (a, b):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def cut(self) -> None:
        """Closes every connection open now (new ones are still accepted)."""
        with self._lock:
            conns, self._conns = self._conns, []
        for s in conns:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            s.close()

    def close(self) -> None:
        """Stops listening (connecting is then refused) and cuts every connection."""
        try:
            self._ls.shutdown(socket.SHUT_RDWR)  # wakes the accepting thread
        except OSError:
            pass
        self._ls.close()
        self.cut()
