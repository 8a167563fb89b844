// Schedules: each with its timetable, next fire time, last run status and
// a strip of its latest runs.
import {api, query} from '../lib/api.js';
import {h, replace, badge, table, timeEl, coalesce, select} from '../lib/dom.js';
import {sid, runsOf, nextFire, describe} from '../lib/sched.js';

const STRIP = 20;

export default async function render(root, _params, {live, signal}) {
  const list = h('section', {class: 'card', id: 'schedule-list'}, h('p', {class: 'empty'}, 'Loading…'));
  const filter = select('state', [['', 'all states'], 'active', 'paused', 'ended', 'error'], new URLSearchParams(location.search).get('state') || '', {id: 'schedule-state-filter'});
  root.append(h('div', {class: 'spread'}, h('h1', null, 'Schedules'), filter, h('a', {href: '/schedules/new', id: 'new-schedule', 'data-needs': 'operate'}, 'New schedule')), list);
  filter.addEventListener('change', () => { refresh(); });

  let kinds = new Set();
  async function load() {
    const data = await api('GET', '/api/schedules' + query({state: filter.value}), undefined, {signal});
    if (signal.aborted) return;
    const items = Array.isArray(data) ? data : data.schedules || [];
    kinds = new Set(items.map(s => s.kind));
    const runs = await Promise.all(items.slice(0, 100).map(s =>
      api('GET', `/api/schedules/${encodeURIComponent(sid(s))}/runs?limit=${STRIP}`, undefined, {signal}).then(runsOf).catch(() => [])));
    if (signal.aborted) return;
    replace(list, items.length === 0 ? h('p', {class: 'empty'}, 'No schedule yet. ', h('a', {href: '/schedules/new'}, 'Create one.')) :
      table(['Name', 'Kind', 'When', 'State', 'Next fire', 'Last run', 'Recent runs'],
        items.map((s, i) => {
          const rs = runs[i] || [];
          const newestFirst = rs.length > 1 && (rs[0].fire_time || 0) < (rs[rs.length - 1].fire_time || 0) ? [...rs].reverse() : rs;
          const next = nextFire(s);
          return h('tr', {'data-schedule': sid(s)},
            h('td', null, h('a', {href: '/schedules/' + encodeURIComponent(sid(s))}, s.name || sid(s))),
            h('td', null, s.kind),
            h('td', {class: 'mono'}, describe(s)),
            h('td', {title: s.error_message || ''}, badge(s.state || (s.enabled === false ? (s.ended ? 'ended' : 'paused') : 'active')),
              s.circuit && s.circuit !== 'closed' ? [' ', badge(s.circuit)] : null),
            h('td', null, next && s.enabled !== false ? [timeEl(next), h('span', {class: 'muted small'}, ' ', timeEl(next, true))] : '—'),
            h('td', null, newestFirst[0] ? badge(newestFirst[0].status) : h('span', {class: 'muted'}, 'none')),
            h('td', null, strip([...newestFirst].reverse())));
        }), {id: 'schedules-table'}));
  }

  const refresh = coalesce(() => load().catch(showError), 1000);
  function showError(err) {
    if (err.name === 'AbortError') return;
    replace(list, h('div', {class: 'error-box', role: 'alert'}, err.message));
  }
  const off = await live.follow(() => load().catch(showError), (ev) => { if (ev.type === 'reset' || kinds.has(ev.kind)) refresh(); });
  const timer = setInterval(refresh, 10000);
  return () => { off(); clearInterval(timer); refresh.cancel(); };
}

// strip shows runs oldest to newest as coloured marks.
export function strip(runs) {
  return h('span', {class: 'strip', 'aria-label': runs.map(r => r.status).join(', ') || 'no runs'},
    runs.map(r => h('span', {class: 's-' + String(r.status).toLowerCase(), title: `${r.status} ${r.fire_time ? new Date(r.fire_time * 1000).toLocaleString() : ''}`})));
}
