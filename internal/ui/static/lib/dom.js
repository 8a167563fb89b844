// DOM helpers. Every string becomes a text node or an attribute value:
// nothing is ever parsed as HTML, so data from the API cannot inject markup.

// h builds an element: h('a', {href: '/x', class: 'c', onclick: fn}, 'text', child).
export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  setAttrs(el, attrs);
  append(el, children);
  return el;
}

const props = new Set(['value', 'checked', 'disabled', 'selected', 'hidden', 'readOnly', 'required']);

function setAttrs(el, attrs) {
  if (!attrs) return;
  for (const [k, v] of Object.entries(attrs)) {
    if (v === undefined || v === null || v === false) continue;
    if (k === 'class') el.className = v;
    else if (k === 'dataset') Object.assign(el.dataset, v);
    else if (k.startsWith('on') && typeof v === 'function') el.addEventListener(k.slice(2), v);
    else if (props.has(k)) el[k] = v;
    else el.setAttribute(k, v === true ? '' : String(v));
  }
}

// append adds children (strings, numbers, nodes, arrays; null skipped).
export function append(el, children) {
  for (const c of [children].flat(Infinity)) {
    if (c === undefined || c === null || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

// replace empties el and appends children.
export function replace(el, ...children) {
  el.replaceChildren();
  return append(el, children);
}

const SVG = 'http://www.w3.org/2000/svg';

// s builds an SVG element.
export function s(tag, attrs, ...children) {
  const el = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v !== undefined && v !== null) el.setAttribute(k, String(v));
  }
  append(el, children);
  return el;
}

// badge shows a status.
export function badge(status, extra) {
  const text = String(status || '—');
  return h('span', {class: 'badge s-' + text.toLowerCase(), 'data-status': text}, extra !== undefined ? text + ' ' + extra : text);
}

function pad(n) { return String(n).padStart(2, '0'); }

// toDate reads an API instant: unix seconds (number), unix ms (large
// number) or an RFC 3339 string. 0, null and '' are no time.
export function toDate(v) {
  if (v === null || v === undefined || v === 0 || v === '') return null;
  if (typeof v === 'number') return new Date(v > 1e11 ? v : v * 1000);
  const d = new Date(v);
  return isNaN(d) ? null : d;
}

// fmtTime shows an instant in local time, YYYY-MM-DD HH:MM:SS.
export function fmtTime(v) {
  const d = toDate(v);
  if (!d) return '—';
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`;
}

// timeEl is a <time> with the local time and the UTC instant as tooltip.
export function timeEl(v, relative) {
  const d = toDate(v);
  if (!d) return h('span', {class: 'muted'}, '—');
  return h('time', {datetime: d.toISOString(), title: d.toISOString()}, relative ? ago(d) : fmtTime(d));
}

// fmtDuration shows seconds as 1h 2m, 3m 4s, 5.2s.
export function fmtDuration(sec) {
  if (sec === null || sec === undefined || isNaN(sec)) return '—';
  sec = Math.max(0, sec);
  if (sec < 10) return (Math.round(sec * 10) / 10) + 's';
  if (sec < 60) return Math.round(sec) + 's';
  const m = Math.floor(sec / 60);
  if (m < 60) return `${m}m ${Math.round(sec % 60)}s`;
  const hrs = Math.floor(m / 60);
  if (hrs < 48) return `${hrs}h ${m % 60}m`;
  return `${Math.floor(hrs / 24)}d ${hrs % 24}h`;
}

// ago shows how long ago (or in how long) an instant is.
export function ago(v) {
  const d = toDate(v);
  if (!d) return '—';
  const sec = (Date.now() - d.getTime()) / 1000;
  if (Math.abs(sec) < 1) return 'now';
  return sec >= 0 ? fmtDuration(sec) + ' ago' : 'in ' + fmtDuration(-sec);
}

// pretty formats a JSON value for a <pre>.
export function pretty(v) {
  if (v === undefined) return '';
  return JSON.stringify(v, null, 2);
}

// shortID shows the last 12 characters of an id.
export function shortID(id) {
  return id && id.length > 12 ? '…' + id.slice(-12) : (id || '');
}

// coalesce returns a function that runs fn at most once per delay ms,
// delay ms after the first call of a burst, and once more if called while
// fn runs: bursts of events become one reload.
export function coalesce(fn, delay) {
  let timer = null, running = false, again = false;
  const run = async () => {
    timer = null;
    if (running) { again = true; return; }
    running = true;
    try { await fn(); } finally {
      running = false;
      if (again) { again = false; schedule(); }
    }
  };
  const schedule = () => { if (!timer) timer = setTimeout(run, delay); };
  schedule.cancel = () => { clearTimeout(timer); timer = null; again = false; };
  return schedule;
}

// debounce runs fn delay ms after the last call.
export function debounce(fn, delay) {
  let timer = null;
  const d = (...args) => { clearTimeout(timer); timer = setTimeout(() => fn(...args), delay); };
  d.cancel = () => clearTimeout(timer);
  return d;
}

// table builds a scrollable table from header labels and rows of cells.
export function table(headers, rows, opts = {}) {
  return h('div', {class: 'table-wrap'},
    h('table', {class: opts.class, id: opts.id},
      h('thead', null, h('tr', null, headers.map(x => typeof x === 'string' ? h('th', null, x) : x))),
      h('tbody', null, rows)));
}

// field wraps an input with its label and an error line.
export function field(label, input, hint) {
  const id = input.id || ('f-' + (input.name || Math.random().toString(36).slice(2)));
  input.id = id;
  return h('div', {class: 'field', 'data-field': input.name || ''},
    h('label', {for: id}, label), input,
    hint ? h('p', {class: 'hint'}, hint) : null,
    h('p', {class: 'field-error', hidden: true, role: 'alert'}));
}

// showFieldError marks the field of form named like the API's data.field
// ("worker_ids[1]" → worker_ids, "plan.plan_value" → plan.plan_value or
// plan_value) with message; it returns false when no such field exists.
export function showFieldError(form, path, message) {
  clearFieldErrors(form);
  if (!path) return false;
  const candidates = [path, path.replace(/\[\d+\]/g, ''), path.replace(/\[\d+\].*$/, ''), path.split('.').pop(), path.split(/[.[]/)[0]];
  for (const name of candidates) {
    const box = [...form.querySelectorAll('.field')].find(f => f.dataset.field === name);
    if (!box) continue;
    const input = box.querySelector('input, select, textarea');
    if (input) input.setAttribute('aria-invalid', 'true');
    const err = box.querySelector('.field-error');
    err.textContent = message;
    err.hidden = false;
    return true;
  }
  return false;
}

// clearFieldErrors removes every field error of form.
export function clearFieldErrors(form) {
  for (const el of form.querySelectorAll('[aria-invalid="true"]')) el.removeAttribute('aria-invalid');
  for (const el of form.querySelectorAll('.field-error')) { el.textContent = ''; el.hidden = true; }
}

// select builds a <select> of options [value, label] (or plain values).
export function select(name, options, value, attrs = {}) {
  return h('select', {name, ...attrs}, options.map(o => {
    const [v, l] = Array.isArray(o) ? o : [o, o];
    return h('option', {value: v, selected: v === value}, l);
  }));
}

export const STATUSES = ['WAITING', 'SCHEDULED', 'RUNNING', 'SUCCESS', 'FAILED', 'TIMEOUT', 'CANCELED', 'SKIPPED'];
export const TERMINAL = new Set(['SUCCESS', 'FAILED', 'TIMEOUT', 'CANCELED', 'SKIPPED']);
