// warren's web console: plain ES modules, no framework, no build step.
// Every page is built with DOM calls (h below), never from HTML strings, so
// nothing a sandbox or a caller wrote can become markup. Pages are hash
// routes (#/sessions, #/s/{id}/files…), so a reload lands where it was.
import * as api from './api.js';
import { openTerminal } from './term.js';

const $ = (sel, root = document) => root.querySelector(sel);
const main = $('#main');

// h builds an element: h('a', {href: '#/x', onclick: f}, 'text', child…).
function h(tag, attrs = {}, ...kids) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith('on')) el.addEventListener(k.slice(2), v);
    else if (k === 'class') el.className = v;
    else if (k === 'dataset') Object.assign(el.dataset, v);
    else if (v === true) el.setAttribute(k, '');
    else el.setAttribute(k, v);
  }
  for (const k of kids.flat()) if (k !== undefined && k !== null && k !== false) el.append(k instanceof Node ? k : String(k));
  return el;
}
const svg = (tag, attrs = {}) => {
  const el = document.createElementNS('http://www.w3.org/2000/svg', tag);
  for (const [k, v] of Object.entries(attrs)) el.setAttribute(k, v);
  return el;
};

// say shows a message in the live region (read out by screen readers).
function say(msg, bad = false) {
  const s = $('#status');
  s.textContent = msg;
  s.className = 'status' + (bad ? ' bad' : '') + (msg ? ' show' : '');
  clearTimeout(say.t);
  if (msg) say.t = setTimeout(() => { s.className = 'status'; s.textContent = ''; }, bad ? 8000 : 3000);
}
// attempt runs f, showing its error.
async function attempt(f, ok) {
  try {
    const r = await f();
    if (ok) say(ok);
    return r;
  } catch (e) {
    say(e.message || String(e), true);
    return undefined;
  }
}

// Formatting.
function dur(ms) {
  if (!isFinite(ms)) return '—';
  const s = Math.max(0, Math.round(ms / 1000));
  if (s < 60) return s + 's';
  if (s < 3600) return Math.floor(s / 60) + 'm' + (s % 60 ? ' ' + (s % 60) + 's' : '');
  if (s < 86400) return Math.floor(s / 3600) + 'h ' + Math.floor((s % 3600) / 60) + 'm';
  return Math.floor(s / 86400) + 'd ' + Math.floor((s % 86400) / 3600) + 'h';
}
function bytes(n) {
  if (n === undefined || n === null) return '—';
  const u = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let i = 0;
  while (n >= 1024 && i < u.length - 1) { n /= 1024; i++; }
  return (i ? n.toFixed(1) : n) + ' ' + u[i];
}
const since = (t) => Date.now() - new Date(t).getTime();
const until = (t) => new Date(t).getTime() - Date.now();
function meter(label, used, limit, fmt = String) {
  const pct = limit ? Math.min(100, (100 * used) / limit) : 0;
  return h('span', { class: 'meter', title: `${label}: ${fmt(used)}${limit ? ' of ' + fmt(limit) : ''}` },
    h('span', { class: 'meter-label' }, `${label} ${fmt(used)}${limit ? ' / ' + fmt(limit) : ''}`),
    limit ? h('meter', { min: 0, max: 100, value: pct.toFixed(0), 'aria-label': label }) : null);
}

// Pages that poll or hold connections stop when the route changes.
let cleanups = [];
function onLeave(f) { cleanups.push(f); }
function every(ms, f) {
  f();
  const t = setInterval(f, ms);
  onLeave(() => clearInterval(t));
}

function page(title, ...kids) {
  document.title = title + ' · warren';
  main.replaceChildren(h('h1', {}, title), ...kids);
}

// ---------------------------------------------------------------- sign-in

function signInPage() {
  document.title = 'Sign in · warren';
  const key = h('input', { id: 'key', type: 'password', name: 'key', autocomplete: 'off', required: true, spellcheck: 'false', placeholder: 'wrn_…' });
  const form = h('form', { class: 'card signin', onsubmit: async (e) => {
    e.preventDefault();
    const k = key.value;
    key.value = '';
    const who = await attempt(() => api.signIn(k));
    if (who) { showWho(); location.hash = '#/sessions'; route(); } else key.focus();
  } },
  h('h1', {}, 'Sign in'),
  h('p', {}, 'Paste an API key. It is exchanged for a session cookie this browser keeps until you sign out or leave it idle for 30 minutes; the key itself is not stored.'),
  h('label', { for: 'key' }, 'API key'), key,
  h('button', { type: 'submit' }, 'Sign in'));
  main.replaceChildren(form);
  key.focus();
}

function showWho() {
  const me = api.whoami();
  $('#nav').hidden = !me;
  $('#signout').hidden = !me || !me.auth;
  $('#who').textContent = me ? `${me.tenant}${me.admin ? ' (admin)' : ''}` : '';
  for (const a of document.querySelectorAll('[data-admin]')) a.hidden = !me || !me.admin;
}

// ---------------------------------------------------------------- sessions

