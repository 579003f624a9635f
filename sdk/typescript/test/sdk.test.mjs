// The SDK against a real daemon (sdk_test.go starts it): every method of
// the shared surface, each error class, streams resumed after a cut
// connection, cancellation, and cleanup.
import assert from "node:assert/strict";
import { mkdtemp, mkdir, readFile, readlink, rm, symlink, writeFile, stat } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import {
  ConflictError,
  ConnectionFailedError,
  InternalError,
  InvalidArgumentError,
  NotFoundError,
  PermissionDeniedError,
  QuotaExceededError,
  RateLimitedError,
  ResourceExhaustedError,
  StreamInterruptedError,
  TooLargeError,
  UnauthenticatedError,
  UnavailableError,
  Warren,
  WarrenError,
} from "../dist/index.js";
import { URL_, admin, bytesOf, client, proxy, tenantKey } from "./helpers.mjs";

const w = client();
after(() => w.close());

describe("sessions", () => {
  test("create, idempotent create, get, list, renew, ttl, delete", async () => {
    const id = `ts-s-${process.pid}`;
    const s = await w.sessions.create({ id, labels: { by: "sdk-ts" }, ttl_seconds: 600 });
    assert.equal(s.id, id);
    assert.equal(s.info.state, "running");
    assert.deepEqual(s.info.labels, { by: "sdk-ts" });
    const again = await w.sessions.create({ id });
    assert.equal(again.id, id);
    assert.equal((await w.sessions.get(id)).info.image, s.info.image);
    assert.ok((await w.sessions.list()).some((x) => x.id === id));
    const ttl = await s.ttl();
    assert.ok(ttl > 590 && ttl <= 600, `ttl ${ttl} s`);
    const before = Date.parse(s.info.expires_at);
    await new Promise((r) => setTimeout(r, 1100));
    const renewed = await s.renew();
    assert.ok(renewed.getTime() > before, `renew moved expiry from ${new Date(before).toISOString()} to ${renewed.toISOString()}`);
    await s.refresh();
    await s.delete();
    await assert.rejects(w.sessions.get(id), NotFoundError);
    assert.ok(!w.created.has(id));
  });

  test("run: a one-off sandbox", async () => {
    const r = await w.run("echo one-off");
    assert.equal(r.stdout, "one-off\n");
    assert.equal(r.exit_code, 0);
  });

  test("stats and health", async () => {
    await w.health();
    const st = await w.stats();
    assert.ok(st.max_sessions > 0);
  });
});

describe("exec", () => {
  let s;
  before(async () => (s = await w.sessions.create()));
  after(() => s.delete());

  test("command keeps shell state; argv; env; exit code", async () => {
    const r = await s.exec("cd /tmp && export G=hi && echo $G; echo oops >&2; (exit 3)");
    assert.deepEqual([r.stdout, r.stderr, r.exit_code], ["hi\n", "oops\n", 3]);
    assert.equal((await s.exec("echo $PWD $G")).stdout, "/tmp hi\n");
    assert.equal((await s.exec(["printf", "%s|", "a b", "c"])).stdout, "a b|c|");
    assert.equal((await s.exec("echo $X", { env: { X: "y" } })).stdout, "y\n");
    const t = await s.exec("sleep 5", { timeout_ms: 200 });
    assert.equal(t.timed_out, true);
  });

  test("execStream yields chunks as written, then the result", async () => {
    const st = s.execStream("for i in 1 2 3; do echo $i; sleep 0.05; done; echo e >&2; exit 2");
    const got = [];
    for await (const c of st) got.push([c.stream, c.text]);
    const res = await st.wait();
    assert.equal(res.exit_code, 2);
    assert.equal((await st.result).exit_code, 2, "result is wait as a property");
    assert.equal(got.filter(([k]) => k === "stdout").map(([, t]) => t).join(""), "1\n2\n3\n");
    assert.deepEqual(got.filter(([k]) => k === "stderr"), [["stderr", "e\n"]]);
    // Not iterated: wait alone reads it.
    assert.equal((await s.execStream("true").wait()).exit_code, 0);
    // Bytes that are not UTF-8 arrive exact.
    const bin = s.execStream("printf '\\377\\376'");
    const bytes = [];
    for await (const c of bin) bytes.push(...c.data);
    assert.deepEqual(bytes, [0xff, 0xfe]);
  });

  test("a cut exec stream throws StreamInterruptedError (the daemon keeps no copy)", async () => {
    const p = await proxy();
    try {
      const wp = new Warren({ url: p.url, key: process.env.WARREN_KEY });
      const sp = await wp.sessions.get(s.id);
      p.cut(400);
      const st = sp.execStream("for i in $(seq 1 50); do echo line-$i; sleep 0.02; done");
      await assert.rejects(async () => {
        for await (const _ of st) void _;
      }, StreamInterruptedError);
      assert.equal(p.cuts, 1);
    } finally {
      await p.close();
    }
  });

  test("AbortSignal cancels an exec in flight", async () => {
    const ac = new AbortController();
    const t0 = Date.now();
    setTimeout(() => ac.abort(), 200);
    await assert.rejects(s.exec("sleep 10", { signal: ac.signal }), (e) => e.name === "AbortError");
    assert.ok(Date.now() - t0 < 3000, "abort took too long");
    // A stream too.
    const ac2 = new AbortController();
    const st = s.execStream("for i in $(seq 1 100); do echo $i; sleep 0.05; done", { signal: ac2.signal });
    await assert.rejects(async () => {
      for await (const c of st) if (c.text.includes("3")) ac2.abort();
    }, (e) => e.name === "AbortError");
    // An already aborted signal fails before sending.
    await assert.rejects(w.sessions.create({}, { signal: AbortSignal.abort() }), (e) => e.name === "AbortError");
  });
});

