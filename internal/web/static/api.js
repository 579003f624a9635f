// The console's calls to the daemon: the REST API and the console's own
// (/console/api/*), with the session cookie the browser sends by itself and
// the CSRF token kept in this module's memory only (never in storage or a
// URL). A reloaded page asks /console/api/whoami for it again.

let me = null; // {tenant, key_id, admin, auth, csrf}

export function whoami() { return me; }

// ApiError carries the error envelope's code and message.
export class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

const listeners = new Set();
// onSignedOut calls f when a call finds the browser session gone.
export function onSignedOut(f) { listeners.add(f); }

async function fail(res) {
  let code = 'http_' + res.status, message = res.status + ' ' + res.statusText;
  try {
    const body = await res.json();
    if (body && body.error) ({ code, message } = body.error);
  } catch { /* not an envelope */ }
  if (res.status === 401 && me && me.auth) {
    me = null;
    listeners.forEach((f) => f());
  }
  return new ApiError(res.status, code, message);
}

// call sends method path with body (an object is sent as JSON, a Blob or
// string as is) and returns the parsed answer: JSON, or the Response itself
// with raw: true.
export async function call(method, path, body, { raw = false, headers = {}, signal } = {}) {
  const h = { Accept: 'application/json', ...headers };
  if (method !== 'GET' && method !== 'HEAD' && me && me.csrf) h['X-CSRF-Token'] = me.csrf;
  let b = body;
  if (body !== undefined && !(body instanceof Blob) && typeof body !== 'string') {
    h['Content-Type'] = 'application/json';
    b = JSON.stringify(body);
  }
  const res = await fetch(path, { method, headers: h, body: b, credentials: 'same-origin', signal });
  if (!res.ok) throw await fail(res);
  if (raw) return res;
  if (res.status === 204) return null;
  const type = res.headers.get('Content-Type') || '';
  return type.includes('json') ? res.json() : res.text();
}

export const get = (p, o) => call('GET', p, undefined, o);
export const post = (p, b, o) => call('POST', p, b ?? {}, o);
export const put = (p, b, o) => call('PUT', p, b, o);
export const del = (p, o) => call('DELETE', p, undefined, o);

// signIn exchanges an API key for the session cookie. The key goes in a
// header of one POST and is forgotten.
export async function signIn(key) {
  const res = await fetch('/console/api/signin', {
    method: 'POST', credentials: 'same-origin',
    headers: { Authorization: 'Bearer ' + key.trim(), Accept: 'application/json' },
  });
  if (!res.ok) throw await fail(res);
  me = await res.json();
  return me;
}

// restore asks who this browser is signed in as (after a reload).
export async function restore() {
  const res = await fetch('/console/api/whoami', { credentials: 'same-origin', headers: { Accept: 'application/json' } });
  if (!res.ok) return null;
  me = await res.json();
  return me;
}

export async function signOut() {
  try {
    await call('POST', '/console/api/signout', {});
  } finally {
    me = null;
  }
}

// sse reads a server-sent event stream answered to a fetch (a POST, which
// EventSource cannot send) and calls onEvent(name, data) per event.
export async function sse(method, path, body, onEvent, signal) {
  const res = await call(method, path, body, { raw: true, headers: { Accept: 'text/event-stream' }, signal });
  const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
  let buf = '';
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buf += value;
    let i;
    while ((i = buf.indexOf('\n\n')) >= 0) {
      const block = buf.slice(0, i);
      buf = buf.slice(i + 2);
      let name = 'message', data = '';
      for (const line of block.split('\n')) {
        if (line.startsWith('event: ')) name = line.slice(7);
        else if (line.startsWith('data: ')) data += line.slice(6);
      }
      if (data) onEvent(name, JSON.parse(data));
    }
  }
}

export const enc = encodeURIComponent;