function sessionsPage() {
  const me = api.whoami();
  const filter = h('input', { type: 'search', id: 'filter', placeholder: 'id, image, state, label…', 'aria-label': 'Filter sessions' });
  const body = h('tbody');
  const table = h('table', { class: 'list sessions' },
    h('thead', {}, h('tr', {}, ['Session', 'State', 'Image', 'Age', 'Idle', 'TTL left', 'Use', 'Network', 'Labels', ''].map((t) => h('th', { scope: 'col' }, t)))),
    body);
  let all = [];
  // CPU use is a rate: the CPU seconds between two polls over the time
  // between them, against the session's CPU limit.
  const cpuSeen = new Map(); // id -> {at, secs, pct}
  const cpuPct = (s) => {
    const now = Date.now(), secs = (s.usage || {}).cpu_seconds || 0;
    const prev = cpuSeen.get(s.id);
    let pct = prev?.pct ?? 0;
    if (prev && now > prev.at && secs >= prev.secs) pct = (100 * (secs - prev.secs)) / ((now - prev.at) / 1000);
    if (!prev || now - prev.at > 1000) cpuSeen.set(s.id, { at: now, secs, pct });
    return pct;
  };
  const render = () => {
    const q = filter.value.trim().toLowerCase();
    const rows = all.filter((s) => !q || [s.id, s.state, s.image, s.network, s.tenant, ...Object.entries(s.labels || {}).map(([k, v]) => k + '=' + v)]
      .some((x) => String(x || '').toLowerCase().includes(q)));
    body.replaceChildren(...rows.map((s) => {
      const u = s.usage || {};
      return h('tr', { dataset: { id: s.id } },
        h('td', { 'data-label': 'Session' }, h('a', { href: `#/s/${api.enc(s.id)}` }, s.id), me.admin && s.tenant ? h('small', {}, ' ', s.tenant) : null),
        h('td', { 'data-label': 'State' }, h('span', { class: 'state ' + s.state }, s.state), s.reason ? h('small', { title: s.reason }, ' ⓘ') : null),
        h('td', { 'data-label': 'Image' }, s.image),
        h('td', { 'data-label': 'Age' }, dur(since(s.created_at))),
        h('td', { 'data-label': 'Idle' }, dur(since(s.last_used_at))),
        h('td', { 'data-label': 'TTL left' }, s.expires_at ? dur(until(s.expires_at)) : '—'),
        h('td', { 'data-label': 'Use', class: 'use' },
          meter('mem', u.memory_bytes || 0, (s.limits.memory_mb || 0) * 1048576, bytes),
          meter('cpu %', Math.round(cpuPct(s)), Math.round(100 * (s.limits.cpus || 0)), (v) => v + '%'),
          meter('pids', u.pids || 0, s.limits.pids || 0)),
        h('td', { 'data-label': 'Network' }, s.network),
        h('td', { 'data-label': 'Labels' }, Object.entries(s.labels || {}).map(([k, v]) => h('span', { class: 'tag' }, `${k}=${v}`))),
        h('td', {}, h('button', { type: 'button', class: 'danger', 'aria-label': `Delete session ${s.id}`, onclick: async () => {
          if (!confirm(`Delete session ${s.id}? Its processes stop and its files go.`)) return;
          await attempt(() => api.del(`/v1/sessions/${api.enc(s.id)}`), `Deleted ${s.id}`);
          load();
        } }, 'Delete')));
    }));
    if (!rows.length) body.append(h('tr', {}, h('td', { colspan: 10, class: 'empty' }, all.length ? 'No session matches.' : 'No sessions yet.')));
  };
  const load = async () => {
    const r = await attempt(() => api.get('/v1/sessions' + (me.admin ? '?all=true' : '')));
    if (r) { all = r.sessions; render(); }
  };
  filter.addEventListener('input', render);
  page('Sessions', createForm(load), h('div', { class: 'toolbar' }, filter), h('div', { class: 'scroll' }, table));
  every(3000, load);
}

function field(label, input, hint) {
  const id = input.id || (input.id = 'f-' + label.toLowerCase().replace(/\W+/g, '-'));
  return h('div', { class: 'field' }, h('label', { for: id }, label), input, hint ? h('small', {}, hint) : null);
}

function createForm(done) {
  const image = h('input', { name: 'image', placeholder: 'default image' });
  const mem = h('input', { name: 'memory_mb', type: 'number', min: 0, placeholder: 'MiB' });
  const cpus = h('input', { name: 'cpus', type: 'number', min: 0, step: '0.1', placeholder: 'cores' });
  const pids = h('input', { name: 'pids', type: 'number', min: 0 });
  const net = h('select', { name: 'network' }, ['', 'none', 'open', 'allowlist'].map((m) => h('option', { value: m }, m || 'default')));
  const allow = h('input', { name: 'allow', placeholder: 'example.com, 10.0.0.0/8' });
  const ws = h('input', { name: 'workspace', placeholder: 'name' });
  const ttl = h('input', { name: 'ttl', type: 'number', min: 0, placeholder: 'seconds idle' });
  const labels = h('input', { name: 'labels', placeholder: 'agent=a1, run=7' });
  const form = h('form', { class: 'grid', onsubmit: async (e) => {
    e.preventDefault();
    const req = {};
    if (image.value) req.image = image.value.trim();
    const limits = {};
    if (mem.value) limits.memory_mb = +mem.value;
    if (cpus.value) limits.cpus = +cpus.value;
    if (pids.value) limits.pids = +pids.value;
    if (Object.keys(limits).length) req.limits = limits;
    if (net.value) {
      req.network = { mode: net.value };
      if (allow.value) req.network.allow = allow.value.split(',').map((x) => x.trim()).filter(Boolean);
    }
    if (ws.value) req.workspace = ws.value.trim();
    if (ttl.value) req.ttl_seconds = +ttl.value;
    if (labels.value) req.labels = Object.fromEntries(labels.value.split(',').map((x) => x.trim().split('=')).filter((kv) => kv[0]).map(([k, ...v]) => [k, v.join('=')]));
    const btn = form.querySelector('button');
    btn.disabled = true;
    const s = await attempt(() => api.post('/v1/sessions', req));
    btn.disabled = false;
    if (s) { say(`Created ${s.id}`); location.hash = `#/s/${api.enc(s.id)}`; } else done();
  } },
  field('Image', image), field('Memory (MiB)', mem), field('CPUs', cpus), field('Pids', pids),
  field('Network', net), field('Allow (allowlist)', allow), field('Workspace', ws), field('Idle TTL (s)', ttl), field('Labels', labels),
  h('div', { class: 'actions' }, h('button', { type: 'submit', id: 'create' }, 'Create session')));
  return h('details', { class: 'card' }, h('summary', {}, 'New session'), form);
}

