// The acts dashboard: one page, hash routes, the /api/v1 of the server it
// came from. Every element is built from text (h() below); nothing the
// server sends is ever parsed as HTML.
'use strict';

// ---- helpers ---------------------------------------------------------------

/** An element: h('a', {href: '#/x', class: 'y', onclick: f}, 'text', child, ...). */
function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k.startsWith('on')) el.addEventListener(k.slice(2), v);
    else if (k === 'class') el.className = v;
    else if (k === 'value') el.value = v;
    else el.setAttribute(k, v === true ? '' : String(v));
  }
  for (const c of children.flat(Infinity)) {
    if (c === null || c === undefined || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

const SYMBOL = {
  completed: '✓', submitted: '✓', running: '▶', pending: '…', ready: '…',
  interrupted: '‖', error: '✗', aborted: '■', skipped: '↷', removed: '–',
  backed: '↶', cancelled: '↶', none: '○',
};

/** A state as a word with a symbol (colour only adds to it). */
function stateBadge(state, id) {
  return h('span', { class: 'state ' + state, id }, (SYMBOL[state] || '') + ' ' + state);
}

function when(ms) {
  if (!ms) return '';
  const d = new Date(ms);
  return d.toLocaleString(undefined, { hour12: false }) + '.' + String(d.getMilliseconds()).padStart(3, '0');
}

function toast(text) {
  const t = document.getElementById('toast');
  t.textContent = text;
  t.classList.add('show');
  clearTimeout(toast.timer);
  toast.timer = setTimeout(() => t.classList.remove('show'), 4000);
}

function pretty(v) {
  return JSON.stringify(v, null, 2);
}

// ---- the API ---------------------------------------------------------------

const TOKEN_KEY = 'acts.token';
const token = () => sessionStorage.getItem(TOKEN_KEY) || '';

class ApiError extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}

async function api(method, path, body, text) {
  const headers = {};
  if (token()) headers.Authorization = 'Bearer ' + token();
  let payload;
  if (body !== undefined) {
    payload = text ? body : JSON.stringify(body);
    headers['Content-Type'] = text ? 'application/yaml' : 'application/json';
  }
  const res = await fetch('/api/v1' + path, { method, headers, body: payload });
  const raw = await res.text();
  let data = null;
  try { data = raw ? JSON.parse(raw) : null; } catch (_) { data = raw; }
  if (!res.ok) {
    const message = data && data.error ? data.error.message : res.status + ' ' + raw;
    throw new ApiError(res.status, message);
  }
  return data;
}

/** Listens to a Server-Sent Events path with the token (EventSource cannot
 *  send one); calls onMessage(message) per event; returns a stop function. */
function listen(path, onMessage) {
  const ctl = new AbortController();
  const headers = token() ? { Authorization: 'Bearer ' + token() } : {};
  (async () => {
    try {
      const res = await fetch('/api/v1' + path, { headers, signal: ctl.signal });
      if (!res.ok || !res.body) return;
      const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
      let buf = '';
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buf += value;
        let cut;
        while ((cut = buf.indexOf('\n\n')) >= 0) {
          const event = buf.slice(0, cut);
          buf = buf.slice(cut + 2);
          const data = event.split('\n').filter((l) => l.startsWith('data:')).map((l) => l.slice(5).trim()).join('\n');
          if (data) {
            try { onMessage(JSON.parse(data)); } catch (_) { /* a note, not a message */ }
          }
        }
      }
    } catch (_) { /* stopped, or the server went away */ }
  })();
  return () => ctl.abort();
}

/** Runs f at most once per `ms` (live updates come in bursts). */
function debounce(f, ms) {
  let t = null;
  return () => {
    if (t) return;
    t = setTimeout(() => { t = null; f(); }, ms);
  };
}

// ---- the page frame ----------------------------------------------------------

let me = null;
let stopLive = () => {};

function setMain(...children) {
  const main = document.getElementById('main');
  main.replaceChildren(...children.flat(Infinity).filter((c) => c !== null && c !== undefined && c !== false));
}

function showError(e) {
  setMain(h('div', { class: 'card' }, h('p', { class: 'error-text' }, e.message || String(e))));
}

