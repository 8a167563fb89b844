// The live event stream: one EventSource for the whole app, shared by the
// pages. The browser reconnects on its own with Last-Event-ID; when the
// server answers with an error (e.g. 401) the stream is recreated after a
// pause, resuming from the last ID through ?last_event_id.

export class Live {
  constructor(indicator) {
    this.indicator = indicator;
    this.handlers = new Set();
    this.lastId = '';
    this.es = null;
    this.retryTimer = null;
  }

  // on registers fn(event) for every event; a reset arrives as {type: 'reset'}.
  // It returns the function that unregisters it.
  on(fn) {
    this.handlers.add(fn);
    return () => this.handlers.delete(fn);
  }

  // follow runs first (a page's first load), then calls fn for every
  // event, and returns the function that unregisters fn. The events that
  // arrive while first runs are given to fn, in order, once it is done:
  // first may have read the state from before their change, and a page
  // that registered only after its load lost them (a task submitted while
  // the task list loaded stayed off the list until the next event).
  async follow(first, fn) {
    const early = [];
    const offEarly = this.on((ev) => early.push(ev));
    try { await first(); } finally { offEarly(); }
    const off = this.on(fn);
    for (const ev of early) {
      try { fn(ev); } catch (err) { console.warn('live handler', err); }
    }
    return off;
  }

  emit(ev) {
    for (const fn of [...this.handlers]) {
      try { fn(ev); } catch (err) { console.warn('live handler', err); }
    }
  }

  state(s) {
    if (!this.indicator) return;
    this.indicator.dataset.state = s;
    const label = this.indicator.querySelector('.live-label');
    if (label) label.textContent = s;
  }

  start() {
    clearTimeout(this.retryTimer);
    const url = '/api/events' + (this.lastId ? '?last_event_id=' + encodeURIComponent(this.lastId) : '');
    const es = new EventSource(url);
    this.es = es;
    this.state('connecting');
    const fresh = !this.lastId;
    es.onopen = () => {
      this.state('live');
      // Without a last ID nothing is replayed: changes made between the
      // page's first load and now are unknown, so pages reload once.
      if (fresh && this.es === es) this.emit({type: 'reset'});
    };
    es.onmessage = (m) => {
      if (m.lastEventId) this.lastId = m.lastEventId;
      let ev;
      try { ev = JSON.parse(m.data); } catch { return; }
      this.emit(ev);
    };
    es.addEventListener('reset', (m) => {
      if (m.lastEventId) this.lastId = m.lastEventId;
      this.emit({type: 'reset'});
    });
    es.onerror = () => {
      if (es.readyState === EventSource.CLOSED) {
        // The server refused the stream: try again later with a new one.
        this.state('offline');
        if (es.url && this.es === es) this.retryTimer = setTimeout(() => this.start(), 5000);
      } else {
        this.state('connecting');
      }
    };
  }

  stop() {
    clearTimeout(this.retryTimer);
    if (this.es) this.es.close();
    this.es = null;
  }
}