describe("files", () => {
  let s;
  before(async () => (s = await w.sessions.create()));
  after(() => s.delete());

  test("write, read, readText, stream, stat, list, mkdir, exists, remove", async () => {
    const w1 = await s.files.write("d/a.txt", "hello", { mode: 0o640 });
    assert.equal(w1.size, 5);
    assert.equal(await s.files.readText("d/a.txt"), "hello");
    const bin = new Uint8Array(256).map((_, i) => i);
    await s.files.write("/tmp/bin", bin);
    assert.deepEqual(await s.files.read("/tmp/bin"), bin);
    assert.deepEqual(await bytesOf(await s.files.stream("/tmp/bin")), bin);
    await s.files.write("/tmp/blob", new Blob(["blob!"]));
    assert.equal(await s.files.readText("/tmp/blob"), "blob!");
    await s.files.write("/tmp/stream", new Blob(["streamed"]).stream());
    assert.equal(await s.files.readText("/tmp/stream"), "streamed");
    const st = await s.files.stat("d/a.txt");
    assert.deepEqual([st.type, st.mode, st.size], ["file", "0640", 5]);
    assert.equal((await s.files.mkdir("d/e/f")).type, "dir");
    assert.deepEqual((await s.files.list("d")).map((e) => e.name).sort(), ["a.txt", "e"]);
    assert.equal(await s.files.exists("d/a.txt"), true);
    await s.files.remove("d/a.txt");
    assert.equal(await s.files.exists("d/a.txt"), false);
    await assert.rejects(s.files.remove("d"), (e) => e instanceof WarrenError && e.status >= 400);
    await s.files.remove("d", { recursive: true });
    await assert.rejects(s.files.readText("d/a.txt"), NotFoundError);
  });

  test("a large file is streamed both ways, never held whole", async () => {
    const size = 24 << 20;
    const chunk = new Uint8Array(1 << 20).fill(0x61);
    let sent = 0;
    const body = new ReadableStream({
      pull(c) {
        if (sent >= size) return c.close();
        c.enqueue(chunk);
        sent += chunk.length;
      },
    });
    const wr = await s.files.write("/tmp/big", body);
    assert.equal(wr.size, size);
    let got = 0;
    const reader = (await s.files.stream("/tmp/big")).getReader();
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      got += value.length;
    }
    assert.equal(got, size);
  });

  test("uploadDir and downloadDir round-trip a tree (long names, symlinks, modes)", async () => {
    const src = await mkdtemp(join(tmpdir(), "warren-sdk-up-"));
    const dst = await mkdtemp(join(tmpdir(), "warren-sdk-down-"));
    try {
      const long = "n".repeat(120);
      await mkdir(join(src, "sub", long), { recursive: true });
      await writeFile(join(src, "top.txt"), "top\n");
      await writeFile(join(src, "sub", long, "deep.sh"), "#!/bin/sh\necho deep\n", { mode: 0o755 });
      await symlink("top.txt", join(src, "link"));
      await s.files.uploadDir(src, "/tmp/tree");
      assert.equal((await s.exec(`sh /tmp/tree/sub/${long}/deep.sh; cat /tmp/tree/link; stat -c %a /tmp/tree/sub/${long}/deep.sh`)).stdout, "deep\ntop\n755\n");
      await s.files.write("/tmp/tree/made-inside", "inside");
      await s.files.downloadDir("/tmp/tree", dst);
      assert.equal(await readFile(join(dst, "made-inside"), "utf8"), "inside");
      assert.equal(await readFile(join(dst, "sub", long, "deep.sh"), "utf8"), "#!/bin/sh\necho deep\n");
      assert.equal((await stat(join(dst, "sub", long, "deep.sh"))).mode & 0o777, 0o755);
      assert.equal(await readlink(join(dst, "link")), "top.txt");
      // The archive calls, raw.
      const tar = await bytesOf(await s.files.downloadTar("/tmp/tree"));
      await s.files.uploadTar("/tmp/copy", tar);
      assert.equal(await s.files.readText("/tmp/copy/top.txt"), "top\n");
    } finally {
      await rm(src, { recursive: true, force: true });
      await rm(dst, { recursive: true, force: true });
    }
  });
});

