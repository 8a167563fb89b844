// A line chart of per-minute counts, drawn as inline SVG.
import {s, h} from './dom.js';

// throughputChart draws buckets [{time, started, succeeded, failed}].
// width is the chart's width in CSS pixels: the SVG is drawn at its real
// size, so that its text is never stretched.
export function throughputChart(buckets, width = 720) {
  const W = Math.max(240, Math.round(width)), H = 200, L = 36, R = 8, T = 10, B = 22;
  const series = [['started', 'Started'], ['succeeded', 'Succeeded'], ['failed', 'Failed']];
  const max = Math.max(1, ...buckets.flatMap(b => series.map(([k]) => b[k] || 0)));
  const top = niceMax(max);
  const n = Math.max(buckets.length - 1, 1);
  const x = i => L + (W - L - R) * i / n;
  const y = v => T + (H - T - B) * (1 - v / top);
  const svg = s('svg', {viewBox: `0 0 ${W} ${H}`, width: W, height: H, role: 'img',
    'aria-label': 'Runs per minute over the last hour'});
  for (let i = 0; i <= 4; i++) {
    const v = top * i / 4;
    svg.append(s('line', {class: i ? 'grid-line' : 'axis', x1: L, x2: W - R, y1: y(v), y2: y(v)}));
    svg.append(s('text', {x: L - 4, y: y(v) + 3, 'text-anchor': 'end'}, fmtCount(v)));
  }
  const every = W < 480 ? 30 : 15;
  buckets.forEach((b, i) => {
    if (i % every !== 0 && i !== buckets.length - 1) return;
    const d = new Date(b.time * 1000);
    const label = i === buckets.length - 1 ? 'now' : `${String(d.getHours()).padStart(2, '0')}:${String(d.getMinutes()).padStart(2, '0')}`;
    svg.append(s('text', {x: x(i), y: H - 6, 'text-anchor': i === buckets.length - 1 ? 'end' : 'middle'}, label));
  });
  for (const [k, label] of series) {
    const pts = buckets.map((b, i) => `${x(i).toFixed(1)},${y(b[k] || 0).toFixed(1)}`).join(' ');
    const line = s('polyline', {class: 'line ' + k, points: pts, 'vector-effect': 'non-scaling-stroke'});
    line.append(s('title', null, label));
    svg.append(line);
  }
  const total = k => buckets.reduce((a, b) => a + (b[k] || 0), 0);
  const legend = h('div', {class: 'legend'}, series.map(([k, label]) =>
    h('span', {class: k}, h('i'), `${label} ${total(k)}`)));
  return h('div', {class: 'chart'}, svg, legend);
}

function niceMax(v) {
  const p = Math.pow(10, Math.floor(Math.log10(v)));
  for (const m of [1, 2, 2.5, 5, 10]) if (m * p >= v) return m * p;
  return 10 * p;
}

function fmtCount(v) {
  return v >= 1000 ? (v / 1000).toFixed(v % 1000 ? 1 : 0) + 'k' : String(Math.round(v * 10) / 10);
}

// seriesChart draws buckets [{time, ...}] as lines of series [[key,
// label]], each bucket's value read by value(bucket, key); fmt labels the
// y axis. It is the history page's chart: any window, any bucket width.
export function seriesChart(buckets, series, {width = 720, label = '', fmt = fmtCount, value = (b, k) => b[k] || 0, id} = {}) {
  const W = Math.max(240, Math.round(width)), H = 180, L = 44, R = 8, T = 10, B = 22;
  const max = Math.max(1, ...buckets.flatMap(b => series.map(([k]) => value(b, k))));
  const top = niceMax(max);
  const n = Math.max(buckets.length - 1, 1);
  const x = i => L + (W - L - R) * i / n;
  const y = v => T + (H - T - B) * (1 - v / top);
  const svg = s('svg', {viewBox: `0 0 ${W} ${H}`, width: W, height: H, role: 'img', 'aria-label': label});
  for (let i = 0; i <= 4; i++) {
    const v = top * i / 4;
    svg.append(s('line', {class: i ? 'grid-line' : 'axis', x1: L, x2: W - R, y1: y(v), y2: y(v)}));
    svg.append(s('text', {x: L - 4, y: y(v) + 3, 'text-anchor': 'end'}, fmt(v)));
  }
  const every = Math.max(1, Math.ceil(buckets.length / (W < 480 ? 3 : 6)));
  buckets.forEach((b, i) => {
    if (i % every !== 0) return;
    const d = new Date(b.time * 1000);
    svg.append(s('text', {x: x(i), y: H - 6, 'text-anchor': 'middle'},
      `${String(d.getHours()).padStart(2, '0')}:${String(d.getMinutes()).padStart(2, '0')}`));
  });
  for (const [k, name] of series) {
    const pts = buckets.map((b, i) => `${x(i).toFixed(1)},${y(value(b, k)).toFixed(1)}`).join(' ');
    const line = s('polyline', {class: 'line ' + k, points: pts, 'vector-effect': 'non-scaling-stroke', 'data-series': k});
    line.append(s('title', null, name));
    svg.append(line);
  }
  const legend = h('div', {class: 'legend'}, series.map(([k, name]) => h('span', {class: k}, h('i'), name)));
  return h('div', {class: 'chart', id}, svg, legend);
}

// fmtMs labels milliseconds: 850ms, 1.2s, 3m.
export function fmtMs(v) {
  if (v < 1000) return Math.round(v) + 'ms';
  if (v < 60000) return (Math.round(v / 100) / 10) + 's';
  return (Math.round(v / 6000) / 10) + 'm';
}
