// Audit log (admin): every change an operator made — who, what, on which
// object, when, from where — newest first, with filters and "More".
import {api, query} from '../lib/api.js';
import {h, replace, table, timeEl} from '../lib/dom.js';

export default async function render(root, _params, {signal}) {
  const actor = h('input', {name: 'actor', id: 'audit-actor', placeholder: 'any actor'});
  const action = h('input', {name: 'action', id: 'audit-action', placeholder: 'any action, e.g. task.stop'});
  const target = h('input', {name: 'target', id: 'audit-target', placeholder: 'any target'});
  const list = h('section', {class: 'card', id: 'audit-list'}, h('p', {class: 'loading'}, 'Loading…'));
  const more = h('button', {type: 'button', id: 'audit-more', hidden: true}, 'More');
  let rows = [];
  let cursor = '';
  const filters = h('form', {class: 'card row', id: 'audit-filters', onsubmit: (e) => {
    e.preventDefault();
    rows = [];
    cursor = '';
    load().catch(showError);
  }},
  h('div', {class: 'field'}, h('label', {for: 'audit-actor'}, 'Actor'), actor),
  h('div', {class: 'field'}, h('label', {for: 'audit-action'}, 'Action'), action),
  h('div', {class: 'field'}, h('label', {for: 'audit-target'}, 'Target'), target),
  h('div', {class: 'field'}, h('label', null, '\u00a0'), h('button', {type: 'submit', class: 'primary'}, 'Filter')));
  more.addEventListener('click', () => load().catch(showError));
  root.append(h('h1', null, 'Audit log'), filters, list, h('div', null, more));

  function change(r) {
    const parts = [];
    if (r.before !== undefined) parts.push(h('div', {class: 'mono small'}, 'before: ' + JSON.stringify(r.before)));
    if (r.after !== undefined) parts.push(h('div', {class: 'mono small'}, 'after: ' + JSON.stringify(r.after)));
    return parts;
  }

  async function load() {
    const q = query({actor: actor.value.trim(), action: action.value.trim(), target: target.value.trim(), limit: 100, cursor});
    const data = await api('GET', '/api/audit' + q, undefined, {signal});
    if (signal.aborted) return;
    rows = rows.concat(data.records || []);
    cursor = data.next_cursor || '';
    more.hidden = !cursor;
    replace(list, rows.length === 0 ? h('p', {class: 'empty'}, 'No change recorded.') :
      table(['When', 'Actor', 'Role', 'Action', 'Target', 'From', 'Request', 'Change'],
        rows.map(r => h('tr', {'data-audit': r.id},
          h('td', null, timeEl(r.at)),
          h('td', null, r.actor),
          h('td', null, r.role),
          h('td', {class: 'mono'}, r.action),
          h('td', {class: 'mono'}, r.target),
          h('td', null, r.remote_addr),
          h('td', {class: 'mono small'}, r.request_id),
          h('td', {class: 'wrap'}, change(r)))), {id: 'audit-table'}));
  }

  function showError(err) {
    if (err.name === 'AbortError') return;
    replace(list, h('div', {class: 'error-box', role: 'alert'}, err.message));
  }
  await load().catch(showError);
}
