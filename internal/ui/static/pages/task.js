// One task: its fields, payload and result as JSON text, every run, and
// the actions Run again, Stop and Change (priority, worker ids).
import {api, ApiError} from '../lib/api.js';
import {h, replace, badge, table, timeEl, fmtDuration, pretty, coalesce, field, select,
  showFieldError, clearFieldErrors, TERMINAL} from '../lib/dom.js';

export default async function render(root, [id], {live, signal, navigate, setTitle}) {
  setTitle('Task ' + id.slice(-12));
  const head = h('div', {id: 'task-head'});
  const flash = h('div', {id: 'task-flash'});
  const actions = h('section', {class: 'card', id: 'task-actions', 'data-needs': 'operate'});
  const info = h('div', {id: 'task-info'});
  root.append(head, flash, actions, info);

  let task = null;
  let editDirty = false;

  async function load() {
    task = await api('GET', '/api/tasks/' + id, undefined, {signal});
    if (signal.aborted) return;
    replace(head, h('h1', null, 'Task ', h('span', {class: 'mono', id: 'task-id'}, id), badge(task.status)));
    replace(info, details(task), await links(task));
    if (!editDirty) replace(actions, actionsView(task));
    else updateButtons(task);
  }

  function say(msg, isError) {
    replace(flash, h('div', {class: isError ? 'error-box' : 'flash', role: isError ? 'alert' : 'status'}, msg));
  }

  function updateButtons(t) {
    const stop = actions.querySelector('#stop-button');
    if (stop) stop.disabled = TERMINAL.has(t.status);
  }

  function actionsView(t) {
    const terminal = TERMINAL.has(t.status);
    const stopMsg = h('input', {name: 'message', id: 'stop-message', class: 'wide', placeholder: 'reason (optional)', disabled: terminal});
    const stopForm = h('form', {class: 'inline-form', id: 'stop-form', onsubmit: async (e) => {
      e.preventDefault();
      const btn = stopForm.querySelector('button');
      btn.disabled = true;
      try {
        const body = stopMsg.value.trim() ? {message: stopMsg.value.trim()} : {};
        const r = await api('POST', '/api/tasks/stop/' + id, body);
        say(r.status === 'CANCELED' ? 'Task stopped.' : 'Stop requested: its runs stop at their next heartbeat.');
        await load();
      } catch (err) { say(err.message, true); btn.disabled = TERMINAL.has(task.status); }
    }}, stopMsg, h('button', {type: 'submit', class: 'danger', id: 'stop-button', disabled: terminal}, 'Stop'));

    const again = h('button', {type: 'button', id: 'run-again', onclick: async () => {
      again.disabled = true;
      try {
        const r = await api('POST', '/api/tasks/run_again/' + id, {});
        navigate('/tasks/' + r.task_id);
      } catch (err) { say(err.message, true); again.disabled = false; }
    }}, 'Run again');

    const prio = select('priority', ['high', 'mid', 'low'], t.priority, {id: 'edit-priority', disabled: terminal});
    const wids = h('input', {name: 'worker_ids', id: 'edit-worker-ids', value: (t.worker_ids || []).join(', '),
      placeholder: 'any worker', disabled: terminal});
    const edit = h('form', {class: 'form', id: 'edit-form', onsubmit: async (e) => {
      e.preventDefault();
      clearFieldErrors(edit);
      const ids = wids.value.split(',').map(x => x.trim()).filter(Boolean);
      try {
        await api('PATCH', '/api/tasks/' + id, {priority: prio.value, worker_ids: ids});
        editDirty = false;
        say('Task changed.');
        await load();
      } catch (err) {
        if (!(err instanceof ApiError) || !showFieldError(edit, err.field, err.message)) say(err.message, true);
      }
    }},
    h('div', {class: 'fields'},
      field('Priority', prio),
      field('Worker ids', wids, 'comma-separated; empty allows any worker')),
    h('div', null, h('button', {type: 'submit', id: 'edit-save', disabled: terminal}, 'Save changes')));
    edit.addEventListener('input', () => { editDirty = true; });

    return [
      h('div', {class: 'row'}, again, stopForm),
      terminal ? h('p', {class: 'muted small'}, 'The task is finished: it can no longer be stopped or changed.') :
        h('details', {class: 'edit', open: editDirty}, h('summary', null, 'Change priority or worker ids'), edit),
    ];
  }

  const refresh = coalesce(() => load().catch(showError), 100);
  function showError(err) {
    if (err.name === 'AbortError') return;
    if (err.code === 40400) {
      replace(head, h('h1', null, 'Task not found'));
      replace(info, h('p', {class: 'notice'}, 'No task has the id ', h('span', {class: 'mono'}, id), '.'));
      replace(actions);
      return;
    }
    say(err.message, true);
  }
  const off = await live.follow(() => load().catch(showError), (ev) => {
    if (ev.type === 'reset' || ev.task_id === id) refresh();
  });
  const stream = taskEvents(root, id, live);
  return () => { off(); refresh.cancel(); stream.close(); };
}

