// One schedule: its settings, next 10 fire times, run history, and pause,
// resume, trigger, edit and delete.
import {api} from '../lib/api.js';
import {h, replace, badge, table, timeEl, pretty, coalesce, fmtDuration} from '../lib/dom.js';
import {sid, times, runsOf, describe} from '../lib/sched.js';
import {strip} from './schedules.js';

export default async function render(root, [id], {live, signal, navigate, setTitle}) {
  const head = h('div');
  const flash = h('div', {id: 'schedule-flash'});
  const body = h('div', {id: 'schedule-body'}, h('p', {class: 'empty'}, 'Loading…'));
  root.append(head, flash, body);
  const path = '/api/schedules/' + encodeURIComponent(id);
  let kind = '';

  function say(msg, isError) {
    replace(flash, h('div', {class: isError ? 'error-box' : 'flash', role: isError ? 'alert' : 'status'}, msg));
  }
  async function act(label, method, suffix, then) {
    try {
      await api(method, path + suffix, method === 'DELETE' ? undefined : {});
      say(label);
      if (then) then(); else await load();
    } catch (err) { say(err.message, true); }
  }

  async function load() {
    const [s, next, runs] = await Promise.all([
      api('GET', path, undefined, {signal}),
      api('GET', path + '/next?n=10', undefined, {signal}).then(times).catch(() => []),
      api('GET', path + '/runs?limit=50', undefined, {signal}).then(runsOf).catch(() => []),
    ]);
    if (signal.aborted) return;
    kind = s.kind;
    setTitle('Schedule ' + (s.name || id));
    const enabled = s.enabled !== false;
    const btn = (label, idAttr, fn, cls) => h('button', {type: 'button', id: idAttr, class: cls, onclick: fn}, label);
    replace(head,
      h('h1', null, s.name || sid(s), enabled ? badge('active') : badge(s.ended ? 'ended' : 'paused')),
      h('div', {class: 'row card', id: 'schedule-actions', 'data-needs': 'operate'},
        enabled ? btn('Pause', 'pause-schedule', () => act('Schedule paused.', 'POST', '/pause'))
          : btn('Resume', 'resume-schedule', () => act('Schedule resumed.', 'POST', '/resume')),
        btn('Trigger now', 'trigger-schedule', () => act('Run triggered.', 'POST', '/trigger')),
        h('a', {href: `/schedules/${encodeURIComponent(id)}/edit`, id: 'edit-schedule'}, 'Edit'),
        btn('Delete', 'delete-schedule', () => act('Schedule deleted.', 'DELETE', '', () => navigate('/schedules')), 'danger')));
    const prop = (label, value) => [h('dt', null, label), h('dd', null, value)];
    const sorted = runs.length > 1 && (runs[0].fire_time || 0) < (runs[runs.length - 1].fire_time || 0) ? [...runs].reverse() : runs;
    replace(body,
      h('div', {class: 'grid'},
        h('section', {class: 'card'}, h('h2', null, 'Settings'),
          h('dl', {class: 'props'},
            prop('Kind', h('a', {href: '/tasks?kind=' + encodeURIComponent(s.kind)}, s.kind)),
            prop('When', h('span', {class: 'mono'}, describe(s))),
            prop('Priority', s.priority || 'mid'),
            prop('Overlap', s.overlap_action || '—'),
            prop('On failure', s.failure_action || '—'),
            prop('Concurrency', `${s.concurrency_policy || '—'}, at most ${s.max_concurrency ?? '—'}`),
            prop('Misfires', s.misfire_policy + (s.misfire_policy === 'CATCH_UP_LIMITED' ? ` (${s.catchup_limit})` : '')),
            prop('Timeout', s.timeout_seconds ? fmtDuration(s.timeout_seconds) : '—'),
            s.target && s.target.url ? prop('HTTP target', `${s.target.method || 'POST'} ${s.target.url}`) : null)),
        h('section', {class: 'card'}, h('h2', null, 'Next fire times'),
          next.length === 0 ? h('p', {class: 'muted'}, enabled ? 'None.' : 'Paused.') :
            h('ol', {class: 'times', id: 'next-fires'}, next.map(t => h('li', null, timeEl(t), h('span', {class: 'muted small'}, ' ', timeEl(t, true))))))),
      h('section', {class: 'card'}, h('h2', null, 'Payload'), h('pre', {class: 'json'}, pretty(s.task ?? s.payload))),
      h('section', {class: 'card'}, h('div', {class: 'spread'}, h('h2', null, `Runs (${runs.length})`), strip([...sorted].reverse())),
        sorted.length === 0 ? h('p', {class: 'empty'}, 'No run yet.') :
          table(['Fire time', 'Task', 'Status', h('th', {class: 'num'}, 'Attempt'), 'Started', 'Ended', 'Message'],
            sorted.map(r => h('tr', null,
              h('td', null, timeEl(r.fire_time), r.triggered ? h('span', {class: 'muted small'}, ' triggered') : null),
              h('td', {class: 'mono'}, r.task_id ? h('a', {href: '/tasks/' + r.task_id}, r.task_id.slice(-12)) : '—'),
              h('td', null, badge(r.status), r.reason ? h('span', {class: 'muted small'}, ' ' + r.reason) : null),
              h('td', {class: 'num'}, r.attempt ?? ''),
              h('td', null, timeEl(r.start_time)),
              h('td', null, timeEl(r.end_time)),
              h('td', {class: 'wrap'}, r.message || ''))), {id: 'schedule-runs'})));
  }

  const refresh = coalesce(() => load().catch(showError), 500);
  function showError(err) {
    if (err.name === 'AbortError') return;
    if (err.code === 40400) { replace(head, h('h1', null, 'Schedule not found')); replace(body); return; }
    say(err.message, true);
  }
  await load().catch(showError);
  const off = live.on((ev) => { if (ev.type === 'reset' || (kind && ev.kind === kind)) refresh(); });
  const timer = setInterval(refresh, 15000);
  return () => { off(); clearInterval(timer); refresh.cancel(); };
}