describe("processes", () => {
  let s;
  before(async () => (s = await w.sessions.create()));
  after(() => s.delete());

  test("start, list, get, logs, wait, read", async () => {
    const p = await s.processes.start("for i in 1 2 3; do echo out$i; echo err$i >&2; sleep 0.05; done; exit 4");
    assert.match(p.id, /^p\d+$/);
    assert.ok((await s.processes.list()).some((x) => x.id === p.id));
    const events = [];
    for await (const ev of p.logs({ follow: true })) events.push(ev);
    const exit = events.at(-1);
    assert.deepEqual([exit.type, exit.exitCode], ["exit", 4]);
    const out = events.filter((e) => e.type === "output");
    assert.equal(out.filter((e) => e.stream === "stdout").map((e) => e.text).join(""), "out1\nout2\nout3\n");
    assert.equal(out.filter((e) => e.stream === "stderr").map((e) => e.text).join(""), "err1\nerr2\nerr3\n");
    for (let i = 1; i < out.length; i++) assert.equal(out[i].offset, out[i - 1].next, "offsets are contiguous");
    assert.deepEqual(await p.wait(), { exit_code: 4 });
    const info = await p.refresh();
    assert.deepEqual([info.state, info.exit_code, info.output_bytes], ["exited", 4, exit.next]);
    // From an offset, without follow.
    const tail = [];
    for await (const ev of s.processes.logs(p.id, { offset: out[2].offset })) if (ev.type === "output") tail.push(ev.text);
    assert.equal(tail.join(""), out.slice(2).map((e) => e.text).join(""));
    const raw = await s.processes.read(p.id, { offset: 5 });
    assert.equal(raw.offset, 5);
    assert.equal(new TextDecoder().decode(await bytesOf(raw.stream)).length, exit.next - 5);
  });

  test("output dropped from the bounded buffer is a gap event", async () => {
    const p = await s.processes.start("head -c 1500000 /dev/zero | tr '\\0' a; echo; echo end");
    await p.wait();
    const info = await p.refresh();
    assert.ok(info.output_start > 0, `nothing was dropped: ${JSON.stringify(info)}`);
    const evs = [];
    for await (const ev of p.logs()) evs.push(ev);
    assert.deepEqual([evs[0].type, evs[0].offset, evs[0].next], ["gap", 0, info.output_start]);
    assert.equal(evs.filter((e) => e.type === "output")[0].offset, info.output_start);
    assert.equal(evs.at(-1).type, "exit");
  });

  test("writeStdin, signal, kill, resize", async () => {
    const cat = await s.processes.start(["cat"], { stdin: true });
    assert.equal(await cat.writeStdin("piped\n"), 6);
    await cat.writeStdin(new Uint8Array([0x61, 0x0a]), { eof: true });
    assert.deepEqual(await cat.wait(), { exit_code: 0 });
    const text = [];
    for await (const ev of cat.logs()) if (ev.type === "output") text.push(ev.text);
    assert.equal(text.join(""), "piped\na\n");

    const sleeper = await s.processes.start("sleep 30");
    await sleeper.signal("TERM");
    const x = await sleeper.wait();
    assert.equal(x.signal, "SIGTERM");

    const tty = await s.processes.start("stty size; sleep 30", { tty: true, cols: 90, rows: 20 });
    await tty.resize(100, 40);
    await tty.kill();
    await assert.rejects(s.processes.get(tty.id), NotFoundError);
    await assert.rejects(s.processes.signal("p999", "TERM"), NotFoundError);
  });

  test("a followed stream cut by the network resumes from its offset, losing and repeating nothing", async () => {
    const p = await proxy();
    try {
      const wp = new Warren({ url: p.url, key: process.env.WARREN_KEY });
      const sp = await wp.sessions.get(s.id);
      const proc = await sp.processes.start("for i in $(seq 1 300); do echo line-$i; sleep 0.005; done");
      // Each of the first 4 connections is cut after 700 bytes of answer
      // (headers and a few events), mid-event.
      p.cut(700, 4);
      let text = "";
      let last = 0;
      for await (const ev of proc.logs({ follow: true })) {
        if (ev.type === "output") {
          assert.equal(ev.offset, last, "no gap and no repeat across reconnects");
          last = ev.next;
          text += ev.text;
        }
      }
      const want = Array.from({ length: 300 }, (_, i) => `line-${i + 1}\n`).join("");
      assert.equal(text, want);
      assert.equal(p.cuts, 4, "the proxy cut four connections");
    } finally {
      await p.close();
    }
  });

  test("a stream that keeps failing gives up with StreamInterruptedError; AbortSignal ends a followed stream", async () => {
    const p = await proxy();
    try {
      const wp = new Warren({ url: p.url, key: process.env.WARREN_KEY });
      const sp = await wp.sessions.get(s.id);
      const proc = await sp.processes.start("sleep 30");
      p.cut(1, 100);
      await assert.rejects(async () => {
        for await (const _ of proc.logs({ follow: true, retries: 2 })) void _;
      }, (e) => e instanceof StreamInterruptedError && e.offset === 0);
      p.cut(0, 0);
      const ac = new AbortController();
      setTimeout(() => ac.abort(), 300);
      const t0 = Date.now();
      await assert.rejects(async () => {
        for await (const _ of proc.logs({ follow: true, signal: ac.signal })) void _;
      }, (e) => e.name === "AbortError");
      assert.ok(Date.now() - t0 < 3000);
      await proc.kill();
    } finally {
      await p.close();
    }
  });
});

