// Overview: queue counts per kind, throughput over the last hour, workers
// and cluster nodes. Reloads on every event (coalesced) and every 15 s.
import {api} from '../lib/api.js';
import {h, replace, badge, table, timeEl, fmtDuration, coalesce} from '../lib/dom.js';
import {throughputChart, seriesChart, fmtMs} from '../lib/chart.js';

const COLS = ['SCHEDULED', 'RUNNING', 'SUCCESS', 'FAILED', 'TIMEOUT', 'CANCELED'];

export default async function render(root, _params, {live, signal}) {
  const body = h('div', {id: 'overview'});
  root.append(h('h1', null, 'Overview'), body);

  // The history aggregates a day of stored tasks: read it at most every 30 s,
  // not on every event.
  let history = null, historyAt = 0;
  async function loadHistory(opt) {
    if (Date.now() - historyAt < 30000) return history;
    historyAt = Date.now();
    history = await api('GET', '/api/stats/history?hours=24', undefined, opt).catch(() => null);
    return history;
  }

  async function load() {
    const opt = {signal};
    const [stats, workers, cluster, rates, hist] = await Promise.all([
      api('GET', '/api/stats', undefined, opt),
      api('GET', '/api/workers?limit=1000', undefined, opt),
      api('GET', '/api/cluster', undefined, opt).catch(() => ({nodes: []})),
      api('GET', '/api/stats/throughput', undefined, opt).catch(() => null),
      loadHistory(opt),
    ]);
    if (signal.aborted) return;
    const width = body.clientWidth - 30;
    replace(body, view(stats, workers.workers || [], cluster.nodes || [], rates, width), historyView(hist, width));
  }

  const refresh = coalesce(() => load().catch(showError), 200);
  function showError(err) {
    if (err.name === 'AbortError') return;
    replace(body, h('div', {class: 'error-box', role: 'alert'}, err.message));
  }
  const off = await live.follow(() => load().catch(showError), () => refresh());
  const timer = setInterval(refresh, 15000);
  let width = body.clientWidth;
  const onResize = () => { if (body.clientWidth !== width) { width = body.clientWidth; refresh(); } };
  window.addEventListener('resize', onResize);
  return () => { off(); clearInterval(timer); refresh.cancel(); window.removeEventListener('resize', onResize); };
}

// historyView charts the last 24 h from the stored tasks (every node
// answers the same): finished tasks by outcome, queue wait and duration.
function historyView(history, width) {
  if (!history) return h('section', {class: 'card', id: 'history'}, h('p', {class: 'muted'}, 'History is not available.'));
  const b = history.buckets || [];
  const sum = (k) => b.reduce((n, x) => n + x[k], 0);
  const mins = Math.round(history.bucket_seconds / 60);
  return h('section', {class: 'card', id: 'history'},
    h('div', {class: 'spread'}, h('h2', null, 'Last 24 hours'),
      h('span', {class: 'muted small', id: 'history-totals'},
        `${sum('succeeded')} succeeded · ${sum('failed')} failed · ${sum('canceled')} canceled, per ${mins} min, from the stored tasks`)),
    h('h3', {class: 'small'}, 'Finished tasks'),
    seriesChart(b, [['succeeded', 'Succeeded'], ['failed', 'Failed or timed out'], ['canceled', 'Canceled']],
      {width, label: 'Finished tasks per bucket over the last 24 hours', id: 'history-throughput'}),
    h('h3', {class: 'small'}, 'Latency'),
    seriesChart(b, [['wait_avg_ms', 'Wait (run at → start), average'], ['duration_avg_ms', 'Duration, average'],
      ['duration_max_ms', 'Duration, max']], {width, label: 'Queue wait and run duration over the last 24 hours', fmt: fmtMs, id: 'history-latency'}));
}

function view(stats, workers, nodes, rates, chartWidth) {
  const t = stats.totals || {};
  const byStatus = {active: 0, lost: 0, stopped: 0};
  for (const w of workers) byStatus[w.status] = (byStatus[w.status] || 0) + 1;
  const leader = nodes.find(n => n.leader);
  const stat = (n, label, id) => h('div', {class: 'stat', id}, h('div', {class: 'n'}, n), h('div', {class: 'l'}, label));
  return [
    h('div', {class: 'stats'},
      stat(t.SCHEDULED || 0, 'waiting', 'stat-waiting'),
      stat(t.RUNNING || 0, 'running', 'stat-running'),
      stat(t.SUCCESS || 0, 'succeeded', 'stat-succeeded'),
      stat((t.FAILED || 0) + (t.TIMEOUT || 0), 'failed or timed out', 'stat-failed'),
      stat(byStatus.active, 'workers active', 'stat-workers-active'),
      stat(byStatus.lost, 'workers lost', 'stat-workers-lost'),
      stat(nodes.length, nodes.length === 1 ? 'node' : 'nodes', 'stat-nodes')),
    h('section', {class: 'card', id: 'throughput'},
      h('div', {class: 'spread'}, h('h2', null, 'Runs per minute, last hour'),
        h('span', {class: 'muted small'}, 'counted by this node since it started')),
      rates ? throughputChart(rates.buckets || [], chartWidth) : h('p', {class: 'muted'}, 'Throughput is not available.')),
    h('section', {class: 'card', id: 'kinds-summary'},
      h('div', {class: 'spread'}, h('h2', null, 'Kinds'), h('a', {href: '/kinds'}, 'Settings')),
      (stats.kinds || []).length === 0
        ? h('p', {class: 'empty'}, 'No task submitted yet. ', h('a', {href: '/submit'}, 'Submit one.'))
        : table(['Kind', ...COLS.map(c => h('th', {class: 'num'}, c)), h('th', {class: 'num'}, 'Oldest waiting'), 'State'],
          stats.kinds.map(k => h('tr', {'data-kind': k.kind},
            h('td', null, h('a', {href: '/tasks?kind=' + encodeURIComponent(k.kind)}, k.kind)),
            COLS.map(c => h('td', {class: 'num', 'data-status': c},
              (k.counts[c] || 0) > 0 ? h('a', {href: `/tasks?kind=${encodeURIComponent(k.kind)}&status=${c}`}, k.counts[c]) : '0')),
            h('td', {class: 'num'}, k.oldest_waiting_seconds ? fmtDuration(k.oldest_waiting_seconds) : '—'),
            h('td', null, k.paused ? badge('paused') : h('span', {class: 'muted'}, 'active')))))),
    h('div', {class: 'grid'},
      h('section', {class: 'card', id: 'workers-summary'},
        h('div', {class: 'spread'}, h('h2', null, 'Workers'), h('a', {href: '/workers'}, 'All workers')),
        h('p', null, badge('active', byStatus.active), ' ', badge('lost', byStatus.lost), ' ', badge('stopped', byStatus.stopped)),
        workers.length === 0 ? h('p', {class: 'muted'}, 'No worker has connected yet.') : null),
      h('section', {class: 'card', id: 'cluster'},
        h('h2', null, 'Cluster'),
        nodes.length === 0 ? h('p', {class: 'muted'}, 'No live node.') :
          table(['Node', 'Address', 'Version', 'Last heartbeat', ''],
            nodes.map(n => h('tr', null,
              h('td', {class: 'mono'}, n.node_id), h('td', null, n.address), h('td', null, n.version),
              h('td', null, timeEl(n.last_heartbeat, true)),
              h('td', null, n.leader ? badge('leader') : '')))),
        leader || nodes.length === 0 ? null : h('p', {class: 'muted small'}, 'No leader elected right now.'))),
  ];
}
