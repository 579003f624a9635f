// Measures, against the daemon at $WARREN_URL, what the SDK costs:
//  1. create + first exec + delete of a session from the SDK, from bare
//     fetch, and from curl (three processes, as a shell script would), in
//     the same run;
//  2. the SDK's own time per call on top of the HTTP round trip: the same
//     GET through the SDK and through bare fetch, interleaved, on the live
//     daemon; and the SDK alone against a fetch that answers at once (no
//     network), which isolates its own work (target: under 0.1 ms).
// Prints one JSON line, BENCH {...}; sdk_test.go logs it. docs/BENCHMARKS.md
// has the numbers of a run.
import { execFileSync } from "node:child_process";
import { performance } from "node:perf_hooks";
import { Warren } from "../dist/index.js";

const url = process.env.WARREN_URL;
const key = process.env.WARREN_KEY;
const rounds = Number(process.env.BENCH_ROUNDS ?? 10);
const w = new Warren({ url, key });
const auth = { authorization: `Bearer ${key}` };

const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)];
};
const ms = (x) => Math.round(x * 1000) / 1000;

async function time(fn) {
  const t0 = performance.now();
  await fn();
  return performance.now() - t0;
}

const lifecycle = {
  sdk: async () => {
    const s = await w.sessions.create();
    await s.exec("true");
    await s.delete();
  },
  fetch: async () => {
    const r = await fetch(`${url}/v1/sessions`, { method: "POST", headers: { ...auth, "content-type": "application/json" }, body: "{}" });
    const { id } = await r.json();
    const e = await fetch(`${url}/v1/sessions/${id}/exec`, { method: "POST", headers: { ...auth, "content-type": "application/json" }, body: '{"command":"true"}' });
    await e.json();
    const d = await fetch(`${url}/v1/sessions/${id}`, { method: "DELETE", headers: auth });
    await d.arrayBuffer();
  },
  curl: async () => {
    const h = ["-sS", "-f", "-H", `Authorization: Bearer ${key}`];
    const out = execFileSync("curl", [...h, "-X", "POST", "-d", "{}", `${url}/v1/sessions`], { encoding: "utf8" });
    const id = JSON.parse(out).id;
    execFileSync("curl", [...h, "-X", "POST", "-d", '{"command":"true"}', `${url}/v1/sessions/${id}/exec`]);
    execFileSync("curl", [...h, "-X", "DELETE", `${url}/v1/sessions/${id}`]);
  },
};

let haveCurl = true;
try {
  execFileSync("curl", ["--version"]);
} catch {
  haveCurl = false;
}

const result = { rounds, lifecycle_ms: {}, per_call: {} };
for (const f of Object.values(lifecycle)) await f().catch(() => {}); // warm up
const samples = { sdk: [], fetch: [], curl: [] };
for (let i = 0; i < rounds; i++) {
  for (const [name, f] of Object.entries(lifecycle)) {
    if (name === "curl" && !haveCurl) continue;
    samples[name].push(await time(f));
  }
}
for (const [name, xs] of Object.entries(samples)) if (xs.length) result.lifecycle_ms[name] = { median: ms(median(xs)), min: ms(Math.min(...xs)) };

// 2a. Live: GET a session, SDK vs bare fetch, interleaved. The daemon
// rate-limits a key to 200 calls/s in bursts of 400 (the default): the
// calls stay under the burst, after a pause that refills it.
await new Promise((r) => setTimeout(r, 2000));
const s = await w.sessions.create();
const n = Number(process.env.BENCH_CALLS ?? 150);
const sdkT = [];
const rawT = [];
for (let i = 0; i < 20; i++) {
  await w.sessions.get(s.id);
  await (await fetch(`${url}/v1/sessions/${s.id}`, { headers: { ...auth, accept: "application/json" } })).json();
}
for (let i = 0; i < n; i++) {
  sdkT.push(await time(() => w.sessions.get(s.id)));
  rawT.push(await time(async () => (await fetch(`${url}/v1/sessions/${s.id}`, { headers: { ...auth, accept: "application/json" } })).json()));
}
await s.delete();
result.per_call.live_get_sdk_ms = ms(median(sdkT));
result.per_call.live_get_fetch_ms = ms(median(rawT));
result.per_call.live_overhead_ms = ms(median(sdkT) - median(rawT));

// 2b. No network: a fetch that answers at once with a canned session.
const body = JSON.stringify(s.info);
const stub = async () => new Response(body, { status: 200, headers: { "content-type": "application/json" } });
const ws = new Warren({ url: "http://stub", key, fetch: stub });
// Blocks of calls, SDK and bare fetch alternating, so that a busy machine
// (other processes, GC) weighs on both alike; medians of the blocks.
const blocks = Number(process.env.BENCH_STUB_BLOCKS ?? 20);
const per = 2000;
const block = async (f) => {
  const t0 = performance.now();
  for (let i = 0; i < per; i++) await f();
  return (performance.now() - t0) / per;
};
const bareCall = async () => (await stub(`http://stub/v1/sessions/${s.id}`, { method: "GET", headers: { ...auth, accept: "application/json" } })).json();
const sdkCall = () => ws.sessions.get(s.id);
await block(bareCall);
await block(sdkCall);
const bareB = [];
const sdkB = [];
for (let i = 0; i < blocks; i++) {
  bareB.push(await block(bareCall));
  sdkB.push(await block(sdkCall));
}
const diffs = sdkB.map((x, i) => x - bareB[i]);
result.per_call.stub_sdk_ms = ms(median(sdkB));
result.per_call.stub_fetch_ms = ms(median(bareB));
result.per_call.sdk_own_ms = ms(median(diffs));
console.log("BENCH " + JSON.stringify(result));
