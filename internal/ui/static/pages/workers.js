// Workers: kinds, address, the runs each holds now (task, kind, since),
// last seen, status (a worker that drained and exited is "stopped"), and
// Stop (drain). Reloads on run and worker events and every 10 s.
import {api} from '../lib/api.js';
import {h, replace, badge, table, timeEl, coalesce, shortID} from '../lib/dom.js';

// runList shows the runs a worker holds: task link, kind and since when.
function runList(w) {
  const runs = w.runs || [];
  if (runs.length === 0) return h('span', {class: 'muted'}, '—');
  return h('ul', {class: 'worker-runs'}, runs.map(r => h('li', {'data-run': r.run_id},
    h('a', {class: 'mono', href: '/tasks/' + r.task_id, title: r.task_id}, shortID(r.task_id)), ' ',
    h('span', {class: 'kind'}, r.kind), ' ',
    h('span', {class: 'muted small'}, 'since ', timeEl(r.started_at, true)))));
}

export default async function render(root, _params, {live, signal}) {
  const flash = h('div');
  const list = h('section', {class: 'card', id: 'worker-list'}, h('p', {class: 'empty'}, 'Loading…'));
  root.append(h('h1', null, 'Workers'), flash, list);

  async function stop(id, btn) {
    btn.disabled = true;
    try {
      await api('POST', '/api/workers/' + encodeURIComponent(id) + '/stop', {});
      replace(flash, h('div', {class: 'flash', role: 'status'}, `Worker ${id} asked to stop: it finishes its runs and claims no more.`));
      await load();
    } catch (err) {
      btn.disabled = false;
      replace(flash, h('div', {class: 'error-box', role: 'alert'}, err.message));
    }
  }

  async function load() {
    const data = await api('GET', '/api/workers?limit=1000', undefined, {signal});
    if (signal.aborted) return;
    const ws = data.workers || [];
    replace(list, ws.length === 0 ? h('p', {class: 'empty'}, 'No worker has connected yet.') :
      table(['Worker', 'Status', 'Kinds', 'Address', h('th', {class: 'num'}, 'Running'), 'Current runs', 'Last seen', 'First seen', ''],
        ws.map(w => {
          const btn = h('button', {type: 'button', class: 'small danger', 'data-stop': w.worker_id, 'data-needs': 'operate',
            disabled: w.stop_requested || w.status === 'stopped'}, w.stop_requested ? 'Stopping' : 'Stop');
          btn.addEventListener('click', () => stop(w.worker_id, btn));
          return h('tr', {'data-worker': w.worker_id},
            h('td', {class: 'mono'}, w.worker_id),
            h('td', null, badge(w.status), w.stop_requested && w.status !== 'stopped' ? h('span', {class: 'muted small'}, ' draining') : null),
            h('td', {class: 'wrap'}, (w.kinds || []).join(', ')),
            h('td', null, w.address),
            h('td', {class: 'num'}, w.running),
            h('td', {class: 'runs'}, runList(w)),
            h('td', null, timeEl(w.last_seen, true)),
            h('td', null, timeEl(w.first_seen)),
            h('td', null, btn));
        }), {id: 'workers-table'}));
  }

  const refresh = coalesce(() => load().catch(showError), 200);
  function showError(err) {
    if (err.name === 'AbortError') return;
    replace(list, h('div', {class: 'error-box', role: 'alert'}, err.message));
  }
  const off = await live.follow(() => load().catch(showError), (ev) => { if (ev.type !== 'task') refresh(); });
  const timer = setInterval(refresh, 10000);
  return () => { off(); clearInterval(timer); refresh.cancel(); };
}