// ---------------------------------------------------------------- one session

const tabs = ['terminal', 'files', 'processes', 'snapshots', 'network', 'audit'];

function sessionPage(id, tab = 'terminal', arg) {
  const info = h('div', { class: 'facts' });
  const loadInfo = async () => {
    const s = await attempt(() => api.get(`/v1/sessions/${api.enc(id)}`));
    if (!s) return;
    const u = s.usage || {};
    info.replaceChildren(
      h('span', { class: 'state ' + s.state }, s.state), h('span', {}, s.image), h('span', {}, 'network ' + s.network),
      h('span', {}, 'age ' + dur(since(s.created_at))), h('span', {}, 'idle ' + dur(since(s.last_used_at))),
      h('span', {}, 'TTL ' + (s.expires_at ? dur(until(s.expires_at)) : '—')),
      meter('mem', u.memory_bytes || 0, (s.limits.memory_mb || 0) * 1048576, bytes), meter('pids', u.pids || 0, s.limits.pids || 0),
      h('button', { type: 'button', class: 'danger', id: 'delete-session', onclick: async () => {
        if (!confirm(`Delete session ${id}?`)) return;
        if (await attempt(() => api.del(`/v1/sessions/${api.enc(id)}`), `Deleted ${id}`) !== undefined) location.hash = '#/sessions';
      } }, 'Delete session'));
  };
  const nav = h('nav', { class: 'tabs', 'aria-label': 'Session' }, tabs.map((t) =>
    h('a', { href: `#/s/${api.enc(id)}/${t}`, 'aria-current': t === tab ? 'page' : false }, t[0].toUpperCase() + t.slice(1))));
  const pane = h('section', { class: 'pane', 'aria-label': tab });
  page(`Session ${id}`, info, nav, pane);
  every(5000, loadInfo);
  ({ terminal: terminalTab, files: filesTab, processes: processesTab, snapshots: snapshotsTab, network: networkTab, audit: auditTab }[tab] || terminalTab)(pane, id, arg);
}

function terminalTab(pane, id) {
  // The shell's process id is kept for this tab only (sessionStorage holds
  // no secret), so that a reload reattaches to the same shell.
  const key = 'warren.shell.' + id;
  const box = h('div', { class: 'term', id: 'terminal' });
  const note = h('p', { class: 'note' });
  let t;
  const connect = (pid) => {
    t?.close();
    box.replaceChildren();
    note.textContent = pid ? `Attaching to ${pid}…` : 'Starting a shell…';
    t = openTerminal(box, id, {
      pid,
      onProcess: (p) => { sessionStorage.setItem(key, p); note.textContent = `Shell ${p}. Open this page elsewhere to watch it too; it keeps running when you leave.`; },
      onEnd: (why) => {
        note.textContent = why;
        if (pid && /no terminal|not found|exited/i.test(why)) { sessionStorage.removeItem(key); }
      },
    });
  };
  const attach = h('select', { 'aria-label': 'Attach to a terminal' });
  const refreshAttach = async () => {
    const r = await attempt(() => api.get(`/v1/sessions/${api.enc(id)}/processes`));
    if (!r) return;
    const ttys = r.processes.filter((p) => p.tty && p.state === 'running');
    attach.replaceChildren(h('option', { value: '' }, 'attach to…'), ...ttys.map((p) => h('option', { value: p.id }, `${p.id} ${p.command || (p.argv || []).join(' ')}`)));
  };
  pane.replaceChildren(
    h('div', { class: 'toolbar' },
      h('button', { type: 'button', onclick: () => { sessionStorage.removeItem(key); connect(); } }, 'New shell'),
      attach, h('button', { type: 'button', onclick: () => attach.value && connect(attach.value) }, 'Attach')),
    box, note);
  connect(sessionStorage.getItem(key) || undefined);
  refreshAttach();
  onLeave(() => t?.close());
}

