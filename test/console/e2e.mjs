// The web console in a real browser: Debian's chromium, driven by
// playwright-core (no browser download). console_test.go starts the daemon
// and runs this with WARREN_URL, WARREN_KEY (an admin of tenant default),
// WARREN_OTHER_KEY (a key of another tenant), CHROMIUM and SHOTS (where the
// screenshots go). Each step prints one line; any failure exits non-zero.
import { chromium } from 'playwright-core';
import http from 'node:http';
import fs from 'node:fs';
import path from 'node:path';

const { WARREN_URL: D, WARREN_KEY: KEY, WARREN_OTHER_KEY: OTHER, WARREN_PULL_REF: PULL, WARREN_IMPORT_TAR: IMPORT, CHROMIUM, SHOTS } = process.env;
const step = (m) => console.log(`[${(performance.now() / 1000).toFixed(1)}s] ${m}`);
function assert(ok, msg) { if (!ok) throw new Error('assertion failed: ' + msg); }

// The daemon's API with the admin key, to check what the browser did.
async function apiCall(method, p, body, headers = { Authorization: 'Bearer ' + KEY }) {
  const res = await fetch(D + p, { method, headers: { ...headers, ...(body ? { 'Content-Type': 'application/json' } : {}) }, body: body && JSON.stringify(body) });
  const text = await res.text();
  let json = null;
  try { json = JSON.parse(text); } catch { /* not JSON */ }
  return { status: res.status, json, text };
}

// Root needs --no-sandbox: Chromium refuses to run its sandbox as root
// (the tests run as root for the daemon's namespaces and cgroups); as any
// other user the sandbox stays on.
const args = process.getuid && process.getuid() === 0 ? ['--no-sandbox'] : [];
const browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args });
step(`chromium ${browser.version()}`);

// Every page records Content-Security-Policy violations and page errors:
// the console must work under its strict policy without one.
async function newPage(ctx) {
  const page = await ctx.newPage();
  await page.addInitScript(() => {
    window.__csp = [];
    document.addEventListener('securitypolicyviolation', (e) => window.__csp.push(`${e.violatedDirective} ${e.blockedURI} ${e.sourceFile}:${e.lineNumber}`));
  });
  page.errors = [];
  page.on('pageerror', (e) => page.errors.push(String(e)));
  page.on('dialog', (d) => d.accept());
  return page;
}
async function checkClean(page, where) {
  const csp = await page.evaluate(() => window.__csp || []);
  assert(csp.length === 0, `${where}: CSP violations: ${csp.join('; ')}`);
  assert(page.errors.length === 0, `${where}: page errors: ${page.errors.join('; ')}`);
}

const sizes = [{ name: 'laptop', width: 1280, height: 800 }, { name: 'phone', width: 390, height: 844 }];
fs.mkdirSync(SHOTS, { recursive: true });
async function shoot(page, name) {
  const vp = page.viewportSize();
  for (const s of sizes) {
    await page.setViewportSize({ width: s.width, height: s.height });
    await page.waitForTimeout(250);
    await page.screenshot({ path: path.join(SHOTS, `${name}-${s.width}x${s.height}.png`), fullPage: false });
  }
  await page.setViewportSize(vp);
}

async function termText(page) {
  return page.evaluate(() => [...document.querySelectorAll('.xterm-rows > div')].map((r) => r.textContent.replace(/\s+$/, '')));
}
async function waitTermLine(page, re, what) {
  await page.waitForFunction((src) => {
    const re = new RegExp(src);
    return [...document.querySelectorAll('.xterm-rows > div')].some((r) => re.test(r.textContent.replace(/\s+$/, '')));
  }, re.source, { timeout: 20000 }).catch(async (e) => { throw new Error(`${what}: ${e.message}\nscreen:\n${(await termText(page)).join('\n')}`); });
}
async function typeInTerm(page, text) {
  await page.locator('#terminal .xterm').click();
  await page.keyboard.type(text, { delay: 5 });
}

const ctx = await browser.newContext({ viewport: { width: 1280, height: 800 } });
const page = await newPage(ctx);

