// The bulk-action bar of the tasks page: what is selected (the tasks
// ticked, or every task matching the filter), the actions, a confirmation
// dialog that states the count, and the job's progress bar, polled from
// GET /api/tasks/bulk/{id} until the job is done.
import {api} from './api.js';
import {h, replace} from './dom.js';

const ACTIONS = [
  ['run_again', 'Run again', 'Run again', ''],
  ['stop', 'Stop', 'Stop', 'danger'],
  ['delete', 'Delete finished', 'Delete the finished ones of', 'danger'],
];
const DONE_WORDS = {run_again: 'Submitted again', stop: 'Stopped', delete: 'Deleted'};

// bulkBar returns {el, update, stop}. selected is the page's Set of ticked
// ids; matching() the number of tasks matching filter; done() is called
// when a job ends.
export function bulkBar({selected, matching, filter, signal, done}) {
  let all = false; // every task matching the filter, not the ticked ones
  let timer = null;
  const info = h('span', {id: 'bulk-selection', class: 'muted'});
  const allButton = h('button', {type: 'button', class: 'link', id: 'select-all-matching', onclick: () => { all = !all; update(); }});
  const buttons = ACTIONS.map(([action, label, , cls]) =>
    h('button', {type: 'button', class: cls || null, 'data-action': action, onclick: () => confirmThen(action)}, label));
  const progress = h('div', {id: 'bulk-progress', hidden: true});
  const dialog = h('dialog', {id: 'bulk-confirm'});
  const el = h('div', {class: 'bulk', id: 'bulk-bar', 'data-needs': 'operate'},
    h('div', {class: 'row'}, info, allButton, h('span', {class: 'bulk-actions row'}, buttons)), progress, dialog);

  function count() { return all ? matching() : selected.size; }

  function update() {
    const n = count();
    info.textContent = all ? `All ${n} tasks matching the filter are selected.` :
      n ? `${n} selected on this page.` : 'Select tasks, or all those matching the filter.';
    allButton.textContent = all ? 'Only the ticked ones' : `Select all ${matching()} matching the filter`;
    for (const b of buttons) b.disabled = n === 0 || timer !== null;
  }

  function confirmThen(action) {
    const [, , verb, cls] = ACTIONS.find(a => a[0] === action);
    const n = count();
    const body = all ? {action, filter} : {action, task_ids: [...selected]};
    replace(dialog,
      h('form', {method: 'dialog'},
        h('p', {id: 'bulk-confirm-text'}, `${verb} ${n} task${n === 1 ? '' : 's'}${all ? ' matching the filter' : ''}?`),
        h('div', {class: 'row'},
          h('button', {value: 'cancel', id: 'bulk-cancel'}, 'Cancel'),
          h('button', {value: 'ok', class: cls || 'primary', id: 'bulk-ok'}, `${verb} ${n}`))));
    dialog.onclose = () => { if (dialog.returnValue === 'ok') start(body, n); };
    dialog.returnValue = '';
    dialog.showModal();
  }

  async function start(body, n) {
    progress.hidden = false;
    replace(progress, h('p', {class: 'muted'}, `Starting on ${n} tasks…`));
    try {
      const job = await api('POST', '/api/tasks/bulk', body, {signal});
      show(job);
      poll(job.id);
    } catch (err) {
      if (err.name !== 'AbortError') replace(progress, h('div', {class: 'error-box', role: 'alert'}, err.message));
    }
  }

  function poll(id) {
    timer = setTimeout(async () => {
      try {
        const job = await api('GET', '/api/tasks/bulk/' + id, undefined, {signal});
        show(job);
        if (job.status === 'running') return poll(id);
        timer = null;
        all = false;
        done();
        update();
      } catch (err) {
        timer = null;
        if (err.name !== 'AbortError') replace(progress, h('div', {class: 'error-box', role: 'alert'}, err.message));
      }
    }, 250);
    update();
  }

  function show(job) {
    const handled = job.done + job.skipped + job.failed;
    const finished = job.status !== 'running';
    replace(progress,
      h('progress', {id: 'bulk-progress-bar', max: Math.max(job.total, 1), value: job.total ? handled : 1,
        'aria-label': 'Bulk action progress'}),
      h('p', {id: 'bulk-progress-text', 'data-status': job.status, role: 'status'},
        finished ? `${DONE_WORDS[job.action]} ${job.done} of ${job.total}` : `${handled} of ${job.total} handled`,
        job.skipped ? ` · ${job.skipped} skipped` : '', job.failed ? ` · ${job.failed} failed` : '',
        job.error ? h('span', {class: 'field-error'}, ' ' + job.error) : ''));
  }

  return {el, update, stop: () => { clearTimeout(timer); timer = null; }};
}
