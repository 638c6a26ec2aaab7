// The dashboard's bulk jobs (operators): every job with its progress, one
// job with what it did to each process, and cancelling it. Loaded after
// app.js, whose helpers (h, api, act, when, route, showError, me, PAGES,
// stopLive) it uses; it adds its pages to PAGES.

'use strict';

// How often a running job's progress is read again (ms).
const BULK_REFRESH = 1000;

/** A job's progress as a bar and its counts. */
function bulkProgress(j) {
  const handled = j.done + j.skipped + j.failed;
  const bar = h('progress', { max: String(Math.max(j.total || 0, handled, 1)), value: String(handled) });
  const of = j.total == null ? `${handled} handled` : `${handled} / ${j.total}`;
  return h('span', { class: 'bulk-progress' }, bar, ' ', of,
    h('span', { class: 'muted' }, ` · done ${j.done} · skipped ${j.skipped} · failed ${j.failed}`));
}

/** Reads `load` again every BULK_REFRESH ms while it says something runs. */
function refreshWhileRunning(load) {
  let timer = null;
  let stopped = false;
  const tick = async () => {
    let running = false;
    try { running = await load(); } catch (_) { /* shown by the next page load */ }
    if (running && !stopped) timer = setTimeout(tick, BULK_REFRESH);
  };
  stopLive = () => { stopped = true; clearTimeout(timer); };
  return tick();
}

async function bulkPage(id) {
  if (!me.operator) {
    setMain(h('h1', {}, 'Bulk jobs'), h('p', { class: 'card muted' }, 'Bulk jobs are an operator\'s: your roles do not include operator or admin.'));
    return;
  }
  if (id) return bulkJobPage(id);
  const body = h('tbody');
  setMain(h('h1', {}, 'Bulk jobs'),
    h('p', { class: 'muted' }, 'One operator action on every process a query matches (acts bulk, POST /api/v1/bulk), newest first.'),
    h('div', { class: 'table-wrap' }, h('table', {},
      h('thead', {}, h('tr', {}, h('th', {}, 'Job'), h('th', {}, 'Action'), h('th', {}, 'State'), h('th', {}, 'Progress'), h('th', { class: 'opt' }, 'Started'), h('th', { class: 'opt' }, 'By'))),
      body)));
  await refreshWhileRunning(async () => {
    const r = await api('GET', '/bulk?limit=50');
    body.replaceChildren(...r.jobs.map((j) => h('tr', {},
      h('td', { class: 'mono' }, h('a', { href: '#/bulk/' + encodeURIComponent(j.id), class: 'bulk-link' }, j.id)),
      h('td', {}, j.request.action),
      h('td', {}, h('span', { class: 'bulk-state' }, j.state)),
      h('td', {}, bulkProgress(j)),
      h('td', { class: 'opt' }, when(j.created_at)),
      h('td', { class: 'opt' }, j.by || ''))));
    if (!r.jobs.length) body.append(h('tr', {}, h('td', { colspan: 6, class: 'muted' }, 'No bulk jobs.')));
    return r.jobs.some((j) => j.state === 'running');
  });
}

async function bulkJobPage(id) {
  const path = '/bulk/' + encodeURIComponent(id);
  const head = h('div', { class: 'card', id: 'bulk-job' });
  const outcome = h('select', { id: 'bulk-outcome' }, ['', 'done', 'skipped', 'failed'].map((o) => h('option', { value: o }, o || 'every outcome')));
  const items = h('tbody');
  const loadItems = async () => {
    const q = new URLSearchParams({ limit: '200' });
    if (outcome.value) q.set('outcome', outcome.value);
    const r = await api('GET', `${path}/items?${q}`);
    items.replaceChildren(...r.items.map((i) => h('tr', {},
      h('td', { class: 'mono' }, h('a', { href: '#/process/' + encodeURIComponent(i.pid) }, i.pid)),
      h('td', {}, i.outcome), h('td', {}, i.reason || ''), h('td', { class: 'opt' }, when(i.at)))));
    if (!r.items.length) items.append(h('tr', {}, h('td', { colspan: 4, class: 'muted' }, 'Nothing yet.')));
  };
  outcome.addEventListener('change', () => loadItems().catch(showError));
  setMain(h('p', {}, h('a', { href: '#/bulk' }, '← Bulk jobs')), h('h1', {}, 'Bulk job ' + id), head,
    h('h2', {}, 'What it did'),
    h('div', { class: 'row' }, h('label', {}, 'Outcome', outcome)),
    h('div', { class: 'table-wrap' }, h('table', {},
      h('thead', {}, h('tr', {}, h('th', {}, 'Process'), h('th', {}, 'Outcome'), h('th', {}, 'Reason'), h('th', { class: 'opt' }, 'At'))),
      items)));
  await refreshWhileRunning(async () => {
    const j = await api('GET', path);
    const running = j.state === 'running';
    head.replaceChildren(
      h('p', {}, h('strong', {}, j.request.action), ' where ', h('code', {}, JSON.stringify(j.request.where, (k, v) => (v === null || v === false ? undefined : v)))),
      h('p', {}, 'State: ', h('span', { id: 'bulk-job-state' }, j.state), j.active ? h('span', { class: 'muted' }, ' (working)') : null),
      h('p', {}, bulkProgress(j)),
      j.error ? h('p', { class: 'error-text' }, j.error) : null,
      running ? h('button', { class: 'danger', id: 'bulk-cancel', onclick: () => act(() => api('POST', path + '/cancel'), 'Cancelled').then(route, () => {}) }, 'Cancel job') : null);
    await loadItems();
    return running;
  });
}

PAGES.bulk = bulkPage;