// ---- sign in
let res = await page.goto(D + '/');
const headers = res.headers();
assert(/script-src 'self'/.test(headers['content-security-policy']) && /frame-ancestors 'none'/.test(headers['content-security-policy']), 'CSP header: ' + headers['content-security-policy']);
assert(headers['x-frame-options'] === 'DENY', 'X-Frame-Options');
await page.waitForSelector('#key');
await shoot(page, 'signin');
await page.fill('#key', 'wrn_not_a_real_key');
await page.click('form.signin button');
await page.waitForSelector('.status.bad');
assert(await page.locator('#key').isVisible(), 'a bad key leaves the sign-in form');
// From the keyboard: the key field has the focus, Enter signs in.
assert(await page.evaluate(() => document.activeElement?.id === 'key'), 'the key field has the focus');
await page.keyboard.type(KEY);
await page.keyboard.press('Enter');
await page.waitForSelector('h1:text("Sessions")');
const cookies = await ctx.cookies();
const cookie = cookies.find((c) => c.name === 'warren_console');
assert(cookie && cookie.httpOnly && cookie.sameSite === 'Strict', 'the session cookie is HttpOnly and SameSite=Strict: ' + JSON.stringify(cookies));
assert(!(await page.evaluate(() => document.cookie)).includes('warren_console'), 'the page cannot read the cookie');
assert((await page.evaluate(() => localStorage.length)) === 0, 'nothing in localStorage');
assert(!page.url().includes('wrn_'), 'no key in the URL');
step('signed in: HttpOnly SameSite=Strict cookie, nothing in localStorage or the URL');

