// The web console in Firefox: Debian's firefox-esr, headless, driven over
// WebDriver BiDi, the protocol Firefox speaks natively. Playwright drives
// only its own patched Firefox builds (a download), and its BiDi mode
// needs commands newer than the ESR has (emulation.setMediaFeaturesOverride),
// so this speaks the few BiDi commands it needs itself. It checks the part
// a browser engine can break: the modules load and run under the strict
// CSP without a violation, sign-in sets the cookie, a session is created
// from the form, its terminal takes `echo hi` and shows `hi`, and the
// pages render at two sizes (screenshots firefox-*.png). console_test.go
// runs it with WARREN_URL, WARREN_KEY, FIREFOX and SHOTS.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

const { WARREN_URL: D, WARREN_KEY: KEY, FIREFOX, SHOTS } = process.env;
const step = (m) => console.log(`[${(performance.now() / 1000).toFixed(1)}s] ${m}`);
function assert(ok, msg) { if (!ok) throw new Error('assertion failed: ' + msg); }

const profile = fs.mkdtempSync(path.join(os.tmpdir(), 'warren-ff-'));
const ff = spawn(FIREFOX, ['--headless', '--remote-debugging-port=0', '--no-remote', '--profile', profile, 'about:blank'],
  { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, MOZ_HEADLESS: '1' } });
let log = '';
const wsURL = await new Promise((ok, fail) => {
  const t = setTimeout(() => fail(new Error('firefox did not start its WebDriver BiDi server in 60 s:\n' + log)), 60000);
  const read = (b) => {
    log += b;
    const m = /WebDriver BiDi listening on (ws:\/\/\S+)/.exec(log);
    if (m) { clearTimeout(t); ok(m[1]); }
  };
  ff.stdout.on('data', read);
  ff.stderr.on('data', read);
  ff.on('exit', (c) => fail(new Error(`firefox exited (${c}):\n${log}`)));
});
const cleanup = () => { try { ff.kill('SIGKILL'); } catch { /* gone */ } fs.rmSync(profile, { recursive: true, force: true }); };
process.on('exit', cleanup);

// A minimal WebDriver BiDi client: commands by id, events ignored.
const ws = new WebSocket(wsURL.replace(/\/?$/, '') + '/session');
await new Promise((ok, fail) => { ws.onopen = ok; ws.onerror = () => fail(new Error('cannot connect to ' + wsURL)); });
let next = 0;
const waiting = new Map();
ws.onmessage = (ev) => {
  const m = JSON.parse(ev.data);
  if (m.id === undefined || !waiting.has(m.id)) return;
  const { ok, fail } = waiting.get(m.id);
  waiting.delete(m.id);
  if (m.type === 'error') fail(new Error(`${m.error}: ${m.message}`));
  else ok(m.result);
};
function send(method, params = {}) {
  const id = ++next;
  ws.send(JSON.stringify({ id, method, params }));
  return new Promise((ok, fail) => waiting.set(id, { ok, fail }));
}

const s = await send('session.new', { capabilities: {} });
step(`firefox ${s.capabilities.browserVersion}`);
const tree = await send('browsingContext.getTree', {});
const context = tree.contexts[0].context;
await send('script.addPreloadScript', {
  functionDeclaration: `() => { window.__csp = []; document.addEventListener('securitypolicyviolation', (e) => window.__csp.push(e.violatedDirective + ' ' + e.blockedURI)); window.addEventListener('error', (e) => window.__csp.push('error ' + e.message)); }`,
});
const evaluate = async (expression) => {
  const r = await send('script.evaluate', { expression, target: { context }, awaitPromise: true });
  if (r.type === 'exception') throw new Error(`${expression}: ${r.exceptionDetails.text}`);
  return r.result.value;
};
const waitFor = async (expression, what, ms = 20000) => {
  const end = Date.now() + ms;
  for (;;) {
    if (await evaluate(`!!(${expression})`)) return;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
};
const shoot = async (name) => {
  for (const [w, h] of [[1280, 800], [390, 844]]) {
    await send('browsingContext.setViewport', { context, viewport: { width: w, height: h } });
    await new Promise((r) => setTimeout(r, 300));
    const shot = await send('browsingContext.captureScreenshot', { context });
    fs.writeFileSync(path.join(SHOTS, `firefox-${name}-${w}x${h}.png`), Buffer.from(shot.data, 'base64'));
  }
  await send('browsingContext.setViewport', { context, viewport: { width: 1280, height: 800 } });
};
const checkClean = async (where) => {
  const v = await evaluate('JSON.stringify(window.__csp)');
  assert(v === '[]', `${where}: CSP violations or errors in Firefox: ${v}`);
};

fs.mkdirSync(SHOTS, { recursive: true });
await send('browsingContext.setViewport', { context, viewport: { width: 1280, height: 800 } });
await send('browsingContext.navigate', { context, url: D + '/', wait: 'complete' });
await waitFor(`document.querySelector('#key')`, 'the sign-in form');
await shoot('signin');
await evaluate(`(() => { const k = document.querySelector('#key'); k.value = ${JSON.stringify(KEY)}; k.form.requestSubmit(); })()`);
await waitFor(`document.querySelector('h1')?.textContent === 'Sessions'`, 'the sessions page');
step('signed in');

await evaluate(`document.querySelector('#create').form.requestSubmit()`);
await waitFor(`/^#\\/s\\/[^/]+$/.test(location.hash)`, 'the new session\'s page', 60000);
const id = decodeURIComponent(await evaluate(`location.hash.slice(4)`));
await waitFor(`/Shell \\S+\\./.test(document.querySelector('.note')?.textContent || '')`, 'the shell');
await evaluate(`document.querySelector('#terminal .xterm-helper-textarea').focus()`);
const keys = [];
for (const ch of 'echo hi') keys.push({ type: 'keyDown', value: ch }, { type: 'keyUp', value: ch });
keys.push({ type: 'keyDown', value: '\uE007' }, { type: 'keyUp', value: '\uE007' }); // Enter
await send('input.performActions', { context, actions: [{ type: 'key', id: 'keyboard', actions: keys }] });
await waitFor(`[...document.querySelectorAll('.xterm-rows > div')].some((r) => r.textContent.trim() === 'hi')`, 'hi on the terminal');
step(`session ${id}: typed echo hi, saw hi`);
await shoot('session-terminal');
await checkClean('terminal');

await send('browsingContext.navigate', { context, url: `${D}/#/sessions`, wait: 'complete' });
await waitFor(`document.querySelector('tr[data-id="${id}"]')`, 'the session in the list');
await shoot('sessions');
await checkClean('sessions');
step('rendered under the CSP without a violation; screenshots firefox-*.png');

const res = await fetch(`${D}/v1/sessions/${id}`, { method: 'DELETE', headers: { Authorization: 'Bearer ' + KEY } });
assert(res.status === 204 || res.status === 200, 'delete the session: ' + res.status);
await send('session.end', {}).catch(() => {});
ws.close();
cleanup();
step('ok');
process.exit(0);