async function whoAmI() {
  try {
    me = await api('GET', '/me');
  } catch (e) {
    if (e.status === 401) return signIn(e.message);
    throw e;
  }
  const who = document.getElementById('who');
  who.replaceChildren(
    h('span', { id: 'principal' }, me.principal + (me.roles.length ? ' (' + me.roles.join(', ') + ')' : '')),
    ...(me.tokens ? [h('button', { class: 'secondary', onclick: () => { sessionStorage.removeItem(TOKEN_KEY); location.reload(); } }, 'Sign out')] : []),
  );
  return true;
}

function signIn(reason) {
  const input = h('input', { id: 'token', type: 'password', autocomplete: 'current-password', required: true, 'aria-label': 'Token' });
  const form = h('form', { class: 'card', onsubmit: (ev) => {
    ev.preventDefault();
    sessionStorage.setItem(TOKEN_KEY, input.value.trim());
    route();
  } },
  h('h1', {}, 'Sign in'),
  h('p', { class: 'muted' }, reason || 'This server needs a token.'),
  h('div', { class: 'row' }, h('label', {}, 'Token', input), h('button', { id: 'signin', type: 'submit' }, 'Sign in')));
  setMain(form);
  input.focus();
  return false;
}

const PAGES = {
  processes: processesPage,
  process: processPage,
  inbox: inboxPage,
  models: modelsPage,
  model: modelPage,
  dead: deadPage,
};

async function route() {
  stopLive();
  stopLive = () => {};
  const [, page = 'processes', ...rest] = (location.hash || '#/processes').split('/');
  const arg = rest.map(decodeURIComponent).join('/');
  for (const a of document.querySelectorAll('#nav a')) {
    if (a.dataset.page === page || (page === 'process' && a.dataset.page === 'processes') || (page === 'model' && a.dataset.page === 'models')) a.setAttribute('aria-current', 'page');
    else a.removeAttribute('aria-current');
  }
  try {
    if (!(await whoAmI())) return;
    await (PAGES[page] || processesPage)(arg);
  } catch (e) {
    if (e.status === 401) signIn(e.message);
    else showError(e);
  }
}

window.addEventListener('hashchange', route);
window.addEventListener('DOMContentLoaded', route);

// ---- processes ---------------------------------------------------------------

const STATES = ['', 'running', 'interrupted', 'completed', 'error', 'aborted', 'none'];

async function processesPage() {
  const params = new URLSearchParams(location.hash.split('?')[1] || '');
  const state = h('select', { id: 'filter-state' }, STATES.map((s) => h('option', { value: s }, s || 'any state')));
  state.value = params.get('state') || '';
  const model = h('input', { id: 'filter-model', placeholder: 'model id', value: params.get('model') || '' });
  const order = h('select', { id: 'filter-order' }, h('option', { value: 'desc' }, 'newest first'), h('option', { value: 'asc' }, 'oldest first'));
  order.value = params.get('order') || 'desc';
  const body = h('tbody');
  const pager = h('div', { class: 'pager' });
  const cursors = [null];
  let page = 0;

  async function load() {
    const q = new URLSearchParams({ limit: '20', order: order.value });
    if (state.value) q.set('state', state.value);
    if (model.value.trim()) q.set('model', model.value.trim());
    if (cursors[page]) q.set('cursor', cursors[page]);
    const r = await api('GET', '/processes?' + q);
    body.replaceChildren(...r.processes.map((p) => h('tr', {},
      h('td', { class: 'mono' }, h('a', { href: '#/process/' + encodeURIComponent(p.pid), class: 'process-link' }, p.pid)),
      h('td', {}, p.model_id),
      h('td', {}, stateBadge(p.state), p.waiting_for ? h('span', { class: 'muted' }, ' waits for ' + ({ concurrency: 'its key', gate: 'a task\'s gate' }[p.waiting_for] || 'a place')) : null),
      h('td', { class: 'opt' }, when(p.start_time)),
      h('td', { class: 'opt' }, when(p.end_time)),
      h('td', { class: 'opt' }, p.started_by || ''))));
    if (!r.processes.length) body.append(h('tr', {}, h('td', { colspan: 6, class: 'muted' }, 'No processes.')));
    cursors[page + 1] = r.next;
    pager.replaceChildren(
      h('button', { class: 'secondary', disabled: page === 0, onclick: () => { page -= 1; load(); } }, '← Newer'),
      h('span', { class: 'muted' }, `${r.total} in all · page ${page + 1}`),
      h('button', { class: 'secondary', disabled: !r.next, onclick: () => { page += 1; load(); } }, 'Older →'));
  }

  const apply = (ev) => { ev.preventDefault(); page = 0; cursors.length = 1; load().catch(showError); };
  setMain(
    h('h1', {}, 'Processes'),
    h('form', { class: 'card row', onsubmit: apply },
      h('label', {}, 'State', state), h('label', {}, 'Model', model), h('label', {}, 'Order', order),
      h('button', { type: 'submit' }, 'Filter')),
    h('div', { class: 'table-wrap' }, h('table', {},
      h('thead', {}, h('tr', {}, h('th', {}, 'Process'), h('th', {}, 'Model'), h('th', {}, 'State'),
        h('th', { class: 'opt' }, 'Started'), h('th', { class: 'opt' }, 'Ended'), h('th', { class: 'opt' }, 'Started by'))),
      body)),
    pager);
  await load();
  const refresh = debounce(() => load().catch(() => {}), 500);
  stopLive = listen('/messages?type=workflow', refresh);
}