// ---- create a session
await page.click('summary:text("New session")');
await page.fill('#f-labels', 'suite=console');
await page.click('#create');
await page.waitForURL(/#\/s\/[^/]+$/, { timeout: 60000 });
const id = decodeURIComponent(page.url().split('#/s/')[1]);
step(`created session ${id}`);

// ---- terminal: echo hi
await page.waitForSelector('#terminal .xterm-rows');
await page.waitForFunction(() => /Shell \S+\./.test(document.querySelector('.note')?.textContent || ''), null, { timeout: 20000 });
await typeInTerm(page, 'echo hi\n');
await waitTermLine(page, /^hi$/, 'echo hi');
step('typed echo hi, saw hi');

// ---- resize: the shell's terminal follows the page
await typeInTerm(page, 'stty size\n');
await waitTermLine(page, /^\d+ \d+$/, 'stty size');
const sizeOf = async () => (await termText(page)).filter((l) => /^\d+ \d+$/.test(l)).pop();
const before = await sizeOf();
await page.setViewportSize({ width: 700, height: 560 });
await page.waitForTimeout(500);
await typeInTerm(page, 'clear; stty size\n');
await page.waitForFunction((b) => [...document.querySelectorAll('.xterm-rows > div')].some((r) => /^\d+ \d+$/.test(r.textContent.trim()) && r.textContent.trim() !== b), before, { timeout: 20000 });
const after = await sizeOf();
assert(after !== before, `stty size changed with the page: ${before} -> ${after}`);
await page.setViewportSize({ width: 1280, height: 800 });
step(`resized: stty size ${before} -> ${after}`);

// ---- several viewers on one shell, and reattach after a reload
const viewer = await newPage(ctx);
await viewer.goto(`${D}/#/s/${encodeURIComponent(id)}/terminal`);
await viewer.waitForSelector('#terminal .xterm-rows');
const pidOpts = await viewer.waitForFunction(() => {
  const o = [...document.querySelectorAll('.toolbar select option')].map((x) => x.value).filter(Boolean);
  return o.length ? o : null;
}, null, { timeout: 20000 });
const shellPid = await page.evaluate((id) => sessionStorage.getItem('warren.shell.' + id), id);
assert((await pidOpts.jsonValue()).includes(shellPid), `the first page's shell ${shellPid} is offered to attach`);
await viewer.selectOption('.toolbar select', shellPid);
await viewer.click('button:text("Attach")');
await viewer.waitForFunction((p) => (document.querySelector('.note')?.textContent || '').includes(p), shellPid);
await typeInTerm(viewer, 'echo from-second-viewer\n');
await waitTermLine(page, /^from-second-viewer$/, 'the first viewer sees the second viewer\'s command');
await page.reload();
await page.waitForSelector('#terminal .xterm-rows');
await waitTermLine(page, /^from-second-viewer$/, 'a reload reattaches to the same shell and replays its screen');
await typeInTerm(page, 'echo after-reload\n');
await waitTermLine(viewer, /^after-reload$/, 'the second viewer sees input after the reload');
await shoot(page, 'session-terminal');
await checkClean(page, 'terminal');
await viewer.close();
step(`two viewers on shell ${shellPid}; a reload reattached`);

// ---- files: upload by input and by drag and drop, see them through exec
await page.goto(`${D}/#/s/${encodeURIComponent(id)}/files/${encodeURIComponent('/tmp')}`);
await page.waitForSelector('#files');
await page.setInputFiles('#upload', { name: 'picked.txt', mimeType: 'text/plain', buffer: Buffer.from('picked by the file input\n') });
await page.waitForSelector('#files li[data-name="picked.txt"]');
await page.evaluate(() => {
  const dt = new DataTransfer();
  dt.items.add(new File(['dropped onto the page\n'], 'dropped.txt', { type: 'text/plain' }));
  const drop = document.querySelector('#drop');
  drop.dispatchEvent(new DragEvent('dragover', { dataTransfer: dt, bubbles: true, cancelable: true }));
  drop.dispatchEvent(new DragEvent('drop', { dataTransfer: dt, bubbles: true, cancelable: true }));
});
await page.waitForSelector('#files li[data-name="dropped.txt"]');
res = await apiCall('POST', `/v1/sessions/${id}/exec`, { command: 'cat /tmp/picked.txt /tmp/dropped.txt' });
assert(res.status === 200 && res.json.stdout === 'picked by the file input\ndropped onto the page\n', 'exec sees the uploads: ' + res.text);
step('uploaded two files (input, drag and drop); exec reads them');
// View, edit and save a small text file, then delete it.
await page.click('#files li[data-name="dropped.txt"] > a');
await page.waitForSelector('#editor');
assert((await page.inputValue('#editor')) === 'dropped onto the page\n', 'the viewer shows the file');
await page.fill('#editor', 'edited in the browser\n');
await page.click('button:text("Save")');
await page.waitForFunction(() => document.querySelector('#status').textContent.startsWith('Saved'));
res = await apiCall('POST', `/v1/sessions/${id}/exec`, { command: 'cat /tmp/dropped.txt' });
assert(res.json.stdout === 'edited in the browser\n', 'the edit reached the session: ' + res.text);
const [download] = await Promise.all([page.waitForEvent('download'), page.click('#files li[data-name="picked.txt"] a[download]')]);
const got = fs.readFileSync(await download.path(), 'utf8');
assert(got === 'picked by the file input\n', 'the download has the file: ' + JSON.stringify(got));
await shoot(page, 'session-files');
await page.click('#files li[data-name="picked.txt"] button.danger');
await page.waitForSelector('#files li[data-name="picked.txt"]', { state: 'detached' });
res = await apiCall('POST', `/v1/sessions/${id}/exec`, { command: 'test -e /tmp/picked.txt; echo $?' });
assert(res.json.stdout.trim() === '1', 'the deleted file is gone');
step('viewed, edited, saved and deleted files');

// ---- a process's log, followed across a reload
await page.goto(`${D}/#/s/${encodeURIComponent(id)}/processes`);
await page.fill('#command', 'i=0; while [ $i -lt 600 ]; do i=$((i+1)); echo line$i; sleep 0.1; done');
await page.click('form.toolbar button[type=submit]');
await page.waitForURL(/processes\/[^/]+$/);
await page.waitForFunction(() => /line5\n/.test(document.querySelector('#log')?.textContent || ''), null, { timeout: 20000 });
const lastLine = async () => Math.max(0, ...[...(await page.textContent('#log')).matchAll(/line(\d+)/g)].map((m) => +m[1]));
const seen = await lastLine();
await page.reload();
await page.waitForSelector('#log');
await page.waitForFunction((n) => {
  const t = document.querySelector('#log')?.textContent || '';
  return t.includes('line1\n') && new RegExp(`line${n + 5}\\n`).test(t);
}, seen, { timeout: 20000 });
step(`followed a process's log across a reload (line ${seen} before, line ${await lastLine()} after)`);
await shoot(page, 'session-processes');
await checkClean(page, 'processes');

// ---- snapshots: take one, fork a session from it, delete it
await page.goto(`${D}/#/s/${encodeURIComponent(id)}/snapshots`);
await page.fill('#snap-name', 'console-snap');
await page.click('form.toolbar button[type=submit]');
await page.waitForSelector('main tbody td:text-is("console-snap")', { timeout: 30000 });
// A new session from the snapshot, then a fork of the running session:
// both have the files.
const newSession = async (click, what) => {
  await page.goto(`${D}/#/s/${encodeURIComponent(id)}/snapshots`);
  await page.click(click);
  await page.waitForFunction((id) => document.querySelector('#status.bad') || (/^#\/s\/[^/]+$/.test(location.hash) && location.hash !== '#/s/' + encodeURIComponent(id)), id, { timeout: 60000 });
  assert(!(await page.$('#status.bad')), `${what} failed: ` + await page.textContent('#status'));
  const n = decodeURIComponent(page.url().split('#/s/')[1]);
  res = await apiCall('POST', `/v1/sessions/${n}/exec`, { command: 'cat /tmp/dropped.txt' });
  assert(res.json.stdout === 'edited in the browser\n', `${what} has the files: ` + res.text);
  await apiCall('DELETE', `/v1/sessions/${n}`);
  return n;
};
await page.waitForSelector('main tbody td:text-is("console-snap")');
const fromSnap = await newSession('main tbody tr:has(td:text-is("console-snap")) button:text("Start session")', 'a session from the snapshot');
const fork = await newSession('#fork', 'a fork');
await page.goto(`${D}/#/s/${encodeURIComponent(id)}/snapshots`);
await page.click('main tbody tr:has(td:text-is("console-snap")) button.danger');
await page.waitForSelector('main tbody td:text-is("console-snap")', { state: 'detached' });
res = await apiCall('GET', '/v1/snapshots/console-snap');
assert(res.status === 404, `the deleted snapshot answers ${res.status}`);
step(`took a snapshot, started ${fromSnap} from it, forked ${fork}, deleted the snapshot`);

// ---- the session's other pages
for (const tab of ['snapshots', 'network', 'audit']) {
  await page.goto(`${D}/#/s/${encodeURIComponent(id)}/${tab}`);
  await page.waitForSelector(`.tabs a[aria-current]:text-is("${tab[0].toUpperCase() + tab.slice(1)}")`);
  await page.waitForTimeout(500);
  await shoot(page, `session-${tab}`);
}
// The audit trail names what the browser did, with the key behind the cookie.
await page.goto(`${D}/#/s/${encodeURIComponent(id)}/audit`);
await page.waitForFunction(() => /POST \/v1\/sessions\/\{id\}\/exec|PUT \/v1\/sessions\/\{id\}\/files/.test(document.querySelector('main table')?.textContent || ''), null, { timeout: 10000 });

// ---- keys: a new key's secret is shown once; revoking it ends it
await page.goto(`${D}/#/keys`);
await page.fill('#key-tenant', 'third');
await page.fill('#key-name', 'made-in-the-browser');
await page.click('form.card button[type=submit]');
const secret = await (await page.waitForSelector('#secret-value')).textContent();
assert(secret.startsWith('wrn_'), 'the new key\'s secret is shown: ' + secret);
res = await apiCall('GET', '/v1/sessions', undefined, { Authorization: 'Bearer ' + secret });
assert(res.status === 200, `the new key works (${res.status})`);
await page.click('#secret button:text("Done")');
await page.reload();
await page.waitForSelector('td:text("made-in-the-browser")');
assert((await page.locator('#secret-value').count()) === 0, 'the secret is not shown again');
await page.click('tr:has(td:text("made-in-the-browser")) button.danger');
await page.waitForSelector('tr:has(td:text("made-in-the-browser")) td:text("revoked")');
res = await apiCall('GET', '/v1/sessions', undefined, { Authorization: 'Bearer ' + secret });
assert(res.status === 401, `the revoked key answers ${res.status}, want 401`);
step('created a key (secret shown once) and revoked it');

// ---- workspaces: create and delete
await page.goto(`${D}/#/workspaces`);
await page.fill('#ws-name', 'console-ws');
await page.fill('#ws-size', '64');
await page.click('form.card button[type=submit]');
await page.waitForFunction(() => document.querySelector('#status.bad') || [...document.querySelectorAll('main tbody td')].some((td) => td.textContent === 'console-ws'), null, { timeout: 30000 });
assert(!(await page.$('#status.bad')), 'creating a workspace failed: ' + await page.textContent('#status'));
await shoot(page, 'workspaces');
await page.click('main tbody tr:has(td:text-is("console-ws")) button.danger');
await page.waitForSelector('main tbody td:text-is("console-ws")', { state: 'detached' });
step('created and deleted a workspace');

// ---- images: pull with progress from a registry, import a tarball, delete
await page.goto(`${D}/#/images`);
await page.fill('#pull-ref', PULL);
await page.click('form:has(#pull-ref) button[type=submit]');
await page.waitForFunction(() => /^Pulled /.test(document.querySelector('#pull-progress + .note')?.textContent || ''), null, { timeout: 60000 });
const pulled = await (await page.waitForFunction((ref) => [...document.querySelectorAll('main tbody tr')].find((r) => r.children[2]?.textContent === ref)?.children[0].textContent, PULL, { timeout: 10000 })
  .catch(async () => { throw new Error(`the pulled image ${PULL} is not listed: ${await page.textContent('main')}`); })).jsonValue();
const progressEvents = +(await page.getAttribute('#pull-progress + .note', 'data-events'));
assert(progressEvents > 0, 'the pull showed progress events');
await page.setInputFiles('#import-file', IMPORT);
await page.fill('#import-name', 'console-import');
await page.click('form:has(#import-file) button[type=submit]');
await page.waitForFunction(() => document.querySelector('#status.bad') || [...document.querySelectorAll('main tbody td')].some((td) => td.textContent === 'console-import'), null, { timeout: 30000 });
assert(!(await page.$('#status.bad')), 'the import failed: ' + await page.textContent('#status'));
await shoot(page, 'images');
for (const n of [pulled, 'console-import']) {
  await page.click(`main tbody tr:has(td:text-is("${n}")) button.danger`);
  await page.waitForSelector(`main tbody td:text-is("${n}")`, { state: 'detached' });
}
res = await apiCall('GET', '/v1/images/console-import');
assert(res.status === 404, `the deleted image answers ${res.status}`);
step(`pulled ${PULL} (as ${pulled}) with ${progressEvents} progress events, imported a tarball, deleted both`);

// ---- admin pages
for (const p of ['overview', 'tenants', 'keys']) {
  await page.goto(`${D}/#/${p}`);
  await page.waitForSelector(`h1:text-is("${p[0].toUpperCase() + p.slice(1)}")`);
  await page.waitForTimeout(600);
  await shoot(page, p);
  await checkClean(page, p);
}
await page.goto(`${D}/#/sessions`);
await page.waitForSelector(`tr[data-id="${id}"]`);
await shoot(page, 'sessions');
step('screenshots of every page at 1280x800 and 390x844');

// ---- another tenant's key sees none of this tenant's sessions
const ctx2 = await browser.newContext({ viewport: { width: 1280, height: 800 } });
const other = await newPage(ctx2);
await other.goto(D + '/');
await other.fill('#key', OTHER);
await other.click('form.signin button');
await other.waitForSelector('h1:text("Sessions")');
await other.waitForSelector('td.empty');
assert((await other.locator('tr[data-id]').count()) === 0, 'the other tenant lists no session');
const peek = await other.evaluate(async (id) => (await fetch('/v1/sessions/' + encodeURIComponent(id))).status, id);
assert(peek === 404, `the other tenant's GET of ${id} answers ${peek}, want 404`);
await ctx2.close();
step('another tenant sees none of the first tenant\'s sessions (list empty, GET 404)');

// ---- a page of another origin cannot act with the cookie
const evil = http.createServer((req, rsp) => {
  rsp.writeHead(200, { 'Content-Type': 'text/html' });
  rsp.end(`<!doctype html><title>elsewhere</title><script>
  window.results = (async () => {
    const D = ${JSON.stringify(D)}, out = {};
    try { out.create = (await fetch(D + '/v1/sessions', { method: 'POST', mode: 'no-cors', credentials: 'include', headers: { 'Content-Type': 'text/plain' }, body: '{}' })).type; } catch (e) { out.create = 'threw ' + e; }
    try { await fetch(D + '/v1/sessions', { method: 'POST', credentials: 'include', headers: { 'Content-Type': 'application/json', 'X-CSRF-Token': 'guess' }, body: '{}' }); out.cors = 'answered'; } catch (e) { out.cors = 'threw'; }
    try { const r = await fetch(D + '/v1/sessions', { credentials: 'include' }); out.read = r.status; } catch (e) { out.read = 'threw'; }
    try { await fetch(D + '/console/api/signout', { method: 'POST', mode: 'no-cors', credentials: 'include' }); out.signout = 'sent'; } catch (e) { out.signout = 'threw'; }
    out.ws = await new Promise((ok) => {
      const ws = new WebSocket(D.replace('http', 'ws') + '/v1/sessions/${id}/shell');
      ws.onopen = () => ok('opened');
      ws.onerror = () => ok('refused');
    });
    return out;
  })();
  </script>`);
});
await new Promise((ok) => evil.listen(0, '127.0.0.1', ok));
const evilURL = `http://127.0.0.1:${evil.address().port}/`;
const countBefore = (await apiCall('GET', '/v1/sessions')).json.sessions.length;
const ep = await newPage(ctx);
await ep.goto(evilURL);
const results = await ep.evaluate(() => window.results);
evil.close();
const countAfter = (await apiCall('GET', '/v1/sessions')).json.sessions.length;
assert(countAfter === countBefore, `a page of ${evilURL} created a session with the cookie (${countBefore} -> ${countAfter})`);
assert(results.cors === 'threw', 'a cross-origin call with a CSRF header is stopped by the preflight: ' + JSON.stringify(results));
assert(results.read === 'threw', 'a cross-origin read is not readable: ' + JSON.stringify(results));
assert(results.ws === 'refused', 'a cross-origin WebSocket is refused: ' + JSON.stringify(results));
// Its sign-out attempt changed nothing either: the console still works.
await page.goto(`${D}/#/sessions`);
await page.reload();
await page.waitForSelector(`tr[data-id="${id}"]`);
step(`a page of ${evilURL} could not act with the cookie: ${JSON.stringify(results)}`);

// ---- delete the session
await page.click(`tr[data-id="${id}"] button.danger`);
await page.waitForSelector(`tr[data-id="${id}"]`, { state: 'detached', timeout: 30000 });
res = await apiCall('GET', `/v1/sessions/${id}`);
assert(res.status === 404, `GET of the deleted session answers ${res.status}`);
step('deleted the session from the list');

// ---- sign out: the cookie no longer works, anywhere
const value = (await ctx.cookies()).find((c) => c.name === 'warren_console').value;
res = await apiCall('GET', '/v1/sessions', undefined, { Cookie: 'warren_console=' + value });
assert(res.status === 200, `the cookie works before sign-out (${res.status})`);
await page.click('#signout');
await page.waitForSelector('#key');
res = await apiCall('GET', '/v1/sessions', undefined, { Cookie: 'warren_console=' + value });
assert(res.status === 401, `a copy of the cookie after sign-out answers ${res.status}, want 401`);
assert(!(await ctx.cookies()).some((c) => c.name === 'warren_console'), 'sign-out cleared the cookie');
await checkClean(page, 'sign-out');
step('signed out: the old cookie answers 401');

await browser.close();
step('ok');
