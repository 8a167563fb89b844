// Tasks: filter by kind, several statuses at once, priority, worker, key,
// schedule, time ranges (created, run at, finished) and a search over id,
// key and message, with the count of each status for the other filters;
// sort by created, run at or finished; page with the cursor; find a task
// by id. The filters and the sort live in the URL (status=A,B), so that a
// link, back and "Older" keep them. Bulk actions (run again, stop, delete
// finished) on the tasks ticked or on everything matching the filter run
// on the server (POST /api/tasks/bulk) after a confirmation that states
// the count; a progress bar follows the job. The first page and the
// counts follow the event stream.
import {api, query} from '../lib/api.js';
import {h, replace, badge, table, timeEl, shortID, coalesce, select, STATUSES} from '../lib/dom.js';
import {bulkBar} from '../lib/bulk.js';

const LIMIT = 50;
const RANGES = [['created', 'Created'], ['run', 'Run at'], ['finished', 'Finished']];
const FILTERS = ['kind', 'status', 'priority', 'worker_id', 'q', 'key', 'depends_on', 'schedule_id',
  ...RANGES.flatMap(([r]) => [r + '_after', r + '_before'])];

// readFilter reads the filter, the sort and the cursor from the URL.
function readFilter() {
  const q = new URLSearchParams(location.search);
  const statuses = (q.get('status') || '').split(',').map(v => v.trim().toUpperCase()).filter(v => STATUSES.includes(v));
  const f = {};
  for (const k of FILTERS) f[k] = q.get(k) || '';
  f.status = statuses.join(',');
  return {filter: f, statuses, sort: q.get('sort') || '', cursor: q.get('cursor') || ''};
}

// toLocalInput shows an instant of the URL (RFC 3339 or unix ms) in a
// datetime-local input; fromLocalInput is the inverse, in RFC 3339 UTC.
function toLocalInput(v) {
  if (!v) return '';
  const d = new Date(/^\d+$/.test(v) ? Number(v) : v);
  if (isNaN(d)) return '';
  const local = new Date(d.getTime() - d.getTimezoneOffset() * 60000);
  return local.toISOString().slice(0, 16);
}
function fromLocalInput(v) {
  if (!v) return '';
  const d = new Date(v);
  return isNaN(d) ? '' : d.toISOString().replace(/\.000Z$/, 'Z');
}