// ---- one process ---------------------------------------------------------------

// Why a parked process has not started, for people.
function waitingFor(p) {
  if (p.waiting_for === 'concurrency') {
    return h('p', { id: 'waiting-for' }, `Waiting for a free slot of its concurrency key ${p.concurrency_key}: it starts when a process of that key ends.`);
  }
  if (p.waiting_for === 'admission') {
    return h('p', { id: 'waiting-for' }, "Waiting for a place under the engine's admission cap: it starts when a process ends.");
  }
  if (p.waiting_for === 'gate') {
    return h('p', { id: 'waiting-for' }, "A task waits (pending) at a step's or act's concurrency or rate key: it runs when a slot of the key frees or a token comes.");
  }
  return null;
}

async function processPage(pid) {
  const { process: p, tasks } = await api('GET', '/processes/' + encodeURIComponent(pid));
  let def = null;
  try { def = (await api('GET', `/processes/${encodeURIComponent(pid)}/model`)).definition; } catch (_) { /* unreadable: drawn without */ }
  const live = h('ul', { class: 'timeline', id: 'live' });
  const actions = [];
  if (me.operator && !isTerminal(p.state)) {
    // A control sends no message of its own: the page is drawn again.
    const control = (what, body, done) => act(() => api('POST', `/processes/${encodeURIComponent(pid)}/${what}`, body), done).then(() => route(), () => {});
    if (p.paused) {
      actions.push(h('button', { id: 'resume-process', onclick: () => control('resume', undefined, 'Resumed') }, 'Resume'));
    } else if (p.state !== 'none') {
      actions.push(h('button', { id: 'pause-process', class: 'secondary', onclick: () => {
        const reason = prompt('Why pause it? (kept in its history)', '');
        if (reason !== null) control('pause', { reason }, 'Paused');
      } }, 'Pause'));
    }
    // A parked process has not started: there is nothing to terminate
    // (it is removed, or aborted).
    if (p.state !== 'none') actions.push(h('button', { id: 'terminate-process', class: 'danger', onclick: () => {
      const reason = prompt('Why terminate it? (its error, kept in its history)', '');
      if (reason !== null) control('terminate', { reason }, 'Terminated');
    } }, 'Terminate'));
    actions.push(h('button', { class: 'danger', onclick: () => act(() => api('POST', `/processes/${encodeURIComponent(pid)}/abort`), 'Aborted') }, 'Abort process'));
  }
  if (me.operator && p.state === 'error') {
    // Runs the step where the error began again; the page is drawn again.
    actions.push(h('button', { id: 'retry-process', onclick: () => act(() => api('POST', `/processes/${encodeURIComponent(pid)}/retry`), 'Retried').then(() => route(), () => {}) }, 'Retry'));
  }
  if (me.operator) {
    actions.push(h('button', { class: 'secondary', onclick: async () => {
      if (!confirm('Remove process ' + pid + ' and all its rows?')) return;
      await act(() => api('DELETE', '/processes/' + encodeURIComponent(pid)), 'Removed');
      location.hash = '#/processes';
    } }, 'Remove'));
  }
  const waiting = tasks.filter((t) => t.state === 'interrupted');
  setMain(
    h('h1', {}, 'Process ', h('span', { class: 'mono' }, p.pid)),
    h('div', { class: 'card' },
      h('p', {}, 'Model ', h('a', { href: '#/model/' + encodeURIComponent(p.model_id) }, p.model_id), p.model_rev ? ` (version ${p.model_rev})` : '', ' · state ', stateBadge(p.state, 'process-state'),
        p.started_by ? ' · started by ' + p.started_by : '',
        p.start_time ? ' · started ' + when(p.start_time) : '', p.end_time ? ' · ended ' + when(p.end_time) : ''),
      p.err ? h('p', { class: 'error-text' }, `${p.err.ecode} ${p.err.message}`) : null,
      waitingFor(p),
      p.paused ? h('p', { id: 'paused', class: 'error-text' }, `Paused by ${p.paused.by || 'the application'} since ${when(p.paused.at)}${p.paused.reason ? ': ' + p.paused.reason : ''} — automatic steps and timers wait; answers are refused until it is resumed.`) : null,
      actions.length ? h('div', { class: 'row' }, actions) : null),
    waiting.length ? [h('h2', {}, 'Waiting for an answer'), waiting.map((t) => answerCard({ ...t, model_id: p.model_id }, () => route()))] : null,
    h('h2', {}, 'Workflow'),
    h('div', { class: 'card graph', id: 'graph' }, def ? graphOf(def, tasks) : h('p', { class: 'muted' }, 'The model cannot be read.')),
    h('div', { class: 'grid2' },
      h('section', {}, h('h2', {}, 'Outputs'), h('div', { class: 'card' }, h('pre', {}, pretty(p.outputs)))),
      h('section', {}, h('h2', {}, 'Variables'), h('div', { class: 'card' }, h('pre', {}, pretty(rootData(tasks)))))),
    h('h2', {}, 'Tasks'),
    h('div', { class: 'table-wrap' }, taskTree(tasks)),
    h('h2', {}, 'Timeline'),
    h('div', { class: 'card' }, timeline(tasks), h('h2', {}, 'Live'), live));
  const refresh = debounce(() => route(), 400);
  stopLive = listen('/messages', (m) => {
    if (m.pid !== pid) return;
    live.prepend(h('li', {}, h('time', {}, when(m.end_time || m.start_time || Date.now())), `${m.type} ${m.name || m.nid} ${m.state}`));
    refresh();
  });
}

