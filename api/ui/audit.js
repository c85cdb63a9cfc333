// sandboxd web console, the audit page (#audit): the tenant's audit record
// (GET /v1/audit) a page at a time, oldest first as the API gives it, with
// "Load more" following the API's cursor, and filters by run, sandbox and
// time. Any value of a record may come from a tenant's input (a run id in
// a request's path, a conversation), so every one is put in the page as
// text (textContent), never as markup.
'use strict';

const AUDIT_COLS = 11;

const aud = {
  shown: false,   // the page is open
  gen: 0,         // bumped by each new query and by leaving: an older query's late answer is dropped
  query: null,    // URLSearchParams of the records shown, without the cursor
  next: '',       // the cursor of the next page; '' after the last
  count: 0,       // records shown
  loading: false,
};

// routeAudit opens the page (querying afresh) or leaves it.
function routeAudit(on) {
  if (on === aud.shown) return;
  if (!on) { leaveAudit(); return; }
  aud.shown = true;
  $('#audit').hidden = false;
  document.body.classList.add('page-audit');
  loadAudit(true);
}

// leaveAudit hides the page and forgets its records: the next person to
// sign in on this tab must not see them.
function leaveAudit() {
  aud.shown = false;
  aud.gen++;
  aud.query = null;
  aud.next = '';
  aud.count = 0;
  aud.loading = false;
  $('#audit').hidden = true;
  document.body.classList.remove('page-audit');
  $('#audit-log tbody').replaceChildren();
  $('#audit-error').textContent = '';
  $('#audit-empty').hidden = true;
  $('#audit-more').hidden = true;
  $('#audit-state').textContent = '';
}

// auditQuery reads the filters; it throws an Error whose message says
// what to change.
function auditQuery() {
  const q = new URLSearchParams();
  const run = $('#audit-run').value.trim();
  const sandbox = $('#audit-sandbox').value.trim();
  if (run) q.set('run', run);
  if (sandbox) q.set('sandbox', sandbox);
  const times = {};
  for (const [name, label] of [['since', 'Since'], ['until', 'Until']]) {
    const el = $('#audit-' + name);
    if (!el.value) {
      if (el.validity.badInput) throw new Error(label + ' is not a whole date and time; complete it or clear it.');
      continue;
    }
    // A datetime-local value has no zone: the browser reads it as its
    // local time, and the API takes RFC 3339 (UTC here).
    const t = new Date(el.value);
    if (Number.isNaN(t.getTime())) throw new Error(label + ' ' + JSON.stringify(el.value) + ' is not a date and time; pick one or clear it.');
    times[name] = t;
    q.set(name, t.toISOString());
  }
  if (times.since && times.until && times.since >= times.until) {
    throw new Error('Since is not before Until, so no record can match; pick an earlier Since or a later Until.');
  }
  const limit = $('#audit-limit').value.trim();
  if (limit) q.set('limit', limit); // the API says what is wrong with a bad one
  return q;
}

// loadAudit shows the first page of the filters' records (fresh), or the
// next page after those shown.
async function loadAudit(fresh) {
  if (!fresh && (aud.loading || !aud.next)) return;
  const body = $('#audit-log tbody');
  $('#audit-error').textContent = '';
  let q;
  if (fresh) {
    aud.gen++;
    aud.query = null;
    aud.next = '';
    aud.count = 0;
    body.replaceChildren();
    $('#audit-empty').hidden = true;
    $('#audit-more').hidden = true;
    $('#audit-state').textContent = '';
    try {
      q = auditQuery();
    } catch (e) {
      $('#audit-error').textContent = e.message;
      return;
    }
    aud.query = q;
  } else {
    q = new URLSearchParams(aud.query);
    q.set('cursor', aud.next);
  }
  const gen = aud.gen;
  aud.loading = true;
  $('#audit-more').disabled = true;
  $('#audit-state').textContent = 'loading…';
  try {
    const s = q.toString();
    const page = await api('GET', '/v1/audit' + (s ? '?' + s : ''));
    if (gen !== aud.gen) return;
    const recs = (page && page.records) || [];
    for (const r of recs) body.append(auditRow(r));
    aud.count += recs.length;
    aud.next = (page && page.next) || '';
  } catch (e) {
    if (gen !== aud.gen) return;
    if (e.status === 401) { signOut(); return; }
    $('#audit-error').textContent = e.message;
  } finally {
    if (gen === aud.gen) {
      aud.loading = false;
      showAuditState();
    }
  }
}

