// Create or edit a schedule. The next fire times are previewed as the
// expression or plan is typed (POST /api/schedules/preview, debounced);
// the API's errors show next to the field they name.
import {api, ApiError} from '../lib/api.js';
import {h, replace, field, select, showFieldError, clearFieldErrors, debounce, timeEl, toDate} from '../lib/dom.js';
import {sid, times, PLAN_TYPES} from '../lib/sched.js';

export default async function render(root, params, {signal, navigate, setTitle}) {
  const id = params[0] || '';
  let s = null;
  if (id) {
    s = await api('GET', '/api/schedules/' + encodeURIComponent(id), undefined, {signal});
    setTitle('Edit ' + (s.name || id));
  }
  const v = (k, d) => (s && s[k] !== undefined && s[k] !== null ? s[k] : d);
  const plan = (s && s.plan) || {};
  const zone = Intl.DateTimeFormat().resolvedOptions().timeZone || 'UTC';

  const name = h('input', {name: 'name', id: 'sched-name', required: true, value: v('name', '')});
  const kind = h('input', {name: 'kind', id: 'sched-kind', required: true, value: v('kind', ''), list: 'sched-kinds', autocomplete: 'off'});
  const priority = select('priority', ['high', 'mid', 'low'], v('priority', 'mid'), {id: 'sched-priority'});
  const payload = h('textarea', {name: 'task', id: 'sched-payload', rows: 5, spellcheck: 'false'}, JSON.stringify(v('task', {}), null, 2));
  const mode = select('mode', [['cron', 'Cron expression'], ['plan', 'Calendar plan']], s && s.plan ? 'plan' : 'cron', {id: 'sched-mode'});
  const cron = h('input', {name: 'cron_expr', id: 'sched-cron', value: v('cron_expr', ''), placeholder: '*/5 * * * * *', autocomplete: 'off', spellcheck: 'false', class: 'mono'});
  const tz = h('input', {name: 'timezone', id: 'sched-timezone', value: v('timezone', id ? '' : zone), list: 'sched-zones', placeholder: 'UTC', autocomplete: 'off'});
  const zones = h('datalist', {id: 'sched-zones'});
  try { for (const z of Intl.supportedValuesOf('timeZone')) zones.append(h('option', {value: z})); } catch { /* old browser */ }
  const planType = select('plan.plan_type', PLAN_TYPES, plan.plan_type || 'minute', {id: 'sched-plan-type'});
  const planValue = h('input', {name: 'plan.plan_value', id: 'sched-plan-value', type: 'number', step: 1, value: plan.plan_value ?? 1});
  const planRepeat = h('input', {name: 'plan.plan_repet', id: 'sched-plan-repeat', type: 'number', step: 1, min: -1, value: plan.plan_repet ?? -1});
  const planTime = h('input', {name: 'plan.plan_time', id: 'sched-plan-time', type: 'datetime-local', step: 1, value: localInput(plan.plan_time)});
  const noKeep = h('input', {name: 'plan.no_keep', id: 'sched-no-keep', type: 'checkbox', checked: !!plan.no_keep});
  const overlap = select('overlap_action', ['ALLOW', 'SKIP', 'CANCEL_PREV', 'PARALLEL'], v('overlap_action', 'ALLOW'), {id: 'sched-overlap'});
  const failure = select('failure_action', ['RUN_NEW', 'SKIP', 'RETRY', 'BACKOFF', 'HALF_OPEN'], v('failure_action', 'RUN_NEW'), {id: 'sched-failure'});
  const backoff = h('input', {name: 'backoff_seconds', id: 'sched-backoff', type: 'number', min: 0, step: 1, value: v('backoff_seconds', 60)});
  const backoffMax = h('input', {name: 'backoff_max_seconds', id: 'sched-backoff-max', type: 'number', min: 0, step: 1, value: v('backoff_max_seconds', 3600)});
  const threshold = h('input', {name: 'failure_threshold', id: 'sched-threshold', type: 'number', min: 0, step: 1, value: v('failure_threshold', 3)});
  const cooldown = h('input', {name: 'cooldown_seconds', id: 'sched-cooldown', type: 'number', min: 0, step: 1, value: v('cooldown_seconds', 300)});
  const jitter = h('input', {name: 'jitter_seconds', id: 'sched-jitter', type: 'number', min: 0, step: 1, value: v('jitter_seconds', 0)});
  const concurrency = select('concurrency_policy', ['SKIP', 'QUEUE'], v('concurrency_policy', 'SKIP'), {id: 'sched-concurrency'});
  const maxConc = h('input', {name: 'max_concurrency', id: 'sched-max-concurrency', type: 'number', min: 1, step: 1, value: v('max_concurrency', 1)});
  const misfire = select('misfire_policy', ['SKIP', 'FIRE_NOW', 'CATCH_UP_LIMITED'], v('misfire_policy', 'SKIP'), {id: 'sched-misfire'});
  const catchup = h('input', {name: 'catchup_limit', id: 'sched-catchup', type: 'number', min: 0, step: 1, value: v('catchup_limit', 0)});
  // Empty: the kind's default (none), as for any task.
  const timeout = h('input', {name: 'timeout_seconds', id: 'sched-timeout', type: 'number', min: 1, step: 1,
    value: s && s.timeout_seconds > 0 ? s.timeout_seconds : '', placeholder: 'none'});
  const enabled = h('input', {name: 'enabled', id: 'sched-enabled', type: 'checkbox', checked: v('enabled', true)});

  const cronBox = h('fieldset', {id: 'cron-fields'}, h('legend', null, 'Cron'),
    h('div', {class: 'fields'},
      field('Expression', cron, '5 to 7 fields (seconds first when 6+), a macro such as @hourly, or @every 90s'),
      field('Time zone', tz)));
  const planBox = h('fieldset', {id: 'plan-fields'}, h('legend', null, 'Calendar plan'),
    h('div', {class: 'fields'},
      field('Type', planType),
      field('Value', planValue, 'interval count; weekday 0–6 (Sunday 0); day of month 1–31, 0 last, −n from the last'),
      field('Repeat', planRepeat, '−1 forever, 0 once, n times'),
      field('Start / time of day', planTime, 'empty: from now'),
      h('div', {class: 'field', 'data-field': 'plan.no_keep'}, h('label', null, noKeep, ' Count each interval from the end of the previous run (no_keep)'),
        h('p', {class: 'field-error', hidden: true}))));
  const showMode = () => { cronBox.hidden = mode.value !== 'cron'; planBox.hidden = mode.value !== 'plan'; };

  const previewList = h('div', {id: 'preview', 'aria-live': 'polite'}, h('p', {class: 'muted'}, 'Type an expression to see its next fire times.'));
  const status = h('div', {id: 'sched-status'});
  const saveBtn = h('button', {type: 'submit', class: 'primary', id: 'sched-save', 'data-needs': 'operate'}, id ? 'Save' : 'Create');

  function timetable() {
    if (mode.value === 'cron') return {cron_expr: cron.value.trim(), timezone: tz.value.trim(), jitter_seconds: Number(jitter.value || 0), name: name.value.trim() || undefined};
    const t = planTime.value ? Math.floor(new Date(planTime.value).getTime() / 1000) : 0;
    return {timezone: tz.value.trim(), plan: {plan_type: planType.value, plan_value: Number(planValue.value || 0),
      plan_repet: Number(planRepeat.value || 0), plan_time: t, no_keep: noKeep.checked}};
  }

  let previewSeq = 0;
  async function preview() {
    const my = ++previewSeq;
    const body = timetable();
    if (mode.value === 'cron' && !body.cron_expr) {
      clearFieldErrors(form);
      replace(previewList, h('p', {class: 'muted'}, 'Type an expression to see its next fire times.'));
      return;
    }
    try {
      const data = await api('POST', '/api/schedules/preview', {...body, n: 10}, {signal});
      if (my !== previewSeq) return;
      clearFieldErrors(form);
      const ts = times(data);
      const runAt = (data && data.run_times) || [];
      replace(previewList, ts.length === 0 ? h('p', {class: 'muted'}, 'It never fires.') :
        h('ol', {class: 'times', id: 'preview-times'}, ts.map((t, i) => h('li', null, timeEl(t),
          runAt[i] && runAt[i] !== t * 1000 ? h('span', {class: 'small jitter'}, ' runs at ', timeEl(Math.floor(runAt[i] / 1000)), ' (jitter)') : null,
          h('span', {class: 'muted small'}, ' ', timeEl(t, true))))));
    } catch (err) {
      if (err.name === 'AbortError' || my !== previewSeq) return;
      const shown = err instanceof ApiError && showFieldError(form, err.field, err.message);
      replace(previewList, h('p', {class: 'field-error', id: 'preview-error', role: 'alert'}, shown ? 'Fix the expression to see its fire times.' : err.message));
    }
  }
  const previewSoon = debounce(preview, 300);

  const form = h('form', {class: 'form', id: 'schedule-form', novalidate: true, onsubmit: async (e) => {
    e.preventDefault();
    clearFieldErrors(form);
    replace(status);
    let task;
    try { task = JSON.parse(payload.value); } catch (err) {
      showFieldError(form, 'task', 'Not valid JSON: ' + err.message);
      return;
    }
    const body = {name: name.value.trim(), kind: kind.value.trim(), priority: priority.value, task, ...timetable(),
      enabled: enabled.checked, overlap_action: overlap.value, failure_action: failure.value, concurrency_policy: concurrency.value,
      max_concurrency: Number(maxConc.value || 1), misfire_policy: misfire.value, catchup_limit: Number(catchup.value || 0),
      backoff_seconds: Number(backoff.value || 0), backoff_max_seconds: Number(backoffMax.value || 0),
      failure_threshold: Number(threshold.value || 0), cooldown_seconds: Number(cooldown.value || 0)};
    if (timeout.value !== '') body.timeout_seconds = Number(timeout.value);
    if (id && mode.value === 'plan') body.cron_expr = '';
    if (id && mode.value === 'cron') body.plan = null;
    saveBtn.disabled = true;
    try {
      const r = await api(id ? 'PATCH' : 'POST', id ? '/api/schedules/' + encodeURIComponent(id) : '/api/schedules', body);
      navigate('/schedules/' + encodeURIComponent(sid(r) || id));
    } catch (err) {
      saveBtn.disabled = false;
      if (!(err instanceof ApiError) || !showFieldError(form, err.field, err.message)) {
        replace(status, h('div', {class: 'error-box', role: 'alert'}, err.message));
      }
    }
  }},
  h('div', {class: 'card form'},
    h('div', {class: 'fields'}, field('Name', name), field('Kind', kind), field('Priority', priority), field('Timetable', mode)),
    cronBox, planBox),
  h('div', {class: 'grid'},
    h('section', {class: 'card'}, h('h2', null, 'Next fire times'), previewList),
    h('section', {class: 'card form'}, h('h2', null, 'Policies'),
      h('div', {class: 'fields'},
        field('When the previous run is still running', overlap),
        field('When the previous run failed', failure),
        field('Over the concurrency limit', concurrency),
        field('Max concurrency', maxConc),
        field('Missed fire times', misfire),
        field('Catch-up limit', catchup),
        field('Backoff (s), doubling', backoff, 'BACKOFF: first wait after a failure'),
        field('Backoff cap (s)', backoffMax),
        field('Failures that open the circuit', threshold, 'HALF_OPEN'),
        field('Circuit cool-down (s)', cooldown, 'HALF_OPEN'),
        field('Jitter (s)', jitter, 'delays each run by a fixed pseudo-random offset below this'),
        field('Timeout per run (s)', timeout, 'empty: the kind\'s default (none), as for any task')),
      h('label', null, enabled, ' Enabled'))),
  h('section', {class: 'card'}, field('Payload (JSON)', payload)),
  status, h('div', null, saveBtn), zones, h('datalist', {id: 'sched-kinds'}));

  for (const el of [cron, tz, planType, planValue, planRepeat, planTime, noKeep, jitter, name]) {
    el.addEventListener('input', previewSoon);
    el.addEventListener('change', previewSoon);
  }
  mode.addEventListener('change', () => { showMode(); previewSoon(); });
  showMode();
  root.append(h('h1', null, id ? 'Edit schedule' : 'New schedule'), form);
  api('GET', '/api/kinds', undefined, {signal}).then(d => {
    const list = form.querySelector('#sched-kinds');
    for (const k of d.kinds || []) list.append(h('option', {value: k.kind}));
  }).catch(() => {});
  if (id) preview();
  return () => previewSoon.cancel();
}

// localInput turns unix seconds into a datetime-local value.
function localInput(t) {
  const d = toDate(t);
  if (!d) return '';
  const p = n => String(n).padStart(2, '0');
  return `${d.getFullYear()}-${p(d.getMonth() + 1)}-${p(d.getDate())}T${p(d.getHours())}:${p(d.getMinutes())}:${p(d.getSeconds())}`;
}
