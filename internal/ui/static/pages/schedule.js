// One schedule: its settings and state (active, paused, ended or error;
// failures in a row, circuit), next 10 fire times (with their jittered
// instants), run history, and pause, resume, trigger, backfill, edit and
// delete.
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
      const r = await api(method, path + suffix, method === 'DELETE' ? undefined : {});
      say(typeof label === 'function' ? label(r) : label);
      if (then) then(); else await load();
    } catch (err) { say(err.message, true); }
  }
  const triggered = (r) => r && r.status === 'SKIPPED' ? `Trigger skipped (${r.reason}): the run is recorded as SKIPPED.` : 'Run triggered.';

  // The backfill form: one run per fire time of [from, to) without one.
  const fromIn = h('input', {type: 'datetime-local', id: 'backfill-from', step: 1});
  const toIn = h('input', {type: 'datetime-local', id: 'backfill-to', step: 1});
  const forceIn = h('input', {type: 'checkbox', id: 'backfill-force'});
  const backfillOut = h('div', {id: 'backfill-result', 'aria-live': 'polite'});
  const unixOf = (input) => input.value ? Math.floor(new Date(input.value).getTime() / 1000) : undefined;
  async function backfill(e) {
    e.preventDefault();
    try {
      const r = await api('POST', path + '/backfill', {from: unixOf(fromIn), to: unixOf(toIn), force: forceIn.checked});
      const skipped = r.skipped || [];
      const reasons = {};
      for (const k of skipped) reasons[k.reason] = (reasons[k.reason] || 0) + 1;
      replace(backfillOut, h('p', {class: 'flash', role: 'status'},
        `${(r.queued || []).length} fire time(s) queued, ${skipped.length} skipped` +
        (skipped.length ? ' (' + Object.entries(reasons).map(([k, n]) => `${n} ${k}`).join(', ') + ')' : '') + '.'));
      await load();
    } catch (err) {
      replace(backfillOut, h('p', {class: 'error-box', role: 'alert'}, err.message + (err.field ? ` (${err.field})` : '')));
    }
  }
  const backfillForm = h('form', {id: 'backfill-form', class: 'row', 'data-needs': 'operate', onsubmit: backfill},
    h('label', null, 'From ', fromIn), h('label', null, 'to ', toIn),
    h('label', null, forceIn, ' ignore the overlap and concurrency policies'),
    h('button', {type: 'submit', id: 'backfill-submit'}, 'Backfill'));

  async function load() {
    const [s, nextData, runs] = await Promise.all([
      api('GET', path, undefined, {signal}),
      api('GET', path + '/next?n=10', undefined, {signal}).catch(() => ({})),
      api('GET', path + '/runs?limit=50', undefined, {signal}).then(runsOf).catch(() => []),
    ]);
    if (signal.aborted) return;
    kind = s.kind;
    const next = times(nextData);
    const runTimes = (nextData && nextData.run_times) || [];
    const state = s.state || (s.enabled === false ? (s.ended ? 'ended' : 'paused') : 'active');
    setTitle('Schedule ' + (s.name || id));
    const enabled = s.enabled !== false && state !== 'error';
    const btn = (label, idAttr, fn, cls) => h('button', {type: 'button', id: idAttr, class: cls, onclick: fn}, label);
    replace(head,
      h('h1', null, s.name || sid(s), h('span', {id: 'schedule-state'}, badge(state))),
      state === 'error' ? h('div', {class: 'error-box', role: 'alert', id: 'schedule-error'},
        'This schedule cannot go on and fires nothing: ', s.error_message || 'unknown error',
        '. Fix the cause, then resume it.') : null,
      s.end_reason ? h('p', {class: 'muted', id: 'schedule-end-reason'}, s.end_reason) : null,
      h('div', {class: 'row card', id: 'schedule-actions', 'data-needs': 'operate'},
        enabled ? btn('Pause', 'pause-schedule', () => act('Schedule paused.', 'POST', '/pause'))
          : btn('Resume', 'resume-schedule', () => act('Schedule resumed.', 'POST', '/resume')),
        btn('Trigger now', 'trigger-schedule', () => act(triggered, 'POST', '/trigger')),
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
            s.failure_action === 'BACKOFF' ? prop('Backoff', `${fmtDuration(s.backoff_seconds)} doubling, at most ${fmtDuration(s.backoff_max_seconds)}`) : null,
            s.failure_action === 'HALF_OPEN' ? prop('Circuit', h('span', {id: 'schedule-circuit'}, badge(s.circuit || 'closed'),
              ` opens after ${s.failure_threshold} failures, for ${fmtDuration(s.cooldown_seconds)}`)) : null,
            prop('Failures in a row', h('span', {id: 'schedule-failures'}, String(s.consecutive_failures ?? 0),
              s.next_allowed_at ? h('span', {class: 'muted small'}, ' — fires skipped until ', timeEl(s.next_allowed_at)) : null)),
            prop('Concurrency', `${s.concurrency_policy || '—'}, at most ${s.max_concurrency ?? '—'}`),
            prop('Misfires', s.misfire_policy + (s.misfire_policy === 'CATCH_UP_LIMITED' ? ` (${s.catchup_limit})` : '')),
            prop('Timeout', h('span', {id: 'schedule-timeout'}, (s.effective_timeout_seconds ?? s.timeout_seconds)
              ? fmtDuration(s.effective_timeout_seconds ?? s.timeout_seconds) : 'none (the kind\'s default)')),
            s.jitter_seconds ? prop('Jitter', `up to ${fmtDuration(s.jitter_seconds)}`) : null,
            s.target && s.target.url ? prop('HTTP target', `${s.target.method || 'POST'} ${s.target.url}`) : null)),
        h('section', {class: 'card'}, h('h2', null, 'Next fire times'),
          next.length === 0 ? h('p', {class: 'muted'}, enabled ? 'None.' : 'Paused.') :
            h('ol', {class: 'times', id: 'next-fires'}, next.map((t, i) => h('li', null, timeEl(t),
              runTimes[i] && runTimes[i] !== t * 1000 ? h('span', {class: 'small jitter'}, ' runs at ', timeEl(Math.floor(runTimes[i] / 1000)), ' (jitter)') : null,
              h('span', {class: 'muted small'}, ' ', timeEl(t, true))))))),
      s.cron_expr ? h('section', {class: 'card'}, h('h2', null, 'Backfill'),
        h('p', {class: 'muted small'}, 'Create one run for each fire time in [from, to) that has none yet (at most 1000).'),
        backfillForm, backfillOut) : null,
      h('section', {class: 'card'}, h('h2', null, 'Payload'), h('pre', {class: 'json'}, pretty(s.task ?? s.payload))),
      h('section', {class: 'card'}, h('div', {class: 'spread'}, h('h2', null, `Runs (${runs.length})`),
        h('a', {id: 'schedule-tasks', href: '/tasks?schedule_id=' + encodeURIComponent(sid(s))}, 'All its tasks'), strip([...sorted].reverse())),
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
  const off = await live.follow(() => load().catch(showError), (ev) => { if (ev.type === 'reset' || (kind && ev.kind === kind)) refresh(); });
  const timer = setInterval(refresh, 15000);
  return () => { off(); clearInterval(timer); refresh.cancel(); };
}
