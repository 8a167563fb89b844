// Kinds: pause and resume, priority factor and limits (PUT
// /api/kinds/{kind}). A row being edited is left alone by live reloads.
import {api, ApiError} from '../lib/api.js';
import {h, replace, badge, table, coalesce, field} from '../lib/dom.js';

const SETTINGS = [
  ['priority_factor', 'Priority factor', 1, 100, '1'],
  ['max_running', 'Max running', 0, 1000000, '1'],
  ['rate', 'Rate /s', 0, 1000000, 'any'],
  ['retention_seconds', 'Retention (s)', 0, 3162240000, '1'],
];

export default async function render(root, _params, {live, signal}) {
  const flash = h('div', {id: 'kinds-flash'});
  const list = h('section', {class: 'card', id: 'kind-list'}, h('p', {class: 'empty'}, 'Loading…'));
  const rows = new Map(); // kind → {tr, dirty}

  const newName = h('input', {name: 'kind', id: 'new-kind', placeholder: 'kind name', pattern: '[A-Za-z0-9_.:\\-]{1,128}', required: true});
  const add = h('form', {class: 'card form', id: 'new-kind-form', 'data-needs': 'operate', onsubmit: async (e) => {
    e.preventDefault();
    try {
      await api('PUT', '/api/kinds/' + encodeURIComponent(newName.value.trim()), {});
      say(`Kind ${newName.value.trim()} created.`);
      newName.value = '';
      await load();
    } catch (err) { say(err.message, true); }
  }}, h('h2', null, 'Add a kind'), h('div', {class: 'row'}, field('Name', newName), h('button', {type: 'submit'}, 'Create')));

  root.append(h('h1', null, 'Kinds'), flash, list, add);

  function say(msg, isError) {
    replace(flash, h('div', {class: isError ? 'error-box' : 'flash', role: isError ? 'alert' : 'status'}, msg));
  }

  function row(k) {
    const inputs = SETTINGS.map(([name, label, min, max, step]) =>
      h('input', {name, type: 'number', min, max, step, value: k[name], 'aria-label': `${label} of ${k.kind}`, 'data-setting': name}));
    const state = {dirty: false};
    const toggle = h('button', {type: 'button', class: 'small', 'data-toggle': k.kind, 'data-needs': 'operate'}, k.paused ? 'Resume' : 'Pause');
    toggle.addEventListener('click', async () => {
      toggle.disabled = true;
      try {
        await api('POST', `/api/kinds/${encodeURIComponent(k.kind)}/${k.paused ? 'resume' : 'pause'}`, {});
        await load();
      } catch (err) { say(err.message, true); toggle.disabled = false; }
    });
    const save = h('button', {type: 'submit', class: 'small', 'data-needs': 'operate'}, 'Save');
    const form = h('form', {class: 'inline-form', 'data-kind-form': k.kind, onsubmit: async (e) => {
      e.preventDefault();
      const body = {};
      for (const input of inputs) {
        const v = Number(input.value);
        if (input.value === '' || isNaN(v)) { say(`${input.getAttribute('aria-label')}: a number is required.`, true); input.focus(); return; }
        body[input.name] = v;
      }
      try {
        await api('PUT', '/api/kinds/' + encodeURIComponent(k.kind), body);
        state.dirty = false;
        say(`Kind ${k.kind} saved.`);
        await load();
      } catch (err) {
        const bad = err instanceof ApiError && inputs.find(i => i.name === err.field);
        if (bad) bad.setAttribute('aria-invalid', 'true');
        say(err.message, true);
      }
    }}, inputs.map((input, i) => h('label', {class: 'small'}, SETTINGS[i][1], input)), save);
    form.addEventListener('input', () => { state.dirty = true; });
    state.tr = h('tr', {'data-kind': k.kind},
      h('td', null, h('a', {href: '/tasks?kind=' + encodeURIComponent(k.kind)}, k.kind)),
      h('td', null, k.paused ? badge('paused') : badge('active')),
      h('td', null, toggle),
      h('td', null, form));
    return state;
  }

  async function load() {
    const data = await api('GET', '/api/kinds', undefined, {signal});
    if (signal.aborted) return;
    const kinds = data.kinds || [];
    const next = new Map();
    for (const k of kinds) {
      const old = rows.get(k.kind);
      next.set(k.kind, old && old.dirty ? old : row(k));
    }
    rows.clear();
    for (const [k, v] of next) rows.set(k, v);
    if (kinds.length === 0) { replace(list, h('p', {class: 'empty'}, 'No kind yet: kinds are created by their first task, or here.')); return; }
    replace(list, table(['Kind', 'State', '', 'Settings'], [...rows.values()].map(r => r.tr), {id: 'kinds-table'}),
      h('p', {class: 'hint'}, 'Priority factor f serves f² high, f mid and 1 low task per round. Max running 0 means no cap; rate and retention are stored but not enforced yet.'));
  }

  const refresh = coalesce(() => load().catch(showError), 200);
  function showError(err) {
    if (err.name === 'AbortError') return;
    replace(list, h('div', {class: 'error-box', role: 'alert'}, err.message));
  }
  const off = await live.follow(() => load().catch(showError), (ev) => {
    if (ev.type === 'reset' || ev.type === 'kind' || (ev.type === 'task' && ev.kind && !rows.has(ev.kind))) refresh();
  });
  return () => { off(); refresh.cancel(); };
}