async function filesTab(pane, id, dir = '/') {
  dir = dir || '/';
  const base = `/v1/sessions/${api.enc(id)}`;
  const list = h('ul', { class: 'files', id: 'files' });
  const viewer = h('div', { class: 'viewer' });
  const crumbs = h('nav', { class: 'crumbs', 'aria-label': 'Path' });
  const go = (d) => { location.hash = `#/s/${api.enc(id)}/files/${api.enc(d)}`; };
  const join = (n) => (dir.endsWith('/') ? dir : dir + '/') + n;
  const load = async () => {
    const parts = dir.split('/').filter(Boolean);
    crumbs.replaceChildren(h('a', { href: '#', onclick: (e) => { e.preventDefault(); go('/'); } }, '/'),
      ...parts.map((p, i) => [h('a', { href: '#', onclick: (e) => { e.preventDefault(); go('/' + parts.slice(0, i + 1).join('/')); } }, p), '/']).flat());
    const r = await attempt(() => api.get(`${base}/files/list?path=${api.enc(dir)}`));
    if (!r) return;
    r.entries.sort((a, b) => (a.type === 'dir') === (b.type === 'dir') ? a.name.localeCompare(b.name) : a.type === 'dir' ? -1 : 1);
    list.replaceChildren(...r.entries.map((e) => h('li', { dataset: { name: e.name } },
      e.type === 'dir'
        ? h('a', { href: '#', class: 'dir', onclick: (ev) => { ev.preventDefault(); go(e.path); } }, e.name + '/')
        : h('a', { href: '#', onclick: (ev) => { ev.preventDefault(); view(e); } }, e.name),
      h('span', { class: 'meta' }, e.type === 'dir' ? '' : bytes(e.size), ' ', e.mode),
      e.type === 'file' ? h('a', { href: `${base}/files?path=${api.enc(e.path)}`, download: e.name, 'aria-label': `Download ${e.name}` }, '⤓') : null,
      h('button', { type: 'button', class: 'small danger', 'aria-label': `Delete ${e.name}`, onclick: async () => {
        if (!confirm(`Delete ${e.path}?`)) return;
        await attempt(() => api.del(`${base}/files?path=${api.enc(e.path)}${e.type === 'dir' ? '&recursive=true' : ''}`), `Deleted ${e.path}`);
        load();
      } }, '✕'))));
    if (!r.entries.length) list.append(h('li', { class: 'empty' }, 'Empty directory. Drop files here to upload.'));
  };
  const view = async (e) => {
    if (e.size > 1 << 20) { viewer.replaceChildren(h('p', {}, `${e.name} is ${bytes(e.size)}: download it instead.`)); return; }
    const res = await attempt(() => api.call('GET', `${base}/files?path=${api.enc(e.path)}`, undefined, { raw: true }));
    if (!res) return;
    const buf = new Uint8Array(await res.arrayBuffer());
    let text;
    try { text = new TextDecoder('utf-8', { fatal: true }).decode(buf); } catch { viewer.replaceChildren(h('p', {}, `${e.name} is not text: download it instead.`)); return; }
    const area = h('textarea', { id: 'editor', spellcheck: 'false', 'aria-label': `Contents of ${e.path}` });
    area.value = text;
    viewer.replaceChildren(h('h2', {}, e.path), area, h('div', { class: 'actions' },
      h('button', { type: 'button', onclick: async () => { await attempt(() => api.put(`${base}/files?path=${api.enc(e.path)}`, new Blob([area.value])), `Saved ${e.path}`); load(); } }, 'Save'),
      h('button', { type: 'button', onclick: () => viewer.replaceChildren() }, 'Close')));
    area.focus();
  };
  const upload = async (files) => {
    for (const f of files) {
      await attempt(() => api.put(`${base}/files?path=${api.enc(join(f.name))}`, f), `Uploaded ${f.name}`);
    }
    load();
  };
  // The native file input is hidden behind its label, styled as a button;
  // it stays focusable, and the label shows its focus.
  const input = h('input', { type: 'file', multiple: true, id: 'upload', class: 'sr-file', onchange: () => upload(input.files) });
  const drop = h('div', { class: 'drop', id: 'drop',
    ondragover: (e) => { e.preventDefault(); drop.classList.add('over'); },
    ondragleave: () => drop.classList.remove('over'),
    ondrop: (e) => { e.preventDefault(); drop.classList.remove('over'); upload(e.dataTransfer.files); } }, list);
  pane.replaceChildren(h('div', { class: 'toolbar' }, crumbs, input, h('label', { class: 'button', for: 'upload' }, 'Upload…'),
    h('button', { type: 'button', onclick: async () => {
      const n = prompt('New directory name');
      if (n) { await attempt(() => api.post(`${base}/files/mkdir?path=${api.enc(join(n))}`, {})); load(); }
    } }, 'New folder')), drop, viewer);
  load();
}