function isTerminal(state) {
  return ['completed', 'submitted', 'error', 'aborted', 'skipped', 'removed', 'cancelled', 'backed'].includes(state);
}

function rootData(tasks) {
  const root = tasks.find((t) => t.tid === '$');
  const data = {};
  for (const [k, v] of Object.entries((root && root.data) || {})) if (!k.startsWith('__')) data[k] = v;
  return data;
}

/** The latest task of each node id, and the tasks by parent. */
function index(tasks) {
  const byNid = new Map();
  const children = new Map();
  for (const t of tasks) {
    byNid.set(t.nid, t);
    const list = children.get(t.parent) || [];
    list.push(t);
    children.set(t.parent, list);
  }
  return { byNid, children };
}

/** The workflow drawn as a flow: steps top to bottom, a step's branches
 *  side by side below it, its acts as chips — each with its state. */
function graphOf(def, tasks) {
  const { byNid, children } = index(tasks);
  const node = (kind, n) => {
    const t = byNid.get(n.id);
    const state = t ? t.state : 'none';
    const acts = [];
    for (const a of n.acts || []) {
      const at = a.id ? byNid.get(a.id) : null;
      acts.push(h('span', { class: 'chip' }, (a.name || a.id || a.uses) + ' · ' + (at ? (SYMBOL[at.state] || '') + ' ' + at.state : 'not run')));
    }
    if (t) {
      for (const c of children.get(t.tid) || []) {
        if (c.kind === 'act' && !(n.acts || []).some((a) => a.id === c.nid)) {
          acts.push(h('span', { class: 'chip' }, (c.key || c.name || c.nid) + ' · ' + (SYMBOL[c.state] || '') + ' ' + c.state));
        }
      }
    }
    return h('div', { class: 'node ' + state, 'data-nid': n.id },
      h('div', { class: 'kind' }, kind + (n.uses ? ' · ' + n.uses : '')),
      h('div', { class: 'title' }, n.name || n.id),
      h('div', {}, stateBadge(state)),
      acts.length ? h('div', { class: 'chips' }, acts) : null);
  };
  const steps = (list) => {
    const out = [];
    (list || []).forEach((s, i) => {
      if (i > 0) out.push(h('div', { class: 'arrow', 'aria-hidden': 'true' }, '↓'));
      out.push(node('step', s));
      if (s.branches && s.branches.length) {
        out.push(h('div', { class: 'branches' }, s.branches.map((b) => h('div', { class: 'branch' },
          node('branch' + (b.if ? ' if ' + b.if : b.else ? ' else' : ''), b),
          b.steps && b.steps.length ? [h('div', { class: 'arrow', 'aria-hidden': 'true' }, '↓'), steps(b.steps)] : null))));
      }
    });
    return out;
  };
  return [node('workflow', def), h('div', { class: 'arrow', 'aria-hidden': 'true' }, '↓'), steps(def.steps)];
}

