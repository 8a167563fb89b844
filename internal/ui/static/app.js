// Rota UI: the router and what all pages share. Each page is a module in
// pages/ whose default export render(root, params, ctx) fills root and may
// return a cleanup function; ctx carries the live event stream, an
// AbortSignal that fires when the user leaves the page, and navigate().
import {h, replace} from './lib/dom.js';
import {Live} from './lib/live.js';
import {api} from './lib/api.js';

const routes = [
  [/^\/$/, 'overview', 'Overview'],
  [/^\/tasks$/, 'tasks', 'Tasks'],
  [/^\/tasks\/([0-9a-f]{32})$/, 'task', 'Task'],
  [/^\/submit$/, 'submit', 'Submit a task'],
  [/^\/schedules$/, 'schedules', 'Schedules'],
  [/^\/schedules\/new$/, 'schedule-form', 'New schedule'],
  [/^\/schedules\/([^/]+)\/edit$/, 'schedule-form', 'Edit schedule'],
  [/^\/schedules\/([^/]+)$/, 'schedule', 'Schedule'],
  [/^\/workers$/, 'workers', 'Workers'],
  [/^\/kinds$/, 'kinds', 'Kinds'],
  [/^\/audit$/, 'audit', 'Audit log'],
];

const main = document.getElementById('main');
const live = new Live(document.getElementById('live'));
let current = null; // {cleanup, abort}
let seq = 0;

function match(pathname) {
  for (const [re, page, title] of routes) {
    const m = pathname.match(re);
    if (m) return {page, title, params: m.slice(1).map(decodeURIComponent)};
  }
  return null;
}

// navigate shows url (a path of this site) and records it in the history.
export function navigate(url, {replace: rep = false} = {}) {
  if (rep) history.replaceState(null, '', url);
  else history.pushState(null, '', url);
  render({scroll: !rep});
}

async function render({scroll = false} = {}) {
  const my = ++seq;
  if (current) {
    current.abort.abort();
    try { current.cleanup && current.cleanup(); } catch (err) { console.warn(err); }
    current = null;
  }
  const route = match(location.pathname);
  const section = location.pathname.split('/')[1] || '';
  for (const a of document.querySelectorAll('.nav a')) {
    if (a.dataset.nav === section) a.setAttribute('aria-current', 'page');
    else a.removeAttribute('aria-current');
  }
  const root = h('div', {class: 'page', 'data-page': route ? route.page : 'not-found'});
  replace(main, root);
  if (!route) {
    document.title = 'Not found · Rota';
    root.append(h('h1', null, 'Not found'), h('p', {class: 'notice'}, 'There is no page at this address. ', h('a', {href: '/'}, 'Go to the overview.')));
    return;
  }
  document.title = route.title + ' · Rota';
  const abort = new AbortController();
  current = {abort, cleanup: null};
  try {
    const mod = await import(`./pages/${route.page}.js`);
    if (my !== seq) return;
    const cleanup = await mod.default(root, route.params, {live, signal: abort.signal, navigate, setTitle});
    if (my !== seq) { cleanup && cleanup(); return; }
    current.cleanup = cleanup;
  } catch (err) {
    if (err && err.name === 'AbortError') return;
    console.warn(err);
    if (my === seq) root.append(h('div', {class: 'error-box', role: 'alert'}, String(err && err.message || err)));
  }
  if (scroll) window.scrollTo(0, 0);
}

function setTitle(t) { document.title = t + ' · Rota'; }

// Links to pages of the UI are followed without reloading.
document.addEventListener('click', (e) => {
  if (e.defaultPrevented || e.button !== 0 || e.metaKey || e.ctrlKey || e.shiftKey || e.altKey) return;
  const a = e.target.closest('a[href]');
  if (!a || a.target || a.hasAttribute('download')) return;
  const url = new URL(a.href, location.href);
  if (url.origin !== location.origin || /^\/(api|static|metrics|login|logout)(\/|$)/.test(url.pathname)) return;
  if (url.pathname === location.pathname && url.search === location.search && url.hash) return;
  e.preventDefault();
  navigate(url.pathname + url.search);
});

window.addEventListener('popstate', () => render());

// The caller's role: what it may not do is hidden (data-needs; app.css),
// and the server refuses it anyway.
async function whoami() {
  try {
    const me = await api('GET', '/api/auth/me');
    document.body.dataset.role = me.role;
    if (me.auth) document.getElementById('who').textContent = `${me.name} (${me.role})`;
  } catch (err) { console.warn(err); }
}

// The no-worker banner: kinds whose ready tasks have had no live worker
// for the server's --no-worker-after (no_worker_since in GET /api/kinds).
// It follows the alarm's events, and looks again every 10 s (the events
// come from the leader; a kind whose tasks all went clears silently).
const alarms = document.getElementById('alarms');

function since(unix) {
  const d = new Date(unix * 1000);
  return d.toLocaleString();
}

async function refreshAlarms() {
  try {
    const data = await api('GET', '/api/kinds');
    const down = (data.kinds || []).filter((k) => k.no_worker_since);
    replace(alarms, down.map((k) => h('p', {class: 'alarm', dataset: {kind: k.kind}},
      h('strong', null, 'No worker: '),
      'tasks of kind ', h('a', {href: '/tasks?kind=' + encodeURIComponent(k.kind) + '&status=SCHEDULED'}, k.kind),
      ` are waiting and no live worker serves it since ${since(k.no_worker_since)}.`)));
    alarms.hidden = down.length === 0;
  } catch (err) { console.warn(err); }
}

live.on((ev) => {
  if (ev.type === 'reset' || ev.type === 'kind.no_worker' || ev.type === 'kind.worker_back') refreshAlarms();
});
setInterval(refreshAlarms, 10000);

whoami();
refreshAlarms();
live.start();
render();