// taskEvents lists the task's events, newest first: an event stream of
// this task only (task_id, filtered by the server) that begins with what
// the event log still keeps of it (within its last 50,000 events).
function taskEvents(root, id, live) {
  const list = h('ol', {id: 'task-events', class: 'events', reversed: true});
  const note = h('p', {class: 'muted small', id: 'task-events-note'}, 'Loading…');
  root.append(h('section', {class: 'card'}, h('h2', null, 'Events'), note, list));
  const last = Number(live.lastId || 0);
  const from = last > 50000 ? last - 50000 : 1;
  const es = new EventSource('/api/events?task_id=' + id + '&last_event_id=' + from);
  const seen = new Set();
  es.onopen = () => { note.textContent = 'This task\'s events, newest first; new ones appear live.'; };
  es.addEventListener('reset', () => { note.textContent = 'Older events are no longer kept; new ones appear live.'; });
  es.onmessage = (m) => {
    if (!m.data || seen.has(m.lastEventId)) return;
    seen.add(m.lastEventId);
    const ev = JSON.parse(m.data);
    list.prepend(h('li', {'data-event': ev.name || ev.type},
      timeEl(ev.time), ' ', h('strong', null, ev.name || ev.type),
      ev.attempt ? ` attempt ${ev.attempt}` : '', ev.worker_id ? ` on ${ev.worker_id}` : '',
      ev.message ? h('span', {class: 'muted'}, ' — ' + ev.message) : '',
      ev.result !== undefined && ev.result !== null ? h('code', {class: 'small'}, ' ' + JSON.stringify(ev.result).slice(0, 200)) : ''));
  };
  return es;
}

// links shows the task's dependencies (parents) and dependents (children)
// with their statuses: a dependency chain can be followed both ways.
async function links(t) {
  const parents = t.depends_on || [], children = t.dependents || [];
  if (parents.length === 0 && children.length === 0) return null;
  const get = (ids) => Promise.all(ids.map(id => api('GET', '/api/tasks/' + id).catch(() => ({task_id: id, status: '?'}))));
  const [ps, cs] = await Promise.all([get(parents), get(children.slice(0, 100))]);
  const item = (x) => h('li', {'data-task': x.task_id},
    h('a', {class: 'mono', href: '/tasks/' + x.task_id, title: x.task_id}, x.task_id.slice(-12)), ' ',
    x.kind ? h('span', {class: 'muted small'}, x.kind + ' ') : null, badge(x.status));
  const list = (id, xs, none) => xs.length === 0 ? h('p', {class: 'muted', id}, none) : h('ul', {id, class: 'links'}, xs.map(item));
  return h('section', {class: 'card', id: 'task-deps'}, h('h2', null, 'Dependencies'),
    h('div', {class: 'grid'},
      h('div', null, h('h3', null, `Waits for (${parents.length})`), list('task-parents', ps, 'nothing')),
      h('div', null, h('h3', null, `Waited for by (${children.length})`), list('task-children', cs, 'nothing'),
        children.length > 100 ? h('a', {href: '/tasks?depends_on=' + t.task_id}, 'all of them') : null)));
}