function taskTree(tasks) {
  const { children } = index(tasks);
  const rows = [];
  const walk = (parent, depth) => {
    for (const t of children.get(parent) || []) {
      const took = t.start_time && t.end_time ? `${t.end_time - t.start_time} ms` : '';
      const data = {};
      for (const [k, v] of Object.entries(t.data || {})) if (!k.startsWith('__')) data[k] = v;
      rows.push(h('tr', {},
        h('td', {}, '\u00a0'.repeat(depth * 3) + t.kind),
        h('td', { class: 'mono' }, t.nid + (t.key ? ` [${t.key}]` : '')),
        h('td', {}, stateBadge(t.state)),
        h('td', { class: 'opt' }, when(t.start_time)),
        h('td', { class: 'opt' }, took),
        h('td', { class: 'mono opt' }, Object.keys(data).length ? JSON.stringify(data) : '')));
      walk(t.tid, depth + 1);
    }
  };
  walk(null, 0);
  return h('table', { class: 'tree' },
    h('thead', {}, h('tr', {}, h('th', {}, 'Kind'), h('th', {}, 'Node'), h('th', {}, 'State'),
      h('th', { class: 'opt' }, 'Started'), h('th', { class: 'opt' }, 'Took'), h('th', { class: 'opt' }, 'Data'))),
    h('tbody', {}, rows));
}

/** What happened, in order: tasks starting and ending, and each action
 *  with who applied it. */
function timeline(tasks) {
  const events = [];
  for (const t of tasks) {
    const what = `${t.kind} ${t.name || t.nid}${t.key ? ' [' + t.key + ']' : ''}`;
    if (t.start_time) events.push([t.start_time, 0, `${what} started`]);
    for (const e of t.history || []) events.push([e.at, 1, `${what}: ${e.action} by ${e.by || 'the application'}`]);
    if (t.end_time) events.push([t.end_time, 2, `${what} ${t.state}`]);
  }
  events.sort((a, b) => a[0] - b[0] || a[1] - b[1]);
  return h('ul', { class: 'timeline' }, events.map(([at, , text]) => h('li', {}, h('time', {}, when(at)), text)));
}

async function act(f, done) {
  try {
    await f();
    toast(done);
  } catch (e) {
    toast(e.message);
    throw e;
  }
}

// ---- answering -------------------------------------------------------------------

/** A card with the form that answers waiting act `t`: one field per
 *  output the act exposes (else a JSON object of vars). */
