// Shared by the tests: the daemon's address and key (set by sdk_test.go),
// a client, a raw admin call, and a TCP proxy that can cut connections.
import net from "node:net";
import { Warren } from "../dist/index.js";

export const URL_ = process.env.WARREN_URL;
export const KEY = process.env.WARREN_KEY;
if (!URL_) throw new Error("WARREN_URL is not set: sdk_test.go starts a daemon and sets it");

/** A client of the test daemon with the admin key. */
export function client(opts = {}) {
  return new Warren({ url: URL_, key: KEY, ...opts });
}

/** A raw call with the admin key, for setup the SDK does not cover (keys, tenants). */
export async function admin(method, path, body) {
  const r = await fetch(URL_ + path, {
    method,
    headers: { authorization: `Bearer ${KEY}`, "content-type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  if (!r.ok) throw new Error(`${method} ${path}: ${r.status} ${await r.text()}`);
  return r.status === 204 ? undefined : r.json();
}

/** A key of a new tenant (not admin). */
export async function tenantKey(tenant) {
  const k = await admin("POST", "/v1/keys", { tenant, admin: false, name: "sdk-test" });
  return k.secret;
}

/**
 * A TCP proxy in front of the daemon. cut(n) makes the next connections
 * that carry an answer be closed after n bytes of it have gone to the
 * client, as a flaky network would.
 */
export async function proxy() {
  const target = new globalThis.URL(URL_);
  let cutAfter = 0;
  let cuts = 0;
  let cutsLeft = 0;
  const sockets = new Set();
  const server = net.createServer((c) => {
    const u = net.connect(Number(target.port), target.hostname);
    sockets.add(c);
    sockets.add(u);
    // Connections are kept alive and reused: a connection is armed by the
    // first answer bytes it carries after cut() was called, and counts
    // from there.
    let sent = 0;
    let cutAt = 0;
    c.pipe(u);
    u.on("data", (d) => {
      if (!cutAt && cutsLeft > 0) {
        cutsLeft--;
        cutAt = sent + cutAfter;
      }
      if (cutAt && sent + d.length >= cutAt) {
        c.write(d.subarray(0, Math.max(0, cutAt - sent)));
        cuts++;
        c.destroy();
        u.destroy();
        return;
      }
      sent += d.length;
      c.write(d);
    });
    const end = () => {
      c.destroy();
      u.destroy();
      sockets.delete(c);
      sockets.delete(u);
    };
    c.on("error", end).on("close", end);
    u.on("error", end).on("close", end);
  });
  await new Promise((r) => server.listen(0, "127.0.0.1", r));
  return {
    url: `http://127.0.0.1:${server.address().port}`,
    /** Cut the next `times` connections after `bytes` bytes of answer. */
    cut(bytes, times = 1) {
      cutAfter = bytes;
      cutsLeft = times;
    },
    get cuts() {
      return cuts;
    },
    close() {
      for (const s of sockets) s.destroy();
      return new Promise((r) => server.close(r));
    },
  };
}

/** Reads a web stream whole. */
export async function bytesOf(stream) {
  return new Uint8Array(await new Response(stream).arrayBuffer());
}