function details(t) {
  const prop = (label, value, id) => [h('dt', null, label), h('dd', {id}, value)];
  const runs = t.runs || [];
  return [
    h('div', {class: 'grid'},
      h('section', {class: 'card'}, h('h2', null, 'Task'),
        h('dl', {class: 'props'},
          prop('Kind', h('a', {href: '/tasks?kind=' + encodeURIComponent(t.kind)}, t.kind), 'task-kind'),
          prop('Status', badge(t.status), 'task-status'),
          prop('Priority', t.priority, 'task-priority'),
          prop('Key', t.key || '—'),
          prop('Attempt', `${t.attempt} of at most ${t.max_retries + 1}`),
          prop('Workers needed', t.workers),
          prop('Allowed workers', (t.worker_ids || []).length ? t.worker_ids.join(', ') : 'any', 'task-worker-ids'),
          prop('Timeout', t.timeout_seconds ? fmtDuration(t.timeout_seconds) : 'none'),
          prop('Heartbeat timeout', fmtDuration(t.heartbeat_timeout_seconds)),
          t.schedule_id ? prop('Schedule', [h('a', {href: '/schedules/' + encodeURIComponent(t.schedule_id), id: 'task-schedule'}, t.schedule_id),
            ' ', h('a', {class: 'small', href: '/tasks?schedule_id=' + encodeURIComponent(t.schedule_id)}, '(its tasks)')]) : null,
          t.fire_time ? prop('Fire time', timeEl(t.fire_time)) : null)),
      h('section', {class: 'card'}, h('h2', null, 'Times'),
        h('dl', {class: 'props'},
          prop('Created', timeEl(t.created_at)),
          prop('Run at', timeEl(t.run_at)),
          prop('Started', timeEl(t.start_time)),
          prop('Ended', timeEl(t.end_time)),
          prop('Took', t.start_time && t.end_time ? fmtDuration(t.end_time - t.start_time) : '—'),
          prop('Worker address', t.worker_address || '—'))),
    ),
    h('section', {class: 'card'}, h('h2', null, 'Message'),
      h('p', {id: 'task-message', class: t.message ? '' : 'muted'}, t.message || 'none')),
    h('div', {class: 'grid'},
      h('section', {class: 'card'}, h('h2', null, 'Payload'), h('pre', {class: 'json', id: 'task-payload'}, pretty(t.task))),
      h('section', {class: 'card'}, h('h2', null, 'Result'),
        t.result === null || t.result === undefined ? h('p', {class: 'muted', id: 'task-result'}, 'none') :
          h('pre', {class: 'json', id: 'task-result'}, pretty(t.result)))),
    h('section', {class: 'card'}, h('h2', null, `Attempts (${runs.length})`),
      runs.length === 0 ? h('p', {class: 'empty'}, 'Not run yet.') :
        table([h('th', {class: 'num'}, '#'), 'Worker', 'Address', 'Status', 'Started', 'Ended', 'Took', 'Message'],
          runs.map(r => h('tr', {'data-run': r.run_id},
            h('td', {class: 'num'}, r.attempt),
            h('td', null, r.worker_id),
            h('td', null, r.worker_address),
            h('td', null, badge(r.status), r.stop_requested && r.status === 'RUNNING' ? h('span', {class: 'muted small'}, ' stopping') : null),
            h('td', null, timeEl(r.start_time)),
            h('td', null, timeEl(r.end_time)),
            h('td', null, r.end_time ? fmtDuration(r.end_time - r.start_time) : r.status === 'RUNNING' ? 'running' : '—'),
            h('td', {class: 'wrap'}, r.message))), {id: 'runs-table'})),
  ];
}