export default async function render(root, _params, {live, signal, navigate}) {
  const {filter, statuses, sort, cursor} = readFilter();
  const inputs = {};
  const text = (name, id, placeholder, type) => (inputs[name] = h('input', {name, id, type, value: filter[name], placeholder}));
  const kindSelect = inputs.kind = select('kind', [['', 'any kind']], filter.kind, {id: 'filter-kind'});
  const prioSelect = inputs.priority = select('priority', [['', 'any priority'], 'high', 'mid', 'low'], filter.priority, {id: 'filter-priority'});
  text('worker_id', 'filter-worker', 'worker id');
  text('q', 'filter-q', 'id, key or message', 'search');
  text('key', 'filter-key', 'idempotency key');
  text('schedule_id', 'filter-schedule', 'schedule id');
  for (const [r] of RANGES) {
    for (const side of ['after', 'before']) {
      const name = `${r}_${side}`;
      inputs[name] = h('input', {type: 'datetime-local', name, id: 'filter-' + name.replace('_', '-'), value: toLocalInput(filter[name])});
    }
  }
  const counts = {};
  const boxes = STATUSES.map(st => {
    const box = h('input', {type: 'checkbox', name: 'status', value: st, checked: statuses.includes(st)});
    counts[st] = h('span', {class: 'count', 'data-count': st}, '…');
    return h('label', {class: 'chip', 'data-status': st}, box, ' ', st.toLowerCase(), ' ', counts[st]);
  });
  const total = h('span', {class: 'muted small', id: 'filter-total'});
  const statusSet = h('fieldset', {class: 'chips', id: 'filter-status'}, h('legend', null, 'Status ', total), boxes);
  const go = (changes) => navigate('/tasks' + query({...filter, sort, ...changes}));
  const form = h('form', {id: 'task-filter', role: 'search', onsubmit: (e) => {
    e.preventDefault();
    const next = {status: [...statusSet.querySelectorAll('input[name=status]:checked')].map(b => b.value).join(',')};
    for (const [name, el] of Object.entries(inputs)) {
      next[name] = el.type === 'datetime-local' ? fromLocalInput(el.value) : el.value.trim();
    }
    go({...next, depends_on: filter.depends_on});
  }},
  h('div', {class: 'row'},
    h('div', {class: 'field'}, h('label', {for: 'filter-q'}, 'Search'), inputs.q),
    h('div', {class: 'field'}, h('label', {for: 'filter-kind'}, 'Kind'), kindSelect),
    h('div', {class: 'field'}, h('label', {for: 'filter-priority'}, 'Priority'), prioSelect),
    h('div', {class: 'field'}, h('label', {for: 'filter-worker'}, 'Worker'), inputs.worker_id),
    h('div', {class: 'field'}, h('label', {for: 'filter-key'}, 'Key'), inputs.key),
    h('div', {class: 'field'}, h('label', {for: 'filter-schedule'}, 'Schedule'), inputs.schedule_id),
    h('div', {class: 'field'}, h('label', null, '\u00a0'), h('button', {type: 'submit', class: 'primary', id: 'filter-apply'}, 'Filter'))),
  h('details', {class: 'ranges', id: 'filter-ranges', open: RANGES.some(([r]) => filter[r + '_after'] || filter[r + '_before'])},
    h('summary', null, 'Time ranges'),
    h('div', {class: 'row'}, RANGES.map(([r, label]) => h('fieldset', {class: 'range', 'data-range': r},
      h('legend', null, label),
      h('label', {for: inputs[r + '_after'].id}, 'from'), inputs[r + '_after'],
      h('label', {for: inputs[r + '_before'].id}, 'until'), inputs[r + '_before'])))),
  statusSet);
  for (const el of [kindSelect, prioSelect, ...statusSet.querySelectorAll('input')]) el.addEventListener('change', () => form.requestSubmit());

  const list = h('div', {id: 'task-list'}, h('p', {class: 'empty'}, 'Loading…'));
  let matching = 0; // tasks matching the filter (all pages)
  const selected = new Set();
  const bulkFilter = Object.fromEntries(Object.entries(filter).filter(([, v]) => v !== ''));
  const bar = bulkBar({selected, matching: () => matching, filter: bulkFilter, signal,
    done: () => { selected.clear(); refresh(); }});
  root.append(
    h('div', {class: 'spread'}, h('h1', null, 'Tasks'), h('a', {href: '/submit'}, 'Submit a task')),
    filter.depends_on ? h('p', {class: 'notice', id: 'filter-depends-on'}, 'Tasks that depend on ',
      h('a', {class: 'mono', href: '/tasks/' + encodeURIComponent(filter.depends_on)}, filter.depends_on), ' — ',
      h('a', {href: '/tasks' + query({kind: filter.kind, status: filter.status, key: filter.key})}, 'all tasks')) : null,
    h('div', {class: 'card spread'}, form, findForm(navigate)),
    h('section', {class: 'card'}, bar.el, list));

  api('GET', '/api/kinds', undefined, {signal}).then(d => {
    const names = (d.kinds || []).map(k => k.kind);
    if (filter.kind && !names.includes(filter.kind)) names.push(filter.kind);
    for (const n of names) kindSelect.append(h('option', {value: n, selected: n === filter.kind}, n));
  }).catch(() => {});

  // loadCounts shows how many tasks of each status match the other filters.
  async function loadCounts() {
    const {status: _s, ...rest} = filter;
    const data = await api('GET', '/api/tasks/counts' + query(rest), undefined, {signal});
    if (signal.aborted) return;
    for (const st of STATUSES) counts[st].textContent = String(data.counts[st] || 0);
    total.textContent = `(${data.total} matching the other filters)`;
    matching = statuses.length ? statuses.reduce((n, st) => n + (data.counts[st] || 0), 0) : data.total;
    bar.update();
  }

  let shown = new Set();
  async function load() {
    const [data] = await Promise.all([api('GET', '/api/tasks' + query({...filter, sort, cursor, limit: LIMIT}), undefined, {signal}), loadCounts()]);
    if (signal.aborted) return;
    const tasks = data.tasks || [];
    shown = new Set(tasks.map(t => t.task_id));
    replace(list,
      tasks.length === 0 ? h('p', {class: 'empty'}, cursor ? 'No more tasks.' : 'No task matches.') :
        taskTable(tasks, {sort, selected, go, changed: () => bar.update()}),
      h('div', {class: 'row'},
        cursor ? h('a', {href: '/tasks' + query({...filter, sort}), id: 'first-page'}, '« First page') : null,
        data.next_cursor ? h('a', {href: '/tasks' + query({...filter, sort, cursor: data.next_cursor}), id: 'next-page'}, 'More »') : null));
    bar.update();
  }

  const refresh = coalesce(() => load().catch(showError), 150);
  const countsRefresh = coalesce(() => loadCounts().catch(showError), 150);
  function showError(err) {
    if (err.name === 'AbortError') return;
    replace(list, h('div', {class: 'error-box', role: 'alert'}, err.message));
  }
  const off = await live.follow(() => load().catch(showError), (ev) => {
    if (ev.type === 'reset') return refresh();
    if (ev.type !== 'task' || (filter.kind && ev.kind !== filter.kind)) return;
    // A task's status change moves the counts even on later pages.
    if (cursor && !shown.has(ev.task_id)) return countsRefresh();
    // The first page shows new tasks; later pages only change in place.
    if (!cursor || shown.has(ev.task_id)) refresh();
  });
  return () => { off(); refresh.cancel(); countsRefresh.cancel(); bar.stop(); };
}