describe("snapshots, fork, workspaces, images", () => {
  test("snapshot, get, list, export, import, new session from it, delete", async () => {
    const s = await w.sessions.create();
    await s.files.write("/workspace/state.txt", "v1");
    const name = `ts-snap-${process.pid}`;
    const snap = await s.snapshot(name);
    assert.equal(snap.name, name);
    assert.ok((await w.snapshots.list()).some((x) => x.name === name));
    assert.equal((await w.snapshots.get(name)).session, s.id);
    const archive = await bytesOf(await w.snapshots.export(name));
    assert.ok(archive.length > 0);
    const imported = await w.snapshots.import(`${name}-copy`, archive);
    assert.equal(imported.name, `${name}-copy`);
    const s2 = await w.sessions.create({ snapshot: `${name}-copy` });
    assert.equal(await s2.files.readText("/workspace/state.txt"), "v1");
    await s2.delete();
    await s.delete();
    await w.snapshots.delete(`${name}-copy`);
    await w.snapshots.delete(name);
    await assert.rejects(w.snapshots.get(name), NotFoundError);
  });

  test("fork: n sessions from one, each with the files, each deleted by close", async () => {
    const w2 = client();
    const s = await w2.sessions.create();
    await s.files.write("/workspace/f", "forked");
    const { sessions, snapshot } = await s.fork({ count: 2 });
    assert.equal(sessions.length, 2);
    assert.ok(snapshot.name);
    for (const f of sessions) assert.equal(await f.files.readText("/workspace/f"), "forked");
    const ids = [s.id, ...sessions.map((x) => x.id)];
    await w2.close();
    for (const id of ids) await assert.rejects(w.sessions.get(id), NotFoundError);
  });

  test("workspaces: create, mount, list, get, delete", async () => {
    const name = `ts-ws-${process.pid}`;
    const ws = await w.workspaces.create({ name, size_mb: 32 });
    assert.equal(ws.name, name);
    const s = await w.sessions.create({ workspace: name });
    await s.files.write("/workspace/kept", "kept");
    assert.deepEqual((await w.workspaces.get(name)).mounted_by.map((m) => m.session), [s.id]);
    await s.delete();
    const s2 = await w.sessions.create({ workspace: name });
    assert.equal(await s2.files.readText("/workspace/kept"), "kept");
    await s2.delete();
    assert.ok((await w.workspaces.list()).some((x) => x.name === name));
    await w.workspaces.delete(name);
    await assert.rejects(w.workspaces.get(name), NotFoundError);
  });

  test("images: list, get, import, delete, prune", async (t) => {
    const imgs = await w.images.list();
    assert.ok(imgs.length > 0);
    const base = await w.images.get(imgs[0].name);
    assert.equal(base.name, imgs[0].name);
    // A tiny root filesystem of our own: busybox as /bin/sh (the daemon
    // refuses an image without a shell).
    const { execFileSync } = await import("node:child_process");
    let busybox;
    try {
      busybox = execFileSync("sh", ["-c", "command -v busybox"], { encoding: "utf8" }).trim();
    } catch {
      return t.skip("needs busybox on the host for a tiny image (.ci/run installs busybox-static)");
    }
    const dir = await mkdtemp(join(tmpdir(), "warren-sdk-img-"));
    try {
      await mkdir(join(dir, "bin"));
      await writeFile(join(dir, "bin", "busybox"), await readFile(busybox), { mode: 0o755 });
      await symlink("busybox", join(dir, "bin", "sh"));
      const { packDir } = await import("../dist/tar.js");
      const name = `ts-img-${process.pid}`;
      const img = await w.images.import(name, await packDir(dir));
      assert.equal(img.name, name);
      await w.images.delete(name);
      await assert.rejects(w.images.get(name), NotFoundError);
      // Errors before a pull's stream starts are typed like any other.
      await assert.rejects(w.images.pull("not a valid ref!"), InvalidArgumentError);
      const pr = await w.images.prune();
      assert.equal(typeof pr, "object");
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});

describe("network and ports", () => {
  test("network: get, denials; set on a session without a link is a ConflictError", async () => {
    const s = await w.sessions.create();
    try {
      assert.equal((await s.network.get()).mode, "none");
      assert.deepEqual(await s.network.denials(), []);
      await assert.rejects(s.network.set({ mode: "open" }), ConflictError);
      await assert.rejects(s.network.allow(["example.com"]), ConflictError);
    } finally {
      await s.delete();
    }
  });

  test("network: allow, deny, set, denials on an allowlist session", async (t) => {
    // sdk_test.go gives the daemon a fake internet whose resolver answers
    // allowed.test and other.test (internal/network/nettest).
    if (!process.env.WARREN_FAKE_INTERNET) return t.skip("needs the fake internet of sdk_test.go (WARREN_FAKE_INTERNET)");
    const s = await w.sessions.create({ network: { mode: "allowlist", allow: ["allowed.test"] } });
    try {
      const resolve = async (name) => (await s.exec(`getent hosts ${name} >/dev/null && echo yes || echo no`)).stdout.trim();
      assert.equal(await resolve("allowed.test"), "yes");
      assert.equal(await resolve("other.test"), "no");
      assert.ok((await s.network.denials()).some((d) => d.host.startsWith("other.test")), "the refused name is in the denials");
      let p = await s.network.allow("other.test", "allowed.test", { signal: AbortSignal.timeout(10000) });
      assert.deepEqual([...p.allow].sort(), ["allowed.test", "other.test"]);
      assert.equal(await resolve("other.test"), "yes", "allowed live, without a restart");
      p = await s.network.deny("other.test");
      assert.deepEqual(p.deny, ["other.test"]);
      assert.equal(await resolve("other.test"), "no", "deny wins over allow");
      p = await s.network.set({ allow: ["allowed.test"] });
      assert.deepEqual([p.allow, p.deny ?? []], [["allowed.test"], []]);
      await assert.rejects(s.network.set({ allow: ["bad rule!"] }), InvalidArgumentError);
    } finally {
      await s.delete();
    }
  });

  test("ports: list and url of a server in the session", async () => {
    const s = await w.sessions.create();
    try {
      await s.files.write("/tmp/www/index.html", "served by the sandbox");
      await s.processes.start("cd /tmp/www && exec python3 -m http.server 8123 --bind 127.0.0.1");
      let ports = [];
      for (let i = 0; i < 100 && !ports.some((p) => p.port === 8123); i++) {
        await new Promise((r) => setTimeout(r, 100));
        ports = await s.ports.list();
      }
      const port = ports.find((p) => p.port === 8123);
      assert.ok(port, `port 8123 not listed: ${JSON.stringify(ports)}`);
      const url = await s.ports.url(8123, { path: "index.html" });
      assert.equal(url, `${URL_}/v1/sessions/${s.id}/ports/8123/index.html`);
      const r = await fetch(url, { headers: { authorization: `Bearer ${process.env.WARREN_KEY}` } });
      assert.equal(await r.text(), "served by the sandbox");
      // With a token in the URL, as a browser opens it: no header needed.
      const tokURL = await s.ports.url(8123, { path: "index.html", token: true });
      assert.match(tokURL, /\?token=wrt_/);
      assert.equal(await (await fetch(tokURL)).text(), "served by the sandbox");
      await assert.rejects(s.ports.setPublic(8123, true), (e) => e instanceof WarrenError);
    } finally {
      await s.delete();
    }
  });
});

describe("shell", () => {
  let s;
  before(async () => (s = await w.sessions.create()));
  after(() => s.delete());

  test("open, type, read, resize, detach and attach again, exit code", async () => {
    const sh = await s.shell({ cols: 120, rows: 30 });
    assert.match(sh.processId, /^p\d+$/);
    sh.write("stty size; echo $((6*7))\n");
    assert.match(await sh.readUntil("42\r\n", { timeoutMs: 10000 }), /30 120/);
    sh.resize(100, 40);
    sh.write("stty size\n");
    await sh.readUntil("40 100", { timeoutMs: 10000 });
    sh.write("export MARK=attached\n");
    assert.equal(await sh.close(), undefined, "closing the connection leaves the shell running");
    const procs = await s.processes.list();
    assert.equal(procs.find((p) => p.id === sh.processId)?.state, "running");
    const again = await s.shell({ process: sh.processId });
    again.write("echo $MARK; exit 7\n");
    await again.readUntil("attached", { timeoutMs: 10000 });
    assert.deepEqual(await again.closed, { exitCode: 7, signal: undefined });
    assert.equal(again.exitCode, 7);
  });

  test("killOnClose, iteration, AbortSignal, typed errors", async () => {
    const sh = await s.shell({ killOnClose: true });
    sh.write("echo iter-$((1+1))\n");
    let seen = "";
    for await (const b of sh) {
      seen += new TextDecoder().decode(b);
      if (seen.includes("iter-2\r\n")) break;
    }
    await sh.close();
    for (let i = 0; i < 50; i++) {
      const p = (await s.processes.list()).find((x) => x.id === sh.processId);
      if (!p || p.state === "exited") break;
      await new Promise((r) => setTimeout(r, 100));
    }
    const p = (await s.processes.list()).find((x) => x.id === sh.processId);
    assert.ok(!p || p.state === "exited", "killOnClose ended the shell");
    await assert.rejects(w.sessions.get("no-such").then(() => {}), NotFoundError);
    await assert.rejects((async () => (await (await client().sessions.get(s.id))).shell({ process: "p999" }))(), NotFoundError);
    const ghost = new Warren({ url: URL_, key: process.env.WARREN_KEY });
    const gs = await ghost.sessions.get(s.id);
    await gs.delete().catch(() => {});
    await assert.rejects(gs.shell(), NotFoundError);
    s = await w.sessions.create();
    await assert.rejects(s.shell({ signal: AbortSignal.abort() }), (e) => e.name === "AbortError");
  });

  test("a runtime WebSocket without headers gets a minted token in the URL", async () => {
    const { WebSocket } = await import("ws");
    const urls = [];
    class HeaderlessWS extends WebSocket {
      constructor(url) {
        urls.push(url);
        super(url); // no headers: as a browser's WebSocket
      }
    }
    const sh = await s.shell({ webSocket: HeaderlessWS, killOnClose: true });
    sh.write("echo via-token\n");
    await sh.readUntil("via-token\r\n", { timeoutMs: 10000 });
    await sh.close();
    assert.match(urls[0], /[?&]token=wrt_/);
    assert.doesNotMatch(urls[0], /wrn_/, "an API key never goes into a URL");
  });
});

describe("errors", () => {
  test("each class from the daemon", async () => {
    await assert.rejects(w.sessions.create({ id: "Bad ID!" }), InvalidArgumentError);
    await assert.rejects(new Warren({ url: URL_, key: "wrn_nope_nope" }).sessions.list(), UnauthenticatedError);
    const tkey = await tenantKey(`sdkt${process.pid}`);
    await assert.rejects(new Warren({ url: URL_, key: tkey }).sessions.list({ all: true }), PermissionDeniedError);
    const e404 = await w.sessions.get("missing").catch((e) => e);
    assert.ok(e404 instanceof NotFoundError);
    assert.deepEqual([e404.status, e404.code], [404, "not_found"]);
    assert.ok(e404.requestId, "the request id comes with the error");
    const s = await w.sessions.create();
    try {
      await assert.rejects(w.sessions.create({ id: s.id, image: "other" }), ConflictError);
      await assert.rejects(s.exec(["echo", "x".repeat(140000)]), TooLargeError);
    } finally {
      await s.delete();
    }
  });

  test("QuotaExceededError names the quota", async () => {
    const tenant = `sdkq${process.pid}`;
    await admin("PUT", `/v1/tenants/${tenant}`, { quota: { max_sessions: 1 } });
    const tw = new Warren({ url: URL_, key: await tenantKey(tenant) });
    try {
      await tw.sessions.create();
      const e = await tw.sessions.create().catch((x) => x);
      assert.ok(e instanceof QuotaExceededError, `got ${e}`);
      assert.ok(e instanceof ResourceExhaustedError);
      assert.equal(e.quota, "max_sessions");
      assert.equal(e.status, 429);
    } finally {
      await tw.close();
    }
  });

  test("RateLimitedError carries retryAfter", async (t) => {
    // sdk_test.go starts a second daemon whose keys may make 1 call a second
    // in bursts of 3.
    const url = process.env.WARREN_LIMITED_URL;
    if (!url) return t.skip("needs WARREN_LIMITED_URL and WARREN_LIMITED_KEY: a daemon with a low rate limit (sdk_test.go starts one)");
    const tw = new Warren({ url, key: process.env.WARREN_LIMITED_KEY });
    const results = await Promise.allSettled(Array.from({ length: 10 }, () => tw.sessions.list()));
    const limited = results.filter((r) => r.status === "rejected").map((r) => r.reason);
    assert.ok(limited.length >= 5, `only ${limited.length} of 10 calls were rate-limited`);
    for (const e of limited) {
      assert.ok(e instanceof RateLimitedError, `got ${e}`);
      assert.ok(e instanceof ResourceExhaustedError);
      assert.ok(e.retryAfter >= 1);
    }
  });

  test("a daemon that cannot be reached is a ConnectionFailedError, an UnavailableError", async () => {
    const net = await import("node:net");
    const srv = net.createServer();
    await new Promise((r) => srv.listen(0, "127.0.0.1", r));
    const port = srv.address().port;
    await new Promise((r) => srv.close(r)); // nothing listens there now
    const e = await new Warren({ url: `http://127.0.0.1:${port}`, key: "k" }).sessions.list().catch((x) => x);
    assert.ok(e instanceof ConnectionFailedError, `got ${e}`);
    assert.ok(e instanceof UnavailableError);
    assert.equal(e.status, 0);
    assert.match(e.message, /ECONNREFUSED/);
    assert.ok(e.cause);
  });

  test("unavailable, internal and a proxy's page map by status", async () => {
    const fake = (status, body, headers = {}) => new Warren({ url: "http://x", fetch: async () => new Response(body, { status, headers }) });
    const e503 = await fake(503, '{"error":{"code":"unavailable","message":"draining"}}').stats().catch((e) => e);
    assert.ok(e503 instanceof UnavailableError);
    assert.equal(e503.message, "unavailable: draining");
    assert.ok((await fake(500, '{"error":{"code":"internal","message":"bug"}}').stats().catch((e) => e)) instanceof InternalError);
    const page = await fake(502, "<html><title>Bad Gateway</title></html>", { "content-type": "text/html" }).stats().catch((e) => e);
    assert.ok(page instanceof UnavailableError);
    assert.match(page.message, /HTTP 502.*Bad Gateway/);
    const unknown = await fake(418, '{"error":{"code":"teapot","message":"?"}}').stats().catch((e) => e);
    assert.ok(unknown instanceof WarrenError);
    assert.equal(unknown.code, "teapot");
  });
});

describe("runtimes", () => {
  test("the core is browser-safe: no node: imports, no Buffer, outside the tar helper and the adapters", async () => {
    const { readdir } = await import("node:fs/promises");
    const dir = new globalThis.URL("../dist/", import.meta.url);
    for (const f of await readdir(dir)) {
      if (!f.endsWith(".js") || f === "tar.js" || f === "readme-quickstart.mjs") continue;
      // The code, without its comments.
      const src = (await readFile(new globalThis.URL(f, dir), "utf8")).replace(/\/\*[\s\S]*?\*\//g, "").replace(/^\s*\/\/.*$/gm, "");
      assert.doesNotMatch(src, /from "node:|require\(|\bBuffer\./, `${f} would not load in a browser`);
    }
  });
});

describe("cleanup", () => {
  test("close deletes what the client created; withSession deletes on throw; asyncDispose", async () => {
    const w2 = client();
    const a = await w2.sessions.create();
    const b = await w2.sessions.create();
    await b.delete();
    let inside;
    await assert.rejects(
      w2.withSession(async (s) => {
        inside = s.id;
        throw new Error("boom");
      }),
      /boom/,
    );
    await assert.rejects(w.sessions.get(inside), NotFoundError);
    const c = await w2.sessions.create();
    await c[Symbol.asyncDispose]();
    await assert.rejects(w.sessions.get(c.id), NotFoundError);
    assert.equal(typeof Symbol.asyncDispose, "symbol");
    await w2[Symbol.asyncDispose]();
    await assert.rejects(w.sessions.get(a.id), NotFoundError);
    assert.equal(w2.created.size, 0);
  });

  test("closeOnExit: a program stopped by SIGTERM, or ending on its own, leaves no session", async () => {
    const { spawn } = await import("node:child_process");
    const dist = JSON.stringify(new globalThis.URL("../dist/index.js", import.meta.url).href);
    const run = (code, signal) =>
      new Promise((resolve, reject) => {
        const c = spawn(process.execPath, ["--input-type=module", "-e", code], { env: process.env, stdio: ["ignore", "pipe", "inherit"] });
        let out = "";
        c.stdout.on("data", (d) => {
          out += d;
          if (signal && out.includes("\n")) c.kill(signal);
        });
        c.on("error", reject);
        c.on("exit", (code, sig) => resolve({ id: out.trim(), code, sig }));
      });
    const stopped = await run(`
      import { Warren } from ${dist};
      const w = new Warren();
      w.closeOnExit();
      const s = await w.sessions.create();
      console.log(s.id);
      setInterval(() => {}, 1000);
    `, "SIGTERM");
    assert.equal(stopped.sig, "SIGTERM", "the signal is raised again after cleanup");
    await assert.rejects(w.sessions.get(stopped.id), NotFoundError);
    const ended = await run(`
      import { Warren } from ${dist};
      const w = new Warren();
      w.closeOnExit();
      console.log((await w.sessions.create()).id);
    `);
    assert.equal(ended.code, 0);
    await assert.rejects(w.sessions.get(ended.id), NotFoundError);
  });

  test("a program that exits after close leaves no session", async () => {
    const { execFileSync } = await import("node:child_process");
    const out = execFileSync(process.execPath, ["--input-type=module", "-e", `
      import { Warren } from ${JSON.stringify(new globalThis.URL("../dist/index.js", import.meta.url).href)};
      const w = new Warren();
      const s = await w.sessions.create();
      console.log(s.id);
      process.on("beforeExit", () => {});
      await w.close();
    `], { env: process.env, encoding: "utf8" });
    await assert.rejects(w.sessions.get(out.trim()), NotFoundError);
  });
});