function answerCard(t, after) {
  const fields = (t.exposes || []).map((x) => {
    const type = x.type === 'number' ? 'number' : x.type === 'bool' || x.type === 'boolean' ? 'checkbox' : 'text';
    return h('label', {}, x.title || x.name, h('input', { name: 'out-' + x.name, type, 'data-type': x.type || '' }));
  });
  const vars = fields.length ? null : h('textarea', { name: 'vars', rows: 3, 'aria-label': 'Answer (JSON object)' }, '{}');
  const form = h('form', { class: 'answer', 'data-tid': t.tid, onsubmit: (ev) => ev.preventDefault() });
  const collect = () => {
    if (vars) {
      const v = vars.value.trim() ? JSON.parse(vars.value) : {};
      if (typeof v !== 'object' || v === null || Array.isArray(v)) throw new Error('The answer must be a JSON object');
      return v;
    }
    const out = {};
    for (const input of form.querySelectorAll('input[name^="out-"]')) {
      const name = input.name.slice(4);
      out[name] = input.type === 'checkbox' ? input.checked : input.type === 'number' ? Number(input.value) : input.value;
    }
    return out;
  };
  const send = (action) => async () => {
    let body;
    try { body = action === 'skip' ? {} : collect(); } catch (e) { toast(e.message); return; }
    try {
      await act(() => api('POST', `/processes/${encodeURIComponent(t.pid)}/tasks/${encodeURIComponent(t.tid)}/${action}`, body), `${action}: done`);
      after();
    } catch (_) { /* shown */ }
  };
  form.append(
    fields.length ? h('div', { class: 'row' }, fields) : h('label', {}, 'Answer (JSON object, folded into the process data)', vars),
    h('div', { class: 'row' },
      h('button', { type: 'submit', class: 'complete', onclick: send('complete') }, 'Complete'),
      h('button', { type: 'button', class: 'secondary', onclick: send('submit') }, 'Submit'),
      h('button', { type: 'button', class: 'secondary', onclick: send('skip') }, 'Skip')));
  const params = {};
  for (const [k, v] of Object.entries(t.params || {})) if (k !== 'key') params[k] = v;
  return h('div', { class: 'card', 'data-tid': t.tid },
    h('p', {}, h('strong', {}, t.name || t.key || t.nid), t.key ? ` [${t.key}]` : '', ' · ',
      h('a', { href: '#/process/' + encodeURIComponent(t.pid), class: 'mono' }, t.pid),
      t.model_id ? ' · ' + t.model_id : '', t.start_time ? ' · since ' + when(t.start_time) : ''),
    Object.keys(params).length ? h('pre', { class: 'muted' }, pretty(params)) : null,
    form);
}

// ---- inbox -----------------------------------------------------------------------

async function inboxPage() {
  const list = h('div', { id: 'inbox' });
  async function load() {
    const items = await api('GET', '/inbox');
    list.replaceChildren(...(items.length
      ? items.map((t) => answerCard(t, () => load().catch(showError)))
      : [h('p', { class: 'muted card' }, 'Nothing waits for you.')]));
  }
  setMain(h('h1', {}, 'Inbox'), h('p', { class: 'muted' }, 'The open interrupts you may answer.'), list);
  await load();
  stopLive = listen('/messages?type=act', debounce(() => load().catch(() => {}), 500));
}

// ---- models ------------------------------------------------------------------------

async function modelsPage() {
  const models = await api('GET', '/models');
  const rows = models.map((m) => h('tr', {},
    h('td', {}, h('a', { href: '#/model/' + encodeURIComponent(m.id), class: 'model-link', 'data-id': m.id }, m.id)),
    h('td', {}, m.name), h('td', { class: 'opt' }, m.ver), h('td', { class: 'opt' }, m.revision), h('td', { class: 'opt' }, when(m.deployed_at))));
  const text = h('textarea', { id: 'deploy-text', rows: 10, 'aria-label': 'Model (YAML)', placeholder: 'id: my_model\nsteps:\n  - id: ask\n    uses: acts.core.irq\n    params: { key: approve }' });
  const result = h('div', { id: 'deploy-result' });
  const deploy = me.admin ? h('form', { class: 'card', onsubmit: async (ev) => {
    ev.preventDefault();
    try {
      const info = await api('POST', '/models', text.value, true);
      const warnings = (info.warnings || []).join('; ');
      toast(`Deployed ${info.id} (revision ${info.revision})` + (warnings ? ' — warnings: ' + warnings : ''));
      location.hash = '#/model/' + encodeURIComponent(info.id);
    } catch (e) {
      result.replaceChildren(h('pre', { class: 'error-text' }, e.message));
    }
  } }, h('h2', {}, 'Deploy a model'), text, h('div', { class: 'row' }, h('button', { id: 'deploy', type: 'submit' }, 'Deploy')), result) : null;
  setMain(h('h1', {}, 'Models'),
    h('div', { class: 'table-wrap' }, h('table', {},
      h('thead', {}, h('tr', {}, h('th', {}, 'Id'), h('th', {}, 'Name'), h('th', { class: 'opt' }, 'Version'), h('th', { class: 'opt' }, 'Revision'), h('th', { class: 'opt' }, 'Deployed'))),
      h('tbody', {}, rows.length ? rows : h('tr', {}, h('td', { colspan: 5, class: 'muted' }, 'No models deployed.'))))),
    deploy);
}

