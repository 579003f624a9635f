// A terminal on a session's shell WebSocket (GET /v1/sessions/{id}/shell):
// xterm.js for the screen, binary frames for output and keystrokes, JSON
// text frames for control (process, resize, exit, error). The browser sends
// the console's cookie with the upgrade; the daemon takes it from its own
// origin only.
import { Terminal } from './vendor/xterm.mjs';
import { FitAddon } from './vendor/addon-fit.mjs';

// xterm.js writes its theme and cell sizes into <style> elements it creates
// when it opens. The console's Content-Security-Policy refuses inline
// styles (style-src 'self'), so while a terminal opens, the <style> it asks
// for is an inert <template>, and what xterm.js writes into it is applied
// as a constructed style sheet, which the policy does not cover because no
// markup can inject one.
const sheets = new Map(); // template -> CSSStyleSheet

function syncSheet(el) {
  let sheet = sheets.get(el);
  if (!sheet) {
    sheet = new CSSStyleSheet();
    sheets.set(el, sheet);
    document.adoptedStyleSheets = [...document.adoptedStyleSheets, sheet];
  }
  sheet.replaceSync(el.textContent);
}

function dropSheets(root) {
  for (const [el, sheet] of sheets) {
    if (root.contains(el) || !el.isConnected) {
      sheets.delete(el);
      document.adoptedStyleSheets = document.adoptedStyleSheets.filter((s) => s !== sheet);
    }
  }
}

const styleWatcher = new MutationObserver((records) => {
  for (const r of records) {
    const t = r.target.nodeType === Node.TEXT_NODE ? r.target.parentNode : r.target;
    if (t && t.dataset && 'xtermStyle' in t.dataset) syncSheet(t);
    for (const n of r.addedNodes) {
      if (n.dataset && 'xtermStyle' in n.dataset) syncSheet(n);
    }
  }
});
styleWatcher.observe(document, { subtree: true, childList: true, characterData: true });

function openWithoutInlineStyles(term, el) {
  const create = document.createElement;
  document.createElement = function (tag, opts) {
    if (String(tag).toLowerCase() === 'style') {
      const t = create.call(document, 'template');
      t.dataset.xtermStyle = '';
      return t;
    }
    return create.call(document, tag, opts);
  };
  try {
    term.open(el);
  } finally {
    document.createElement = create;
  }
  for (const t of el.querySelectorAll('template[data-xterm-style]')) syncSheet(t);
}

// openTerminal opens a terminal in el on session id: a new shell, or the
// running terminal process pid (reattach; several viewers may attach to
// one). onProcess hears the process id, onEnd why the connection ended.
export function openTerminal(el, id, { pid, onProcess, onEnd } = {}) {
  const term = new Terminal({ cursorBlink: true, fontSize: 14, scrollback: 5000, convertEol: false });
  const fit = new FitAddon();
  term.loadAddon(fit);
  openWithoutInlineStyles(term, el);
  try { fit.fit(); } catch { /* not laid out yet */ }
  const q = new URLSearchParams({ cols: term.cols, rows: term.rows });
  if (pid) q.set('process', pid);
  const scheme = location.protocol === 'https:' ? 'wss:' : 'ws:';
  const ws = new WebSocket(`${scheme}//${location.host}/v1/sessions/${encodeURIComponent(id)}/shell?${q}`);
  ws.binaryType = 'arraybuffer';
  const encoder = new TextEncoder();
  let ended = false;
  const end = (why) => {
    if (ended) return;
    ended = true;
    onEnd?.(why);
  };
  ws.onmessage = (ev) => {
    if (typeof ev.data !== 'string') {
      term.write(new Uint8Array(ev.data));
      return;
    }
    let msg;
    try { msg = JSON.parse(ev.data); } catch { term.write(ev.data); return; }
    if (msg.type === 'process') onProcess?.(msg.id);
    else if (msg.type === 'exit') end(`the shell exited (${msg.signal || 'code ' + msg.exit_code})`);
    else if (msg.type === 'error') end(msg.error?.message || 'error');
  };
  ws.onclose = (ev) => end(ev.reason || `disconnected (${ev.code})`);
  ws.onerror = () => end('the connection failed');
  term.onData((d) => { if (ws.readyState === WebSocket.OPEN) ws.send(encoder.encode(d)); });
  term.onBinary((d) => {
    if (ws.readyState !== WebSocket.OPEN) return;
    const b = new Uint8Array(d.length);
    for (let i = 0; i < d.length; i++) b[i] = d.charCodeAt(i) & 0xff;
    ws.send(b);
  });
  const sendSize = () => {
    if (ws.readyState === WebSocket.OPEN) ws.send(JSON.stringify({ type: 'resize', cols: term.cols, rows: term.rows }));
  };
  term.onResize(sendSize);
  ws.onopen = sendSize;
  const ro = new ResizeObserver(() => { try { fit.fit(); } catch { /* hidden */ } });
  ro.observe(el);
  term.focus();
  return {
    term,
    // close leaves the shell running: another viewer, or this page after
    // a reload, attaches to it again.
    close() {
      ro.disconnect();
      ended = true;
      ws.close();
      term.dispose();
      dropSheets(el);
    },
  };
}