function processesTab(pane, id, pid) {
  const base = `/v1/sessions/${api.enc(id)}/processes`;
  const body = h('tbody');
  const cmd = h('input', { id: 'command', placeholder: 'e.g. python3 -m http.server 8000', required: true });
  const log = h('pre', { class: 'log', id: 'log', tabindex: 0, 'aria-label': 'Process output' });
  const load = async () => {
    const r = await attempt(() => api.get(base));
    if (!r) return;
    body.replaceChildren(...r.processes.map((p) => h('tr', { dataset: { id: p.id } },
      h('td', {}, h('a', { href: `#/s/${api.enc(id)}/processes/${api.enc(p.id)}` }, p.id)),
      h('td', {}, p.command || (p.argv || []).join(' ')),
      h('td', {}, h('span', { class: 'state ' + p.state }, p.state), p.exit_code !== undefined ? ` (${p.signal || p.exit_code})` : ''),
      h('td', {}, dur(since(p.started_at))), h('td', {}, bytes(p.output_bytes)),
      h('td', {}, p.state === 'running' ? h('button', { type: 'button', class: 'small danger', onclick: async () => { await attempt(() => api.del(`${base}/${api.enc(p.id)}`), `Killed ${p.id}`); load(); } }, 'Kill') : null))));
    if (!r.processes.length) body.append(h('tr', {}, h('td', { colspan: 6, class: 'empty' }, 'No processes.')));
  };
  const form = h('form', { class: 'toolbar', onsubmit: async (e) => {
    e.preventDefault();
    const p = await attempt(() => api.post(base, { command: cmd.value }));
    if (p) { cmd.value = ''; location.hash = `#/s/${api.enc(id)}/processes/${api.enc(p.id)}`; }
  } }, h('label', { for: 'command' }, 'Start'), cmd, h('button', { type: 'submit' }, 'Run'));
  pane.replaceChildren(form, h('div', { class: 'scroll' }, h('table', { class: 'list' },
    h('thead', {}, h('tr', {}, ['Process', 'Command', 'State', 'Age', 'Output', ''].map((t) => h('th', { scope: 'col' }, t)))), body)));
  every(4000, load);
  if (pid) {
    // The log follows the process with server-sent events. An EventSource
    // resumes by itself after a dropped connection (Last-Event-ID carries
    // the offset reached); after a reload the route names the process
    // again, and the log starts from the last 256 KiB the daemon keeps.
    const status = h('p', { class: 'note', id: 'log-status' }, `Following ${pid}…`);
    pane.append(h('h2', {}, `Output of ${pid}`), status, log);
    const es = new EventSource(`${base}/${api.enc(pid)}/output?follow=true&offset=-262144`);
    const dec = (c) => c.text ?? new TextDecoder().decode(Uint8Array.from(atob(c.base64 || ''), (x) => x.charCodeAt(0)));
    es.addEventListener('output', (ev) => {
      const c = JSON.parse(ev.data);
      if (!es.live) { es.live = true; status.textContent = `Following ${pid}: live.`; }
      const stick = log.scrollTop + log.clientHeight >= log.scrollHeight - 4;
      log.append(c.stream === 'stderr' ? h('span', { class: 'stderr' }, dec(c)) : dec(c));
      if (stick) log.scrollTop = log.scrollHeight;
    });
    es.addEventListener('gap', (ev) => { const g = JSON.parse(ev.data); log.append(h('span', { class: 'gap' }, `[… ${g.to - g.from} bytes dropped …]\n`)); });
    es.addEventListener('open', () => { es.live = false; }); // a resumed stream says live again
    es.addEventListener('exit', (ev) => { const x = JSON.parse(ev.data); status.textContent = `${pid} exited (${x.signal || 'code ' + x.exit_code}).`; es.close(); load(); });
    es.addEventListener('error', (ev) => { if (ev.data) { status.textContent = JSON.parse(ev.data).error.message; es.close(); } });
    onLeave(() => es.close());
  }
}

function snapshotsTab(pane, id) {
  const body = h('tbody');
  const name = h('input', { id: 'snap-name', placeholder: 'snapshot name', required: true, pattern: '[a-z0-9][a-z0-9._-]*' });
  const load = async () => {
    const r = await attempt(() => api.get('/v1/snapshots'));
    if (!r) return;
    const mine = r.snapshots.filter((s) => s.session === id);
    body.replaceChildren(...mine.map((s) => h('tr', {},
      h('td', {}, s.name), h('td', {}, bytes(s.size_bytes)), h('td', {}, dur(since(s.created_at)) + ' ago'), h('td', {}, (s.used_by || []).join(', ')),
      h('td', {},
        h('button', { type: 'button', class: 'small', onclick: async () => {
          const n = await attempt(() => api.post('/v1/sessions', { snapshot: s.name }));
          if (n) { say(`Started ${n.id} from ${s.name}`); location.hash = `#/s/${api.enc(n.id)}`; }
        } }, 'Start session'),
        h('button', { type: 'button', class: 'small danger', onclick: async () => { await attempt(() => api.del(`/v1/snapshots/${api.enc(s.name)}`), `Deleted ${s.name}`); load(); } }, 'Delete')))));
    if (!mine.length) body.append(h('tr', {}, h('td', { colspan: 5, class: 'empty' }, 'No snapshots of this session.')));
  };
  pane.replaceChildren(h('form', { class: 'toolbar', onsubmit: async (e) => {
    e.preventDefault();
    await attempt(() => api.post(`/v1/sessions/${api.enc(id)}/snapshot`, { name: name.value }), `Took ${name.value}`);
    name.value = '';
    load();
  } }, h('label', { for: 'snap-name' }, 'Take'), name, h('button', { type: 'submit' }, 'Snapshot'),
  // A fork copies the running session's files into a new session now,
  // through a snapshot that goes with the fork.
  h('button', { type: 'button', id: 'fork', onclick: async () => {
    const r = await attempt(() => api.post(`/v1/sessions/${api.enc(id)}/fork`, { count: 1 }));
    if (r && r.sessions.length) { say(`Forked into ${r.sessions[0].id}`); location.hash = `#/s/${api.enc(r.sessions[0].id)}`; }
  } }, 'Fork this session')),
  h('div', { class: 'scroll' }, h('table', { class: 'list' }, h('thead', {}, h('tr', {}, ['Name', 'Size', 'Taken', 'Used by', ''].map((t) => h('th', { scope: 'col' }, t)))), body)));
  load();
}

