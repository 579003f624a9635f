"""Serve a web app in a session and open it.

A tiny app is written into a session and started as a process (it runs on
its own, whatever happens to this connection); once its port listens, the
daemon's proxy serves it at ports.url(), which with token=True a browser
can open as is.

    WARREN_URL=... WARREN_API_KEY=... python3 examples/serve_web_app.py
"""

import time
import urllib.request
import webbrowser

from warren import Warren

APP = '''
import http.server, json

class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = json.dumps({"hello": "from warren", "path": self.path}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

http.server.ThreadingHTTPServer(("127.0.0.1", 8000), Handler).serve_forever()
'''


def main(w: Warren, open_browser: bool = False) -> bytes:
    """Returns what the app answered through the daemon."""
    with w.sessions.create(labels={"example": "serve-web-app"}) as s:
        s.files.write("app.py", APP)
        proc = s.processes.start("python3 app.py")
        deadline = time.time() + 20
        while not any(p.port == 8000 for p in s.ports.list()):
            if time.time() > deadline:
                raise RuntimeError("the app never listened: " + b"".join(
                    e.data for e in s.processes.logs(proc.id)).decode())
            time.sleep(0.1)
        url = s.ports.url(8000, token=True)  # a short-lived token: no header needed
        print("open", url)
        if open_browser:
            webbrowser.open(url)
        req = urllib.request.Request(s.ports.url(8000) + "api", headers={"Authorization": "Bearer " + w._ep.key})
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.read()


if __name__ == "__main__":
    with Warren() as w:
        print(main(w, open_browser=True).decode())
