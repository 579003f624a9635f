"""Measures the Python SDK against the daemon at WARREN_URL (WARREN_API_KEY).

1. create + first exec + delete: from the SDK (one kept-alive client), and
   from curl (three curl processes, as a shell script would), in the same
   run, interleaved.
2. The SDK's own cost per call: s.refresh() (GET /v1/sessions/{id}, decoded
   into a SessionInfo) against the same GET sent with http.client on a
   kept-alive connection of its own, interleaved; and the same for an exec
   of `true`.

Run by `go test -run '^$' -bench PythonSDK ./test/sdk-python` (a daemon
without a rate limit), or by hand against any daemon. Prints medians.
"""

import asyncio
import http.client
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from urllib.parse import urlsplit

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import warren  # noqa: E402

URL = os.environ.get("WARREN_URL", "http://127.0.0.1:7433").rstrip("/")
KEY = os.environ.get("WARREN_API_KEY", "")
ROUNDS = int(os.environ.get("BENCH_ROUNDS", "30"))
CALLS = int(os.environ.get("BENCH_CALLS", "2000"))


def ms(xs):
    return statistics.median(xs) * 1000


def p95(xs):
    return sorted(xs)[int(len(xs) * 0.95) - 1] * 1000


def curl_cycle(curl):
    """create, exec, delete with three curl processes; returns (wall, sum of curl's time_total)."""
    auth = ["-H", "Authorization: Bearer " + KEY]
    t0 = time.perf_counter()
    out = subprocess.run([curl, "-sS", "-w", "\n%{time_total}", *auth, "-X", "POST", "-d", "{}",
                          URL + "/v1/sessions"], capture_output=True, text=True, check=True).stdout
    body, t1 = out.rsplit("\n", 1)
    sid = json.loads(body)["id"]
    out = subprocess.run([curl, "-sS", "-o", "/dev/null", "-w", "%{time_total}", *auth, "-X", "POST",
                          "-d", '{"command":"echo hi"}', f"{URL}/v1/sessions/{sid}/exec"],
                         capture_output=True, text=True, check=True).stdout
    t2 = float(out)
    out = subprocess.run([curl, "-sS", "-o", "/dev/null", "-w", "%{time_total}", *auth, "-X", "DELETE",
                          f"{URL}/v1/sessions/{sid}"], capture_output=True, text=True, check=True).stdout
    t3 = float(out)
    return time.perf_counter() - t0, float(t1) + t2 + t3


def sdk_cycle(w):
    t0 = time.perf_counter()
    s = w.sessions.create()
    r = s.exec("echo hi")
    s.delete()
    assert r.stdout == "hi\n"
    return time.perf_counter() - t0


def overhead(w):
    u = urlsplit(URL)
    raw = http.client.HTTPConnection(u.hostname, u.port or 80)
    hdrs = {"Authorization": "Bearer " + KEY, "Accept": "application/json"}
    s = w.sessions.create()
    try:
        path = "/v1/sessions/" + s.id
        body = json.dumps({"command": "true"}).encode()
        ehdrs = dict(hdrs, **{"Content-Type": "application/json"})
        res = {"raw_get": [], "sdk_get": [], "raw_exec": [], "sdk_exec": []}
        for i in range(CALLS + 100):
            t0 = time.perf_counter()
            raw.request("GET", path, headers=hdrs)
            raw.getresponse().read()
            t1 = time.perf_counter()
            s.refresh()
            t2 = time.perf_counter()
            raw.request("POST", path + "/exec", body=body, headers=ehdrs)
            raw.getresponse().read()
            t3 = time.perf_counter()
            s.exec("true")
            t4 = time.perf_counter()
            if i >= 100:  # warm-up
                res["raw_get"].append(t1 - t0)
                res["sdk_get"].append(t2 - t1)
                res["raw_exec"].append(t3 - t2)
                res["sdk_exec"].append(t4 - t3)
        # The SDK's work alone, without the network: build the request and
        # decode a recorded answer.
        raw.request("GET", path, headers=hdrs)
        answer = raw.getresponse().read()
        t0 = time.perf_counter()
        for _ in range(CALLS):
            warren._proto.json_req("GET", warren._proto.session_path(s.id))
            warren.SessionInfo.from_dict(json.loads(answer))
        local = (time.perf_counter() - t0) / CALLS
        return res, local
    finally:
        s.delete()
        raw.close()


async def async_overhead():
    async with warren.AsyncWarren(URL, KEY) as w:
        s = await w.sessions.create()
        try:
            xs = []
            for i in range(CALLS // 2 + 50):
                t0 = time.perf_counter()
                await s.refresh()
                if i >= 50:
                    xs.append(time.perf_counter() - t0)
            return xs
        finally:
            await s.delete()


def main():
    w = warren.Warren(URL, KEY)
    curl = shutil.which("curl")
    sdk, cwall, ctotal = [], [], []
    sdk_cycle(w)  # warm-up
    for _ in range(ROUNDS):
        sdk.append(sdk_cycle(w))
        if curl:
            a, b = curl_cycle(curl)
            cwall.append(a)
            ctotal.append(b)
    print(f"create + first exec + delete, {ROUNDS} rounds (median / p95):")
    print(f"  SDK (one kept-alive client):          {ms(sdk):7.2f} / {p95(sdk):6.2f} ms")
    if curl:
        print(f"  curl, three processes (wall):         {ms(cwall):7.2f} / {p95(cwall):6.2f} ms")
        print(f"  curl, sum of its time_total:          {ms(ctotal):7.2f} / {p95(ctotal):6.2f} ms")
    res, local = overhead(w)
    print(f"per call, {CALLS} interleaved calls on kept-alive connections (median):")
    for what in ("get", "exec"):
        r, s = ms(res["raw_" + what]), ms(res["sdk_" + what])
        print(f"  {what:4}: http.client {r:6.3f} ms, SDK {s:6.3f} ms, SDK overhead {s - r:+6.3f} ms")
    print(f"  SDK work without the network (build the GET, decode a SessionInfo): {local * 1000:6.3f} ms")
    a = asyncio.run(async_overhead())
    print(f"  AsyncWarren refresh(): {ms(a):6.3f} ms")
    w.close()


if __name__ == "__main__":
    main()