function networkTab(pane, id) {
  const policy = h('pre', { class: 'log short' });
  const body = h('tbody');
  const load = async () => {
    const p = await attempt(() => api.get(`/v1/sessions/${api.enc(id)}/network`));
    if (p) policy.textContent = JSON.stringify(p, null, 2);
    const d = await attempt(() => api.get(`/v1/sessions/${api.enc(id)}/network/denials`));
    if (!d) return;
    body.replaceChildren(...d.denials.map((x) => h('tr', {}, h('td', {}, new Date(x.time).toLocaleTimeString()), h('td', {}, x.host), h('td', {}, x.port), h('td', {}, x.proto), h('td', {}, x.reason))));
    if (!d.denials.length) body.append(h('tr', {}, h('td', { colspan: 5, class: 'empty' }, 'Nothing denied.')));
  };
  pane.replaceChildren(h('h2', {}, 'Policy'), policy, h('h2', {}, 'Denied connections'),
    h('div', { class: 'scroll' }, h('table', { class: 'list' }, h('thead', {}, h('tr', {}, ['Time', 'Host', 'Port', 'Proto', 'Reason'].map((t) => h('th', { scope: 'col' }, t)))), body)));
  every(5000, load);
}

async function auditTab(pane, id) {
  const body = h('tbody');
  pane.replaceChildren(h('div', { class: 'scroll' }, h('table', { class: 'list' },
    h('thead', {}, h('tr', {}, ['Time', 'Operation', 'Target', 'Outcome', 'Key', 'ms'].map((t) => h('th', { scope: 'col' }, t)))), body)));
  const r = await attempt(() => api.get(`/v1/audit?session=${api.enc(id)}&since=24h&limit=200`));
  if (!r) return;
  body.replaceChildren(...r.records.map((x) => h('tr', {},
    h('td', {}, new Date(x.time).toLocaleString()), h('td', {}, x.op), h('td', {}, x.target || ''),
    h('td', {}, h('span', { class: 'state ' + (x.outcome === 'ok' ? 'running' : 'failed') }, x.outcome)), h('td', {}, x.key_id || x.subject || ''), h('td', {}, x.duration_ms.toFixed(1)))));
  if (!r.records.length) body.append(h('tr', {}, h('td', { colspan: 6, class: 'empty' }, 'No records.')));
}

// ---------------------------------------------------------------- admin

function chart(title, pts, key, fmt) {
  // One bar per sample (every 10 s), so that the first minute already
  // shows something; SVG attributes, not styles, under the CSP.
  const w = 360, ht = 90, pad = 2;
  const vals = pts.map((p) => p[key]);
  const top = Math.max(0, ...vals);
  const slot = (w - 2 * pad) / Math.max(pts.length, 60);
  const s = svg('svg', { viewBox: `0 0 ${w} ${ht}`, class: 'chart', role: 'img', 'aria-label': `${title} over the last hour` });
  vals.forEach((v, i) => {
    const bh = top > 0 ? Math.max(1, (v / top) * (ht - 2 * pad)) : 0;
    if (bh) s.append(svg('rect', { x: (w - pad - (vals.length - i) * slot).toFixed(2), y: (ht - pad - bh).toFixed(2), width: Math.max(1, slot - 1).toFixed(2), height: bh.toFixed(2), fill: 'currentColor' }));
  });
  const last = vals.length ? vals[vals.length - 1] : 0;
  return h('figure', { class: 'card' }, h('figcaption', {}, title, ': ', h('strong', {}, fmt(last)), h('small', {}, ` (max ${fmt(top)})`)), s);
}

async function overviewPage() {
  const charts = h('div', { class: 'charts', id: 'charts' });
  const facts = h('div', { class: 'facts' });
  const note = h('p', { class: 'note' });
  page('Overview', facts, h('h2', {}, 'Last hour'), charts, note);
  every(10000, async () => {
    const st = await attempt(() => api.get('/v1/stats'));
    if (st) facts.replaceChildren(h('span', {}, `${st.sessions} / ${st.max_sessions || '∞'} sessions`), h('span', {}, 'cgroup ' + st.cgroup_mode), h('span', {}, 'version ' + st.version));
    const r = await attempt(() => api.get('/console/api/history'));
    if (!r) return;
    const p = r.points;
    charts.replaceChildren(
      chart('Sessions', p, 'sessions', (v) => String(Math.round(v))),
      chart('Creates per interval', p, 'creates', (v) => String(Math.round(v))),
      chart('Exec rate', p, 'exec_rate', (v) => v.toFixed(2) + '/s'),
      chart('Exec latency', p, 'exec_latency_seconds', (v) => (v * 1000).toFixed(1) + ' ms'));
    note.textContent = `${p.length} samples, one every 10 seconds, kept in the daemon's memory for an hour.`;
  });
}

