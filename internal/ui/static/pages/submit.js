// Submit a task: kind, priority, JSON payload (checked as it is typed, and
// before sending) and the options of POST /api/tasks.
import {api, ApiError} from '../lib/api.js';
import {h, field, select, showFieldError, clearFieldErrors, replace} from '../lib/dom.js';

export default async function render(root, _params, {signal, navigate}) {
  const q = new URLSearchParams(location.search);
  const kinds = h('datalist', {id: 'kind-list'});
  const kind = h('input', {name: 'kind', id: 'submit-kind', required: true, list: 'kind-list', value: q.get('kind') || '',
    autocomplete: 'off', pattern: '[A-Za-z0-9_.:\\-]{1,128}', placeholder: 'email'});
  const priority = select('priority', ['high', 'mid', 'low'], 'mid', {id: 'submit-priority'});
  const payload = h('textarea', {name: 'task', id: 'submit-payload', spellcheck: 'false', rows: 10}, '{\n  \n}');
  const payloadState = h('p', {class: 'hint', id: 'payload-state', 'aria-live': 'polite'});
  const num = (name, id, placeholder, min, max) => h('input', {name, id, type: 'number', inputmode: 'numeric', min, max, step: 1, placeholder});
  const key = h('input', {name: 'key', id: 'submit-key', placeholder: 'none', maxlength: 256});
  const delay = num('delay_seconds', 'submit-delay', '0', 0, 316224000);
  const retries = num('max_retries', 'submit-retries', '3', 0, 1000);
  const timeout = num('timeout_seconds', 'submit-timeout', 'none', 0, 31622400);
  const hb = num('heartbeat_timeout_seconds', 'submit-heartbeat', '30', 1, 3600);
  const workers = num('workers', 'submit-workers', '1', 1, 1000);
  const workerIDs = h('input', {name: 'worker_ids', id: 'submit-worker-ids', placeholder: 'any worker'});
  const status = h('div', {id: 'submit-status'});
  const button = h('button', {type: 'submit', class: 'primary', id: 'submit-button', 'data-needs': 'submit'}, 'Submit');

  function parsePayload() {
    const text = payload.value.trim();
    if (!text) return {error: 'The payload is required: any JSON value but null.'};
    try {
      const v = JSON.parse(text);
      if (v === null) return {error: 'The payload cannot be null.'};
      return {value: v};
    } catch (err) {
      return {error: 'Not valid JSON: ' + err.message};
    }
  }
  function checkPayload() {
    const r = parsePayload();
    payloadState.textContent = r.error || 'Valid JSON.';
    payloadState.className = r.error ? 'field-error' : 'hint';
    if (r.error) payload.setAttribute('aria-invalid', 'true'); else payload.removeAttribute('aria-invalid');
    return r;
  }
  payload.addEventListener('input', checkPayload);

  const form = h('form', {class: 'card form', id: 'submit-form', novalidate: true, onsubmit: async (e) => {
    e.preventDefault();
    clearFieldErrors(form);
    replace(status);
    const p = checkPayload();
    if (p.error) { payload.focus(); return; }
    const body = {kind: kind.value.trim(), priority: priority.value, task: p.value};
    if (key.value.trim()) body.key = key.value.trim();
    for (const [input, name] of [[delay, 'delay_seconds'], [retries, 'max_retries'], [timeout, 'timeout_seconds'], [hb, 'heartbeat_timeout_seconds'], [workers, 'workers']]) {
      if (input.value.trim() === '') continue;
      const n = Number(input.value);
      if (!Number.isInteger(n)) { showFieldError(form, name, 'Must be a whole number.'); return; }
      body[name] = n;
    }
    const ids = workerIDs.value.split(',').map(x => x.trim()).filter(Boolean);
    if (ids.length) body.worker_ids = ids;
    button.disabled = true;
    try {
      const r = await api('POST', '/api/tasks', body);
      navigate('/tasks/' + r.task_id);
    } catch (err) {
      button.disabled = false;
      if (!(err instanceof ApiError) || !showFieldError(form, err.field, err.message)) {
        replace(status, h('div', {class: 'error-box', role: 'alert'}, err.message));
      }
    }
  }},
  h('div', {class: 'fields'},
    field('Kind', kind, 'letters, digits and _ . : -'),
    field('Priority', priority)),
  h('div', {class: 'field', 'data-field': 'task'},
    h('label', {for: 'submit-payload'}, 'Payload (JSON)'), payload, payloadState,
    h('p', {class: 'field-error', hidden: true, role: 'alert'})),
  h('details', null, h('summary', null, 'Options'),
    h('div', {class: 'fields'},
      field('Idempotency key', key),
      field('Delay (seconds)', delay),
      field('Max retries', retries),
      field('Timeout per run (seconds)', timeout),
      field('Heartbeat timeout (seconds)', hb),
      field('Workers needed', workers),
      field('Only these workers', workerIDs, 'comma-separated ids'))),
  status,
  h('div', null, button), kinds);

  root.append(h('h1', null, 'Submit a task'), form);
  checkPayload();
  api('GET', '/api/kinds', undefined, {signal}).then(d => {
    for (const k of d.kinds || []) kinds.append(h('option', {value: k.kind}));
  }).catch(() => {});
}
