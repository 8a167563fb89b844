// Tasks: filter by kind, several statuses at once, priority, worker, key
// and a search over id, key and message, with the count of each status for
// the other filters; page with the cursor; find a task by id. The filters
// live in the URL (status=A,B), so that a link, back and "Older" keep them.
// The first page and the counts follow the event stream.
import {api, query} from '../lib/api.js';
import {h, replace, badge, table, timeEl, shortID, coalesce, select, STATUSES} from '../lib/dom.js';

const LIMIT = 50;

export default async function render(root, _params, {live, signal, navigate}) {
  const q = new URLSearchParams(location.search);
  const statuses = (q.get('status') || '').split(',').map(v => v.trim().toUpperCase()).filter(v => STATUSES.includes(v));
  const filter = {kind: q.get('kind') || '', status: statuses.join(','), priority: q.get('priority') || '',
    worker_id: q.get('worker_id') || '', q: q.get('q') || '', key: q.get('key') || '',
    depends_on: q.get('depends_on') || '', cursor: q.get('cursor') || ''};

  const kindSelect = select('kind', [['', 'any kind']], filter.kind, {id: 'filter-kind'});
  const prioSelect = select('priority', [['', 'any priority'], 'high', 'mid', 'low'], filter.priority, {id: 'filter-priority'});
  const workerInput = h('input', {name: 'worker_id', id: 'filter-worker', value: filter.worker_id, placeholder: 'worker id'});
  const searchInput = h('input', {type: 'search', name: 'q', id: 'filter-q', value: filter.q, placeholder: 'id, key or message'});
  const keyInput = h('input', {name: 'key', id: 'filter-key', value: filter.key, placeholder: 'idempotency key'});
  const counts = {};
  const boxes = STATUSES.map(st => {
    const box = h('input', {type: 'checkbox', name: 'status', value: st, checked: statuses.includes(st)});
    counts[st] = h('span', {class: 'count', 'data-count': st}, '…');
    return h('label', {class: 'chip', 'data-status': st}, box, ' ', st.toLowerCase(), ' ', counts[st]);
  });
  const total = h('span', {class: 'muted small', id: 'filter-total'});
  const statusSet = h('fieldset', {class: 'chips', id: 'filter-status'}, h('legend', null, 'Status ', total), boxes);
  const form = h('form', {id: 'task-filter', role: 'search', onsubmit: (e) => {
    e.preventDefault();
    const picked = [...statusSet.querySelectorAll('input[name=status]:checked')].map(b => b.value);
    navigate('/tasks' + query({kind: kindSelect.value, status: picked.join(','), priority: prioSelect.value,
      worker_id: workerInput.value.trim(), q: searchInput.value.trim(), key: keyInput.value.trim(), depends_on: filter.depends_on}));
  }},
  h('div', {class: 'row'},
    h('div', {class: 'field'}, h('label', {for: 'filter-q'}, 'Search'), searchInput),
    h('div', {class: 'field'}, h('label', {for: 'filter-kind'}, 'Kind'), kindSelect),
    h('div', {class: 'field'}, h('label', {for: 'filter-priority'}, 'Priority'), prioSelect),
    h('div', {class: 'field'}, h('label', {for: 'filter-worker'}, 'Worker'), workerInput),
    h('div', {class: 'field'}, h('label', {for: 'filter-key'}, 'Key'), keyInput),
    h('div', {class: 'field'}, h('label', null, '\u00a0'), h('button', {type: 'submit', class: 'primary'}, 'Filter'))),
  statusSet);
  for (const el of [kindSelect, prioSelect, ...statusSet.querySelectorAll('input')]) el.addEventListener('change', () => form.requestSubmit());

  const idInput = h('input', {name: 'id', id: 'find-id', placeholder: '32 hex characters', autocomplete: 'off', spellcheck: 'false'});
  const idError = h('p', {class: 'field-error', hidden: true, role: 'alert'});
  const find = h('form', {class: 'row', id: 'task-find', onsubmit: (e) => {
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

  const list = h('div', {id: 'task-list'}, h('p', {class: 'empty'}, 'Loading…'));
  root.append(
    h('div', {class: 'spread'}, h('h1', null, 'Tasks'), h('a', {href: '/submit'}, 'Submit a task')),
    filter.depends_on ? h('p', {class: 'notice', id: 'filter-depends-on'}, 'Tasks that depend on ',
      h('a', {class: 'mono', href: '/tasks/' + encodeURIComponent(filter.depends_on)}, filter.depends_on), ' — ',
      h('a', {href: '/tasks' + query({kind: filter.kind, status: filter.status, key: filter.key})}, 'all tasks')) : null,
    h('div', {class: 'card spread'}, form, find),
    h('section', {class: 'card'}, list));

  api('GET', '/api/kinds', undefined, {signal}).then(d => {
    const names = (d.kinds || []).map(k => k.kind);
    if (filter.kind && !names.includes(filter.kind)) names.push(filter.kind);
    for (const n of names) kindSelect.append(h('option', {value: n, selected: n === filter.kind}, n));
  }).catch(() => {});

  // loadCounts shows how many tasks of each status match the other filters.
  async function loadCounts() {
    const {cursor: _c, status: _s, ...rest} = filter;
    const data = await api('GET', '/api/tasks/counts' + query(rest), undefined, {signal});
    if (signal.aborted) return;
    for (const st of STATUSES) counts[st].textContent = String(data.counts[st] || 0);
    total.textContent = `(${data.total} matching the other filters)`;
  }

  let shown = new Set();
  async function load() {
    const [data] = await Promise.all([api('GET', '/api/tasks' + query({...filter, limit: LIMIT}), undefined, {signal}), loadCounts()]);
    if (signal.aborted) return;
    const tasks = data.tasks || [];
    shown = new Set(tasks.map(t => t.task_id));
    const {cursor: _c, ...base} = filter;
    replace(list,
      tasks.length === 0 ? h('p', {class: 'empty'}, filter.cursor ? 'No more tasks.' : 'No task matches.') :
        table(['Task', 'Kind', 'Priority', 'Status', h('th', {class: 'num'}, 'Attempt'), 'Created', 'Ended', 'Message'],
          tasks.map(t => h('tr', {'data-task': t.task_id},
            h('td', {class: 'mono'}, h('a', {href: '/tasks/' + t.task_id, title: t.task_id}, shortID(t.task_id))),
            h('td', null, t.kind),
            h('td', null, t.priority),
            h('td', null, badge(t.status)),
            h('td', {class: 'num'}, `${t.attempt}/${t.max_retries + 1}`),
            h('td', null, timeEl(t.created_at)),
            h('td', null, timeEl(t.end_time)),
            h('td', {class: 'wrap'}, t.message))), {id: 'tasks-table'}),
      h('div', {class: 'row'},
        filter.cursor ? h('a', {href: '/tasks' + query(base), id: 'first-page'}, '« Newest') : null,
        data.next_cursor ? h('a', {href: '/tasks' + query({...base, cursor: data.next_cursor}), id: 'next-page'}, 'Older »') : null));
  }

  const refresh = coalesce(() => load().catch(showError), 150);
  const countsRefresh = coalesce(() => loadCounts().catch(showError), 150);
  function showError(err) {
    if (err.name === 'AbortError') return;
    replace(list, h('div', {class: 'error-box', role: 'alert'}, err.message));
  }
  await load().catch(showError);
  const off = live.on((ev) => {
    if (ev.type === 'reset') return refresh();
    if (ev.type !== 'task' || (filter.kind && ev.kind !== filter.kind)) return;
    // A task's status change moves the counts even on later pages.
    if (filter.cursor && !shown.has(ev.task_id)) return countsRefresh();
    // The first page shows new tasks; later pages only change in place.
    if (!filter.cursor || shown.has(ev.task_id)) refresh();
  });
  return () => { off(); refresh.cancel(); countsRefresh.cancel(); };
}