async function tenantsPage() {
  const body = h('tbody');
  page('Tenants', h('div', { class: 'scroll' }, h('table', { class: 'list' },
    h('thead', {}, h('tr', {}, ['Tenant', 'Sessions', 'Memory', 'CPUs', 'Max lifetime', 'Policy'].map((t) => h('th', { scope: 'col' }, t)))), body)));
  const [t, s] = await Promise.all([attempt(() => api.get('/v1/tenants')), attempt(() => api.get('/v1/sessions?all=true'))]);
  if (!t || !s) return;
  const use = {};
  for (const x of s.sessions) {
    const u = (use[x.tenant] ||= { n: 0, mem: 0, cpus: 0 });
    u.n++; u.mem += x.limits.memory_mb || 0; u.cpus += x.limits.cpus || 0;
  }
  const names = new Set([...t.tenants.map((x) => x.name), ...Object.keys(use)]);
  body.replaceChildren(...[...names].sort().map((n) => {
    const q = (t.tenants.find((x) => x.name === n) || { quota: {}, policy: {} });
    const u = use[n] || { n: 0, mem: 0, cpus: 0 };
    return h('tr', {}, h('td', {}, n), h('td', {}, meter('', u.n, q.quota.max_sessions || 0)),
      h('td', {}, meter('', u.mem, q.quota.max_memory_mb || 0, (v) => v + ' MiB')), h('td', {}, meter('', u.cpus, q.quota.max_cpus || 0)),
      h('td', {}, q.quota.max_lifetime_seconds ? dur(q.quota.max_lifetime_seconds * 1000) : '—'),
      h('td', {}, [...(q.policy.allow || []).map((a) => 'allow ' + a), ...(q.policy.deny || []).map((a) => 'deny ' + a)].join(', ') || '—'));
  }));
}

function keysPage() {
  const body = h('tbody');
  const tenant = h('input', { id: 'key-tenant', required: true, value: 'default' });
  const name = h('input', { id: 'key-name' });
  const admin = h('input', { id: 'key-admin', type: 'checkbox' });
  const secret = h('div', { id: 'secret', 'aria-live': 'polite' });
  const load = async () => {
    const r = await attempt(() => api.get('/v1/keys'));
    if (!r) return;
    body.replaceChildren(...r.keys.map((k) => h('tr', {},
      h('td', {}, k.id), h('td', {}, k.tenant), h('td', {}, k.name || ''), h('td', {}, k.admin ? 'admin' : ''),
      h('td', {}, new Date(k.created_at).toLocaleString()), h('td', {}, k.revoked_at ? 'revoked' : k.expires_at ? 'expires ' + new Date(k.expires_at).toLocaleString() : 'active'),
      h('td', {}, k.revoked_at ? null : h('button', { type: 'button', class: 'small danger', onclick: async () => {
        if (!confirm(`Revoke key ${k.id}? Everything using it stops working.`)) return;
        await attempt(() => api.del(`/v1/keys/${api.enc(k.id)}`), `Revoked ${k.id}`);
        load();
      } }, 'Revoke')))));
  };
  page('Keys', h('form', { class: 'card grid', onsubmit: async (e) => {
    e.preventDefault();
    const k = await attempt(() => api.post('/v1/keys', { tenant: tenant.value.trim(), name: name.value.trim() || undefined, admin: admin.checked }));
    if (!k) return;
    // The secret is shown once, here, and never again.
    const code = h('code', { id: 'secret-value' }, k.secret);
    secret.replaceChildren(h('p', {}, `Key ${k.id} created. Copy its secret now: it is not shown again.`), code,
      h('button', { type: 'button', onclick: () => { navigator.clipboard?.writeText(k.secret); say('Copied'); } }, 'Copy'),
      h('button', { type: 'button', onclick: () => secret.replaceChildren() }, 'Done'));
    load();
  } }, field('Tenant', tenant), field('Name', name), h('div', { class: 'field check' }, admin, h('label', { for: 'key-admin' }, 'Admin')),
  h('div', { class: 'actions' }, h('button', { type: 'submit' }, 'Create key'))), secret,
  h('div', { class: 'scroll' }, h('table', { class: 'list' }, h('thead', {}, h('tr', {}, ['Key', 'Tenant', 'Name', 'Role', 'Created', 'State', ''].map((t) => h('th', { scope: 'col' }, t)))), body)));
  load();
}

