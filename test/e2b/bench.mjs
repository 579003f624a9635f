// Time to interactive: Sandbox.create() to the first
// commands.run('echo hi') through E2B's SDK against warren's E2B API, next
// to the same through warren's native REST API (create a session, exec
// `echo hi`), sequentially and 10 at once, in the same run. It is how
// public sandbox benchmarks measure providers (time to first command).
// Deletion is not timed.
//
//   WARREN_URL=http://127.0.0.1:7433 WARREN_KEY=wrn_... E2B_API_KEY=e2b_... \
//     node test/e2b/bench.mjs [rounds=20] [parallel=10]
//
// WARREN_KEY may be empty for a daemon without authentication.
import { Sandbox } from 'e2b'

const base = process.env.WARREN_URL ?? 'http://127.0.0.1:7433'
const warrenKey = process.env.WARREN_KEY ?? ''
const rounds = Number(process.argv[2] ?? 20)
const parallel = Number(process.argv[3] ?? 10)
const opts = { apiUrl: `${base}/e2b`, sandboxUrl: `${base}/e2b`, apiKey: process.env.E2B_API_KEY }

async function e2bOnce() {
  const t0 = performance.now()
  const sb = await Sandbox.create(opts)
  const r = await sb.commands.run('echo hi')
  const ms = performance.now() - t0
  if (r.stdout !== 'hi\n') throw new Error(`echo hi printed ${JSON.stringify(r.stdout)}`)
  await sb.kill()
  return ms
}

async function rest(method, path, body) {
  const res = await fetch(base + path, {
    method,
    headers: { 'Content-Type': 'application/json', ...(warrenKey && { Authorization: `Bearer ${warrenKey}` }) },
    body: body && JSON.stringify(body),
  })
  const text = await res.text()
  if (!res.ok) throw new Error(`${method} ${path}: ${res.status} ${text}`)
  return text ? JSON.parse(text) : undefined
}

// The native API with the same image and user as E2B's base template.
async function nativeOnce() {
  const t0 = performance.now()
  const s = await rest('POST', '/v1/sessions', { image: 'e2b-base', user: 'user' })
  const r = await rest('POST', `/v1/sessions/${s.id}/exec`, { command: 'echo hi' })
  const ms = performance.now() - t0
  if (r.stdout !== 'hi\n') throw new Error(`echo hi printed ${JSON.stringify(r.stdout)}`)
  await rest('DELETE', `/v1/sessions/${s.id}`)
  return ms
}

function pct(xs, p) {
  const s = [...xs].sort((a, b) => a - b)
  return s[Math.min(s.length - 1, Math.ceil((p / 100) * s.length) - 1)]
}

async function measure(name, once) {
  await once() // warm: the e2b-base image is built on first use
  const seq = []
  for (let i = 0; i < rounds; i++) seq.push(await once())
  const par = []
  for (let i = 0; i < Math.max(1, Math.round(rounds / parallel)); i++) {
    par.push(...(await Promise.all(Array.from({ length: parallel }, once))))
  }
  const f = (x) => x.toFixed(1).padStart(7)
  console.log(`${name.padEnd(34)} sequential p50 ${f(pct(seq, 50))} ms  p95 ${f(pct(seq, 95))} ms   ${parallel} at once p50 ${f(pct(par, 50))} ms  p95 ${f(pct(par, 95))} ms  (n=${seq.length}/${par.length})`)
}

await measure('E2B SDK: create + run(echo hi)', e2bOnce)
await measure('warren REST: create + exec(echo hi)', nativeOnce)
