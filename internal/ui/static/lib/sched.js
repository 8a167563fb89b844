// What the schedule pages share: reading schedule objects and describing
// their timetable.
import {toDate} from './dom.js';

// sid returns a schedule's id.
export function sid(s) { return s.schedule_id || s.id || ''; }

// times finds the list of instants in a preview or next-fires answer.
export function times(data) {
  if (Array.isArray(data)) return data;
  for (const k of ['times', 'fire_times', 'next', 'fires', 'next_fires']) {
    if (data && Array.isArray(data[k])) return data[k];
  }
  return [];
}

// runsOf finds the list of runs in a runs answer.
export function runsOf(data) {
  if (Array.isArray(data)) return data;
  return (data && (data.runs || data.items)) || [];
}

// nextFire returns a schedule's next fire instant, if any.
export function nextFire(s) {
  return toDate(s.next_fire ?? s.next_fire_time ?? s.next_fire_at ?? 0);
}

export const PLAN_TYPES = ['none', 'time', 'second', 'minute', 'hour', 'day', 'week', 'month'];
const WEEKDAYS = ['Sunday', 'Monday', 'Tuesday', 'Wednesday', 'Thursday', 'Friday', 'Saturday'];

// describe says in words when a schedule fires.
export function describe(s) {
  if (s.cron_expr) return s.cron_expr + (s.timezone && s.timezone !== 'UTC' ? ` (${s.timezone})` : '');
  const p = s.plan;
  if (!p) return '—';
  const rep = p.plan_repet === -1 ? ', forever' : p.plan_repet > 0 ? `, ${p.plan_repet} times` : '';
  switch (p.plan_type) {
    case 'none': return 'once, now';
    case 'time': return 'once at ' + (toDate(p.plan_time) || '?').toLocaleString();
    case 'week': return `every ${WEEKDAYS[p.plan_value] || '?'}${rep}`;
    case 'month': return `monthly on day ${p.plan_value}${rep}`;
    default: return `every ${p.plan_value} ${p.plan_type}${p.plan_value === 1 ? '' : 's'}${rep}`;
  }
}