function imagesPage() {
  const body = h('tbody');
  const ref = h('input', { id: 'pull-ref', placeholder: 'docker.io/library/alpine:3.20', required: true });
  const progress = h('progress', { id: 'pull-progress', max: 1, value: 0, hidden: true });
  const ptext = h('span', { class: 'note' });
  const load = async () => {
    const r = await attempt(() => api.get('/v1/images'));
    if (!r) return;
    body.replaceChildren(...r.images.map((i) => h('tr', {},
      h('td', {}, i.name), h('td', {}, bytes(i.size)), h('td', {}, i.source || ''), h('td', {}, i.platform || ''), h('td', {}, new Date(i.created_at).toLocaleString()),
      h('td', {}, h('button', { type: 'button', class: 'small danger', onclick: async () => {
        if (!confirm(`Delete image ${i.name}?`)) return;
        await attempt(() => api.del(`/v1/images/${api.enc(i.name)}`), `Deleted ${i.name}`);
        load();
      } }, 'Delete')))));
  };
  const file = h('input', { id: 'import-file', type: 'file', accept: '.tar,.tgz,.tar.gz' });
  const iname = h('input', { id: 'import-name', placeholder: 'name', required: true, 'aria-label': 'Name of the imported image' });
  const format = h('select', { id: 'import-format', 'aria-label': 'Archive format' }, ['rootfs', 'oci-layout', 'docker-archive'].map((f) => h('option', {}, f)));
  page('Images',
    h('form', { class: 'card toolbar', onsubmit: async (e) => {
      e.preventDefault();
      progress.hidden = false;
      ptext.textContent = 'Pulling…';
      ptext.dataset.events = 0;
      const ok = await attempt(() => api.sse('POST', '/v1/images/pull', { ref: ref.value.trim() }, (name, d) => {
        if (name === 'progress') {
          ptext.dataset.events = +(ptext.dataset.events || 0) + 1; // how many came: the tests read it
          progress.max = d.total || 1; progress.value = d.current || 0;
          ptext.textContent = `${d.status}${d.layers ? ` layer ${d.layer}/${d.layers}` : ''} ${bytes(d.current)}${d.total ? ' / ' + bytes(d.total) : ''}`;
        } else if (name === 'error') throw new Error(d.error.message);
        else if (name === 'image' || name === 'done') ptext.textContent = 'Pulled ' + (d.name || ref.value);
      }));
      progress.hidden = true;
      if (ok !== undefined) say('Pulled ' + ref.value);
      load();
    } }, h('label', { for: 'pull-ref' }, 'Pull'), ref, h('button', { type: 'submit' }, 'Pull'), progress, ptext),
    h('form', { class: 'card toolbar', onsubmit: async (e) => {
      e.preventDefault();
      if (!file.files.length) return;
      await attempt(() => api.call('POST', `/v1/images?name=${api.enc(iname.value.trim())}&format=${api.enc(format.value)}`, file.files[0]), 'Imported ' + iname.value);
      load();
    } }, h('label', { for: 'import-file' }, 'Import'), file, iname, format, h('button', { type: 'submit' }, 'Import')),
    h('div', { class: 'scroll' }, h('table', { class: 'list' }, h('thead', {}, h('tr', {}, ['Image', 'Size', 'Source', 'Platform', 'Created', ''].map((t) => h('th', { scope: 'col' }, t)))), body)));
  load();
}

function workspacesPage() {
  const body = h('tbody');
  const name = h('input', { id: 'ws-name', required: true });
  const size = h('input', { id: 'ws-size', type: 'number', min: 0, placeholder: 'MiB' });
  const shared = h('input', { id: 'ws-shared', type: 'checkbox' });
  const load = async () => {
    const r = await attempt(() => api.get('/v1/workspaces'));
    if (!r) return;
    body.replaceChildren(...r.workspaces.map((w) => h('tr', {},
      h('td', {}, w.name), h('td', {}, meter('', w.used_bytes, w.size_mb * 1048576, bytes)), h('td', {}, w.shared ? 'shared' : ''),
      h('td', {}, (w.mounted_by || []).map((m) => h('a', { href: `#/s/${api.enc(m.session)}` }, m.session, ' (', m.mode, ') '))),
      h('td', {}, h('button', { type: 'button', class: 'small danger', onclick: async () => {
        if (!confirm(`Delete workspace ${w.name} and its files?`)) return;
        await attempt(() => api.del(`/v1/workspaces/${api.enc(w.name)}`), `Deleted ${w.name}`);
        load();
      } }, 'Delete')))));
    if (!r.workspaces.length) body.append(h('tr', {}, h('td', { colspan: 5, class: 'empty' }, 'No workspaces.')));
  };
  page('Workspaces', h('form', { class: 'card grid', onsubmit: async (e) => {
    e.preventDefault();
    await attempt(() => api.post('/v1/workspaces', { name: name.value.trim(), size_mb: size.value ? +size.value : undefined, shared: shared.checked }), 'Created ' + name.value);
    load();
  } }, field('Name', name), field('Size (MiB)', size), h('div', { class: 'field check' }, shared, h('label', { for: 'ws-shared' }, 'Shared')),
  h('div', { class: 'actions' }, h('button', { type: 'submit' }, 'Create workspace'))),
  h('div', { class: 'scroll' }, h('table', { class: 'list' }, h('thead', {}, h('tr', {}, ['Workspace', 'Used', '', 'Mounted by', ''].map((t) => h('th', { scope: 'col' }, t)))), body)));
  load();
}

// ---------------------------------------------------------------- routing

function route() {
  cleanups.forEach((f) => f());
  cleanups = [];
  if (!api.whoami()) { signInPage(); return; }
  const parts = location.hash.replace(/^#\/?/, '').split('/').map(decodeURIComponent);
  for (const a of document.querySelectorAll('#nav a')) a.toggleAttribute('aria-current', a.getAttribute('href') === '#/' + parts[0]);
  switch (parts[0]) {
    case 's': sessionPage(parts[1], parts[2], parts.slice(3).join('/') || undefined); break;
    case 'overview': overviewPage(); break;
    case 'tenants': tenantsPage(); break;
    case 'keys': keysPage(); break;
    case 'images': imagesPage(); break;
    case 'workspaces': workspacesPage(); break;
    default: sessionsPage();
  }
  main.focus({ preventScroll: true });
}

api.onSignedOut(() => { showWho(); say('Signed out: sign in again.', true); route(); });
$('#signout').addEventListener('click', async () => {
  await attempt(() => api.signOut(), 'Signed out');
  showWho();
  location.hash = '#/';
  route();
});
window.addEventListener('hashchange', route);
await api.restore();
showWho();
route();