// taskTable lists tasks with a checkbox each and sortable time columns.
function taskTable(tasks, {sort, selected, go, changed}) {
  const sortHead = (field, label) => {
    const cur = sort === field ? 'ascending' : sort === '-' + field ? 'descending' : 'none';
    const next = cur === 'ascending' ? '-' + field : field;
    return h('th', {'aria-sort': cur},
      h('button', {type: 'button', class: 'link sort', 'data-sort': field, onclick: () => go({sort: next, cursor: ''})},
        label, cur === 'ascending' ? ' ▲' : cur === 'descending' ? ' ▼' : ''));
  };
  const rowBoxes = [];
  const all = h('input', {type: 'checkbox', id: 'select-page', 'aria-label': 'Select the tasks of this page',
    checked: tasks.every(t => selected.has(t.task_id)), onchange: () => {
      for (const b of rowBoxes) { b.checked = all.checked; toggle(b); }
      changed();
    }});
  const toggle = (b) => { if (b.checked) selected.add(b.value); else selected.delete(b.value); };
  return table([h('th', {'data-needs': 'operate'}, all), 'Task', 'Kind', 'Priority', 'Status', h('th', {class: 'num'}, 'Attempt'),
    sortHead('created', 'Created'), sortHead('run_at', 'Run at'), sortHead('finished', 'Ended'), 'Message'],
  tasks.map(t => {
    const box = h('input', {type: 'checkbox', name: 'task', value: t.task_id, checked: selected.has(t.task_id),
      'aria-label': 'Select task ' + t.task_id, onchange: () => { toggle(box); changed(); }});
    rowBoxes.push(box);
    return h('tr', {'data-task': t.task_id},
      h('td', {'data-needs': 'operate'}, box),
      h('td', {class: 'mono'}, h('a', {href: '/tasks/' + t.task_id, title: t.task_id}, shortID(t.task_id))),
      h('td', null, t.kind),
      h('td', null, t.priority),
      h('td', null, badge(t.status)),
      h('td', {class: 'num'}, `${t.attempt}/${t.max_retries + 1}`),
      h('td', null, timeEl(t.created_at)),
      h('td', null, timeEl(t.run_at)),
      h('td', null, timeEl(t.end_time)),
      h('td', {class: 'wrap'}, t.message));
  }), {id: 'tasks-table'});
}

// findForm opens a task by its id.
function findForm(navigate) {
  const idInput = h('input', {name: 'id', id: 'find-id', placeholder: '32 hex characters', autocomplete: 'off', spellcheck: 'false'});
  const idError = h('p', {class: 'field-error', hidden: true, role: 'alert'});
  return h('form', {class: 'row', id: 'task-find', onsubmit: (e) => {
    e.preventDefault();
    const id = idInput.value.trim().toLowerCase();
    if (!/^[0-9a-f]{32}$/.test(id)) {
      idInput.setAttribute('aria-invalid', 'true');
      idError.textContent = 'A task id is 32 characters 0-9 a-f.';
      idError.hidden = false;
      return;
    }
    navigate('/tasks/' + id);
  }},
  h('div', {class: 'field'}, h('label', {for: 'find-id'}, 'Find a task by id'), idInput, idError),
  h('div', {class: 'field'}, h('label', null, '\u00a0'), h('button', {type: 'submit'}, 'Open')));
}