async function modelPage(id) {
  const { model, definition, yaml } = await api('GET', '/models/' + encodeURIComponent(id));
  const inputs = (definition.inputs || []).map((v) => {
    const type = v.type === 'number' ? 'number' : 'text';
    return h('label', {}, v.title || v.name, h('input', { name: 'var-' + v.name, type, 'data-type': v.type || '', required: v.required || null }));
  });
  const pid = h('input', { name: 'pid', placeholder: 'generated' });
  const result = h('div');
  const start = h('form', { class: 'card', onsubmit: async (ev) => {
    ev.preventDefault();
    const vars = {};
    for (const input of start.querySelectorAll('input[name^="var-"]')) {
      if (input.value === '') continue;
      vars[input.name.slice(4)] = input.dataset.type === 'number' ? Number(input.value) : input.value;
    }
    if (pid.value.trim()) vars.pid = pid.value.trim();
    try {
      const p = await api('POST', '/processes', { model: id, vars });
      location.hash = '#/process/' + encodeURIComponent(p.pid);
    } catch (e) {
      result.replaceChildren(h('p', { class: 'error-text' }, e.message));
    }
  } }, h('h2', {}, 'Start a process'), h('div', { class: 'row' }, inputs, h('label', {}, 'Process id', pid), h('button', { id: 'start', type: 'submit' }, 'Start')), result);
  const lines = (yaml || '').replace(/\n$/, '').split('\n');
  const code = h('div', { class: 'code', role: 'region', 'aria-label': 'Model YAML' },
    lines.map((l, i) => [h('span', { class: 'ln' }, i + 1), h('span', { class: 'tx' }, l || ' ')]));
  const remove = me.admin ? h('button', { class: 'secondary', onclick: async () => {
    if (!confirm('Remove model ' + id + '? Its running processes are not affected.')) return;
    await act(() => api('DELETE', '/models/' + encodeURIComponent(id)), 'Removed');
    location.hash = '#/models';
  } }, 'Remove model') : null;
  setMain(h('h1', {}, model.name || model.id),
    h('p', { class: 'muted' }, `${model.id} · version ${model.ver} · revision ${model.revision} · deployed ${when(model.deployed_at)}`),
    start, h('h2', {}, 'Definition'), code, remove ? h('p', {}, remove) : null);
}

// ---- dead letters --------------------------------------------------------------------

async function deadPage() {
  if (!me.operator) {
    setMain(h('h1', {}, 'Dead letters'), h('p', { class: 'card muted' }, 'Dead letters are an operator\'s: your roles do not include operator or admin.'));
    return;
  }
  const list = await api('GET', '/deliveries?state=failed');
  const path = (d) => `/deliveries/${encodeURIComponent(d.channel)}/${encodeURIComponent(d.msg_id)}`;
  const rows = list.map((d) => h('tr', {},
    h('td', {}, d.channel), h('td', { class: 'mono' }, d.msg_id),
    h('td', { class: 'mono' }, h('a', { href: '#/process/' + encodeURIComponent(d.pid) }, d.pid)),
    h('td', { class: 'opt' }, d.tries), h('td', { class: 'opt' }, when(d.created_at)),
    h('td', {}, h('div', { class: 'row' },
      h('button', { onclick: () => act(() => api('POST', path(d) + '/redeliver'), 'Redelivered').then(route, () => {}) }, 'Redeliver'),
      h('button', { class: 'secondary', onclick: () => act(() => api('DELETE', path(d)), 'Discarded').then(route, () => {}) }, 'Discard')))));
  setMain(h('h1', {}, 'Dead letters'),
    h('p', { class: 'muted' }, 'Messages a durable channel gave up on after its retries.'),
    h('div', { class: 'table-wrap' }, h('table', {},
      h('thead', {}, h('tr', {}, h('th', {}, 'Channel'), h('th', {}, 'Message'), h('th', {}, 'Process'), h('th', { class: 'opt' }, 'Tries'), h('th', { class: 'opt' }, 'Created'), h('th', {}, ''))),
      h('tbody', {}, rows.length ? rows : h('tr', {}, h('td', { colspan: 6, class: 'muted' }, 'No dead letters.'))))));
}