function showAuditState() {
  const failed = $('#audit-error').textContent !== '';
  $('#audit-empty').hidden = failed || aud.count > 0 || aud.query === null;
  const more = $('#audit-more');
  more.hidden = !aud.next;
  more.disabled = false;
  let s = '';
  if (aud.count > 0) {
    s = aud.count + (aud.count === 1 ? ' record' : ' records') + ', oldest first';
    s += aud.next ? '; Load more shows the newer ones' : (failed ? '' : '; that is all that match');
  }
  $('#audit-state').textContent = s;
}

// auditTime is a record's time in the browser's zone, to the millisecond.
function auditTime(iso) {
  const t = new Date(iso);
  if (Number.isNaN(t.getTime())) return iso || '—';
  const p = (n, w) => String(n).padStart(w || 2, '0');
  return t.getFullYear() + '-' + p(t.getMonth() + 1) + '-' + p(t.getDate()) + ' ' +
    p(t.getHours()) + ':' + p(t.getMinutes()) + ':' + p(t.getSeconds()) + '.' + p(t.getMilliseconds(), 3);
}

function auditRow(r) {
  const tr = document.createElement('tr');
  tr.className = 'audit-row';
  tr.dataset.seq = String(r.seq);
  tr.dataset.kind = String(r.kind);
  tr.tabIndex = 0;
  tr.setAttribute('aria-expanded', 'false');
  const when = document.createElement('td');
  const el = document.createElement('time');
  el.dateTime = r.time || '';
  el.textContent = auditTime(r.time);
  el.title = (r.time || '') + ' (UTC)';
  when.append(el);
  const outcome = textCell(r.outcome);
  outcome.className = 'outcome ' + (r.outcome === 'ok' ? 'ok' : 'not-ok');
  const detail = textCell(r.detail);
  detail.className = 'detail';
  tr.append(when, textCell(r.kind), textCell(r.action), textCell(r.run), textCell(r.sandbox), textCell(r.level),
    outcome, textCell(r.status), textCell(r.kind === 'event' ? '' : duration(r.duration_ms || 0)), textCell(r.approval), detail);
  tr.title = 'record ' + r.seq + ', token ' + (r.token_id || 'none') + ', request ' + (r.request_id || 'none') + ': click for the whole record';
  const toggle = () => {
    const open = tr.nextElementSibling && tr.nextElementSibling.classList.contains('audit-record');
    if (open) tr.nextElementSibling.remove();
    else tr.after(auditRecordRow(r));
    tr.setAttribute('aria-expanded', String(!open));
  };
  tr.addEventListener('click', () => {
    if (String(window.getSelection())) return; // selecting text to copy, not opening
    toggle();
  });
  tr.addEventListener('keydown', (ev) => {
    if (ev.key === 'Enter' || ev.key === ' ') { ev.preventDefault(); toggle(); }
  });
  return tr;
}

// auditRecordRow shows every field of the record, in the API's order.
function auditRecordRow(r) {
  const tr = document.createElement('tr');
  tr.className = 'audit-record';
  const td = document.createElement('td');
  td.colSpan = AUDIT_COLS;
  const dl = document.createElement('dl');
  for (const [k, v] of Object.entries(r)) {
    if (v === undefined || v === null || v === '') continue;
    const dt = document.createElement('dt');
    dt.textContent = k;
    const dd = document.createElement('dd');
    dd.dataset.field = k;
    dd.textContent = typeof v === 'object' ? JSON.stringify(v) : String(v);
    dl.append(dt, dd);
  }
  td.append(dl);
  tr.append(td);
  return tr;
}

document.addEventListener('DOMContentLoaded', () => {
  $('#audit-form').addEventListener('submit', (ev) => {
    ev.preventDefault();
    loadAudit(true);
  });
  $('#audit-more').addEventListener('click', () => loadAudit(false));
});
