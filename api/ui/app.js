// sandboxd web console: answer the questions and permission prompts of a
// space, call a run's tools with their output shown live, watch a run's
// tool calls as they finish, and see the tenant's sandboxes (with their
// resource use) and runs; a sandbox's own page (processes, ports, a
// terminal) is in sandbox.js and terminal.js, the audit page in audit.js.
// The token lives in sessionStorage and travels only in the Authorization
// header: the live stream is read with fetch() streaming, not EventSource
// (which cannot set headers and would need the token in the URL, where
// logs keep it).
'use strict';

const TOKEN_KEY = 'sandboxd.token';
const SPACE_KEY = 'sandboxd.space';
const $ = (sel, root) => (root || document).querySelector(sel);

const state = {
  token: sessionStorage.getItem(TOKEN_KEY) || '',
  space: '',
  stream: null,   // AbortController of the open stream
  retry: 0,       // reconnect attempts since the last good stream
  cards: new Map(), // question id -> {q, el}
  call: null,     // AbortController of the running tool call
  watch: null,    // {run, ctl, seen: Set of seq, retry} of the live call view
  sandboxes: [],  // the last listing, for the stats refresh
  stats: new Map(), // sandbox id -> its last stats answer
};

// ---- times ---------------------------------------------------------------
// Times show relative ("2 min ago") with the local time in the title.

function ago(iso) {
  const t = Date.parse(iso);
  if (Number.isNaN(t)) return '—';
  const s = Math.round((Date.now() - t) / 1000);
  if (s < 5) return 'just now';
  if (s < 60) return s + ' s ago';
  if (s < 3600) return Math.floor(s / 60) + ' min ago';
  if (s < 86400) return Math.floor(s / 3600) + ' h ago';
  return Math.floor(s / 86400) + ' d ago';
}

function timeCell(iso) {
  const td = document.createElement('td');
  const el = document.createElement('time');
  el.dateTime = iso || '';
  el.className = 'ago';
  el.textContent = ago(iso);
  const t = Date.parse(iso);
  if (!Number.isNaN(t)) el.title = new Date(t).toLocaleString();
  td.append(el);
  return td;
}

function tickTimes() {
  document.querySelectorAll('time.ago').forEach((el) => { el.textContent = ago(el.dateTime); });
}

class APIError extends Error {
  constructor(status, message) { super(message); this.status = status; }
}

async function api(method, path, body) {
  const headers = { 'Authorization': 'Bearer ' + state.token, 'Accept': 'application/json' };
  const opts = { method, headers, cache: 'no-store' };
  if (body !== undefined) {
    headers['Content-Type'] = 'application/json';
    opts.body = JSON.stringify(body);
  }
  const resp = await fetch(path, opts);
  const text = await resp.text();
  let data = null;
  try { data = text ? JSON.parse(text) : null; } catch (e) { data = null; }
  if (!resp.ok) {
    const msg = data && data.error ? data.error.message : ('sandboxd answered HTTP ' + resp.status);
    throw new APIError(resp.status, msg);
  }
  return data;
}

// ---- sign in -------------------------------------------------------------

async function signIn(token) {
  state.token = token;
  try {
    const me = await api('GET', '/v1/whoami');
    $('#who').textContent = 'tenant ' + me.tenant;
  } catch (e) {
    state.token = '';
    sessionStorage.removeItem(TOKEN_KEY);
    $('#signin-error').textContent = e.status === 401 ? 'That token is not known to this sandboxd. Check that you pasted the whole token.' : e.message;
    return false;
  }
  sessionStorage.setItem(TOKEN_KEY, token);
  showConsole();
  return true;
}

function signOut() {
  closeStream();
  unwatch();
  leaveSandbox();
  leaveAudit();
  $('#sandbox').hidden = true;
  $('#pages').hidden = true;
  $('#who').textContent = '';
  state.token = '';
  sessionStorage.removeItem(TOKEN_KEY);
  $('#console').hidden = true;
  $('#signout').hidden = true;
  $('#signin').hidden = false;
  $('#token').value = '';
  $('#token').focus();
}

function showConsole() {
  $('#signin').hidden = true;
  $('#signin-error').textContent = '';
  $('#console').hidden = false;
  $('#signout').hidden = false;
  $('#pages').hidden = false;
  const fromHash = new URLSearchParams(location.hash.slice(1)).get('space');
  const space = fromHash || sessionStorage.getItem(SPACE_KEY) || '';
  $('#space').value = space;
  refreshOverview();
  if (space) openSpace(space);
  route();
}

// ---- the question stream ---------------------------------------------------

function setStreamState(text, live) {
  const el = $('#stream-state');
  el.textContent = text;
  el.classList.toggle('live', !!live);
}

function closeStream() {
  if (state.stream) state.stream.abort();
  state.stream = null;
  setStreamState('not connected', false);
}

function openSpace(space) {
  state.space = space;
  state.retry = 0;
  sessionStorage.setItem(SPACE_KEY, space);
  setHashParam('space', space);
  connect();
}

async function connect() {
  if (state.stream) state.stream.abort();
  const ctl = new AbortController();
  state.stream = ctl;
  const space = state.space;
  setStreamState('connecting…', false);
  $('#questions-error').textContent = '';
  try {
    const resp = await fetch('/v1/spaces/' + encodeURIComponent(space) + '/questions', {
      headers: { 'Authorization': 'Bearer ' + state.token, 'Accept': 'text/event-stream' },
      cache: 'no-store',
      signal: ctl.signal,
    });
    if (!resp.ok) {
      let msg = 'sandboxd answered HTTP ' + resp.status;
      try { msg = (await resp.json()).error.message; } catch (e) { /* keep the status */ }
      if (resp.status === 401) { signOut(); $('#signin-error').textContent = msg; return; }
      $('#questions-error').textContent = msg;
      setStreamState('not connected', false);
      if (resp.status === 400 || resp.status === 404) return; // retrying cannot help
      throw new Error(msg);
    }
    // The server sends the open questions first: start from a clean list.
    clearCards();
    setStreamState('connected: you are answering for space ' + space, true);
    state.retry = 0;
    const reader = resp.body.pipeThrough(new TextDecoderStream()).getReader();
    let buf = '';
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buf += value.replace(/\r\n/g, '\n');
      let i;
      while ((i = buf.indexOf('\n\n')) >= 0) {
        handleEvent(buf.slice(0, i));
        buf = buf.slice(i + 2);
      }
    }
  } catch (e) {
    if (ctl.signal.aborted) return;
  }
  if (ctl.signal.aborted || state.stream !== ctl) return;
  const delay = Math.min(10000, 500 * 2 ** state.retry++);
  setStreamState('disconnected; reconnecting in ' + Math.round(delay / 1000) + ' s', false);
  setTimeout(() => { if (state.stream === ctl) connect(); }, delay);
}

function handleEvent(block) {
  let name = '', data = '';
  for (const line of block.split('\n')) {
    if (line.startsWith('event:')) name = line.slice(6).trim();
    else if (line.startsWith('data:')) data += line.slice(5).trim();
  }
  if (!name || !data) return; // comments and heartbeats
  let v;
  try { v = JSON.parse(data); } catch (e) { return; }
  if (name === 'question') addCard(v);
  else if (name === 'resolved') removeCard(v.id);
}

// ---- cards -------------------------------------------------------------------

function clearCards() {
  state.cards.clear();
  $('#cards').replaceChildren();
  updateEmpty();
}

function updateEmpty() {
  $('#no-cards').hidden = state.cards.size > 0;
}

function removeCard(id) {
  const c = state.cards.get(id);
  if (!c) return;
  c.el.remove();
  state.cards.delete(id);
  updateEmpty();
}

function addCard(q) {
  if (state.cards.has(q.id)) return;
  const el = $('#card-template').content.firstElementChild.cloneNode(true);
  el.dataset.id = q.id;
  el.classList.add('kind-' + q.kind); // not the kind itself: .prompt-like names style parts of a card
  $('.kind', el).textContent = q.kind === 'permission' ? 'permission' : 'question';
  $('.run', el).textContent = 'run ' + q.run;
  $('.prompt', el).textContent = q.question;
  $('.context', el).textContent = q.context || '';
  const opts = $('.options', el);
  const boxes = [];
  (q.options || []).forEach((o, i) => {
    const n = i + 1;
    const li = document.createElement('li');
    if (q.multi_select) {
      const label = document.createElement('label');
      const box = document.createElement('input');
      box.type = 'checkbox';
      box.value = String(n);
      box.className = 'choice';
      boxes.push(box);
      label.append(box, ' ', numbered(n, o.label));
      li.append(label);
    } else {
      const b = document.createElement('button');
      b.type = 'button';
      b.className = 'option';
      b.dataset.choice = String(n);
      b.append(numbered(n, o.label));
      b.addEventListener('click', () => answer(q.id, { choices: [n] }, el));
      li.append(b);
    }
    if (o.description) {
      const d = document.createElement('span');
      d.className = 'desc';
      d.textContent = o.description;
      li.append(d);
    }
    opts.append(li);
  });
  // One Send for what the buttons cannot say alone: the checked choices
  // of a multi-select card and the typed text, together.
  if (q.allow_free_text) $('.free', el).hidden = false;
  if (q.multi_select || q.allow_free_text) {
    const send = $('.send', el);
    send.hidden = false;
    send.addEventListener('click', () => {
      const body = {};
      if (q.multi_select) body.choices = boxes.filter((b) => b.checked).map((b) => Number(b.value));
      const text = q.allow_free_text ? $('.free-text', el).value.trim() : '';
      if (text) body.text = text;
      if (!text && !(body.choices && body.choices.length)) {
        $('.card-error', el).textContent = q.multi_select ? 'Tick at least one choice' + (q.allow_free_text ? ' or type an answer' : '') + ', then Send.' : 'Type an answer, then Send.';
        return;
      }
      answer(q.id, body, el);
    });
  }
  $('.skip', el).addEventListener('click', () => answer(q.id, { skip: true }, el));
  state.cards.set(q.id, { q, el });
  $('#cards').append(el);
  tickExpiry();
  updateEmpty();
}

function numbered(n, label) {
  const f = document.createDocumentFragment();
  const num = document.createElement('span');
  num.className = 'num';
  num.textContent = n + '.';
  f.append(num, ' ', label);
  return f;
}

async function answer(id, body, el) {
  const err = $('.card-error', el);
  err.textContent = '';
  el.querySelectorAll('button').forEach((b) => { b.disabled = true; });
  try {
    await api('POST', '/v1/questions/' + encodeURIComponent(id) + '/answer', body);
    removeCard(id);
  } catch (e) {
    if (e.status === 409 || e.status === 404) {
      removeCard(id);
      $('#questions-error').textContent = e.message;
      return;
    }
    err.textContent = e.message; // a 400 leaves the question open: fix and resend
    el.querySelectorAll('button').forEach((b) => { b.disabled = false; });
  }
}

function tickExpiry() {
  const now = Date.now();
  for (const { q, el } of state.cards.values()) {
    const s = Math.max(0, Math.round((Date.parse(q.expires_at) - now) / 1000));
    $('.expires', el).textContent = 'expires in ' + (s >= 60 ? Math.floor(s / 60) + ' min ' + (s % 60) + ' s' : s + ' s');
  }
}

// ---- tool calls ------------------------------------------------------------------
// A call is made with Accept: text/event-stream: its output shows while it
// runs, then its result. A call that fails before it streams anything (an
// unknown run or tool) answers plain JSON with its HTTP status. Stop drops
// the connection, which ends the call as it ends a plain call whose client
// went away.

// readSSE calls onEvent(name, data) for each event of a fetch() answer;
// comments (heartbeats) are skipped.
async function readSSE(resp, onEvent) {
  const reader = resp.body.pipeThrough(new TextDecoderStream()).getReader();
  let buf = '';
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buf += value.replace(/\r\n/g, '\n');
    let i;
    while ((i = buf.indexOf('\n\n')) >= 0) {
      const block = buf.slice(0, i);
      buf = buf.slice(i + 2);
      let name = '', data = '';
      for (const line of block.split('\n')) {
        if (line.startsWith('event:')) name = line.slice(6).trim();
        else if (line.startsWith('data:')) data += line.slice(5).replace(/^ /, '');
      }
      if (name) onEvent(name, data);
    }
  }
}

function showResult(res) {
  const el = $('#call-result');
  el.classList.toggle('is-error', !!res.is_error);
  el.textContent = (res.content || []).map((b) => b.type === 'text' ? b.text : '[' + b.type + ' ' + (b.mime_type || '') + ']').join('\n');
}

async function callTool() {
  const run = $('#call-run').value.trim();
  const tool = $('#call-tool').value.trim();
  let args;
  try {
    args = JSON.parse($('#call-args').value.trim() || '{}');
  } catch (e) {
    $('#call-error').textContent = 'The arguments are not valid JSON: ' + e.message + '; give one object such as {"command": "ls"}.';
    return;
  }
  const out = $('#call-output');
  out.replaceChildren();
  $('#call-result').textContent = '';
  $('#call-error').textContent = '';
  const ctl = new AbortController();
  state.call = ctl;
  $('#call-go').disabled = true;
  $('#call-stop').hidden = false;
  $('#call-state').textContent = 'running…';
  let ended = false;
  try {
    const resp = await fetch('/v1/runs/' + encodeURIComponent(run) + '/tools/' + encodeURIComponent(tool), {
      method: 'POST',
      headers: { 'Authorization': 'Bearer ' + state.token, 'Accept': 'text/event-stream', 'Content-Type': 'application/json' },
      body: JSON.stringify(args),
      cache: 'no-store',
      signal: ctl.signal,
    });
    if (!(resp.headers.get('Content-Type') || '').startsWith('text/event-stream')) {
      const data = await resp.json().catch(() => null);
      if (!resp.ok) throw new APIError(resp.status, data && data.error ? data.error.message : 'sandboxd answered HTTP ' + resp.status);
      showResult(data);
      ended = true;
      return;
    }
    await readSSE(resp, (name, data) => {
      let v;
      try { v = JSON.parse(data); } catch (e) { return; }
      if (name === 'output') {
        const span = document.createElement('span');
        if (v.stream === 'stderr') span.className = 'stderr';
        span.textContent = v.text;
        const atEnd = out.scrollTop + out.clientHeight >= out.scrollHeight - 4;
        out.append(span);
        if (atEnd) out.scrollTop = out.scrollHeight;
      } else if (name === 'result') {
        showResult(v);
        ended = true;
      } else if (name === 'error') {
        $('#call-error').textContent = v.error.message + ' (HTTP ' + v.status + ')';
        ended = true;
      }
    });
    if (!ended) $('#call-error').textContent = 'The stream ended before the result; the call may have run, check its effects before retrying.';
  } catch (e) {
    if (e.status === 401) { signOut(); return; }
    $('#call-error').textContent = ctl.signal.aborted ? 'Stopped: the call was ended.' : e.message;
  } finally {
    if (state.call === ctl) state.call = null;
    $('#call-go').disabled = false;
    $('#call-stop').hidden = true;
    $('#call-state').textContent = ended ? 'done' : '';
  }
}

// ---- overview ------------------------------------------------------------------

function emptyRow(body, cols) {
  const tr = document.createElement('tr');
  const td = document.createElement('td');
  td.colSpan = cols;
  td.className = 'muted';
  td.textContent = 'none';
  tr.append(td);
  body.append(tr);
}

function textCell(v) {
  const td = document.createElement('td');
  td.textContent = v === undefined || v === null || v === '' ? '—' : String(v);
  return td;
}

function fillSandboxes(rows) {
  const body = $('#sandboxes tbody');
  body.replaceChildren();
  if (!rows.length) { emptyRow(body, 8); return; }
  for (const r of rows) {
    const tr = document.createElement('tr');
    tr.dataset.id = r.id;
    const idCell = document.createElement('td');
    const open = document.createElement('a');
    open.className = 'open';
    open.href = sandboxHref(r.id);
    open.title = 'its processes, ports and a terminal';
    open.textContent = r.id;
    idCell.append(open);
    tr.append(idCell, textCell(r.conversation), textCell(r.backend), textCell(r.state), timeCell(r.created_at));
    for (const c of ['cpu', 'mem', 'pids']) {
      const td = document.createElement('td');
      td.className = 'stat-' + c;
      tr.append(td);
    }
    body.append(tr);
    showStats(r.id);
  }
}

function fillRuns(rows) {
  const body = $('#runs tbody');
  body.replaceChildren();
  if (!rows.length) { emptyRow(body, 7); return; }
  for (const r of rows) {
    const tr = document.createElement('tr');
    tr.dataset.id = r.id;
    tr.append(textCell(r.id), textCell(r.conversation), textCell(r.surface), textCell(r.approval), textCell(r.space), textCell(r.parent));
    const td = document.createElement('td');
    const b = document.createElement('button');
    b.type = 'button';
    b.className = 'watch';
    b.textContent = 'Watch calls';
    b.addEventListener('click', () => watchRun(r.id));
    td.append(b);
    tr.append(td);
    body.append(tr);
  }
}

async function refreshOverview() {
  $('#overview-error').textContent = '';
  try {
    const [sandboxes, runs] = await Promise.all([api('GET', '/v1/sandboxes'), api('GET', '/v1/runs')]);
    state.sandboxes = sandboxes;
    fillSandboxes(sandboxes);
    fillRuns(runs);
    $('#known-runs').replaceChildren(...runs.map((r) => { const o = document.createElement('option'); o.value = r.id; o.label = r.conversation; return o; }));
    const spaces = [...new Set(runs.map((r) => r.space).filter(Boolean))].sort();
    const dl = $('#known-spaces');
    dl.replaceChildren(...spaces.map((s) => { const o = document.createElement('option'); o.value = s; return o; }));
    refreshStats();
  } catch (e) {
    if (e.status === 401) { signOut(); return; }
    $('#overview-error').textContent = e.message;
  }
}

// ---- resource use ------------------------------------------------------------------
// Each sandbox's CPU, memory and pids, read from the engine every few
// seconds while the page is open and visible.

function bytes(n) {
  if (n >= 1 << 30) return (n / (1 << 30)).toFixed(1) + ' GiB';
  if (n >= 1 << 20) return (n / (1 << 20)).toFixed(1) + ' MiB';
  if (n >= 1 << 10) return (n / (1 << 10)).toFixed(0) + ' KiB';
  return n + ' B';
}

function showStats(id) {
  const tr = document.querySelector('#sandboxes tbody tr[data-id="' + CSS.escape(id) + '"]');
  if (!tr) return;
  const st = state.stats.get(id);
  const cpu = $('.stat-cpu', tr), mem = $('.stat-mem', tr), pids = $('.stat-pids', tr);
  for (const td of [cpu, mem, pids]) { td.classList.remove('na'); td.title = ''; }
  if (!st) {
    const read = state.sandboxes.slice(0, 50).some((sb) => sb.id === id);
    cpu.textContent = mem.textContent = pids.textContent = read ? '…' : '—';
    if (!read) cpu.title = 'resource use is read for the first 50 sandboxes only';
    return;
  }
  if (!st.available) {
    cpu.textContent = 'not available';
    mem.textContent = pids.textContent = '';
    for (const td of [cpu, mem, pids]) { td.classList.add('na'); td.title = st.reason || ''; }
    return;
  }
  cpu.textContent = st.cpu_percent.toFixed(1) + ' %';
  mem.textContent = bytes(st.memory_bytes) + (st.memory_limit_bytes ? ' / ' + bytes(st.memory_limit_bytes) : '');
  pids.textContent = String(st.pids);
  const at = new Date(Date.parse(st.read_at)).toLocaleTimeString();
  for (const td of [cpu, mem, pids]) td.title = 'read at ' + at;
}

let statsBusy = false;
async function refreshStats() {
  if (statsBusy || !state.token || document.hidden) return;
  statsBusy = true;
  try {
    // Each reading costs the engine about a second of sampling: the first
    // 50 sandboxes only, one round at a time.
    await Promise.all(state.sandboxes.slice(0, 50).map(async (sb) => {
      try {
        state.stats.set(sb.id, await api('GET', '/v1/sandboxes/' + encodeURIComponent(sb.id) + '/stats'));
      } catch (e) {
        state.stats.set(sb.id, { available: false, reason: e.message });
      }
      showStats(sb.id);
    }));
  } finally {
    statsBusy = false;
  }
}

// ---- a run's tool calls, live ------------------------------------------------------
// GET /v1/runs/{id}/calls as a stream: the recent calls first, then each
// call as it finishes. A stream that ends (the server dropped a reader too
// slow, or a restart) reconnects; calls already shown are skipped by seq.

function unwatch() {
  if (state.watch) state.watch.ctl.abort();
  state.watch = null;
}

function watchRun(run) {
  unwatch();
  state.watch = { run, ctl: null, seen: new Set(), retry: 0 };
  $('#calls-run').textContent = run;
  $('#call-log tbody').replaceChildren();
  $('#calls-error').textContent = '';
  streamCalls(state.watch);
  $('#calls').scrollIntoView({ block: 'nearest' });
}

function setCallsState(text, live) {
  const el = $('#calls-state');
  el.textContent = text;
  el.classList.toggle('live', !!live);
}

async function streamCalls(w) {
  const ctl = new AbortController();
  w.ctl = ctl;
  setCallsState('connecting…', false);
  try {
    const resp = await fetch('/v1/runs/' + encodeURIComponent(w.run) + '/calls', {
      headers: { 'Authorization': 'Bearer ' + state.token, 'Accept': 'text/event-stream' },
      cache: 'no-store',
      signal: ctl.signal,
    });
    if (!resp.ok) {
      let msg = 'sandboxd answered HTTP ' + resp.status;
      try { msg = (await resp.json()).error.message; } catch (e) { /* keep the status */ }
      if (resp.status === 401) { signOut(); return; }
      $('#calls-error').textContent = msg;
      setCallsState('not connected', false);
      if (resp.status === 404) return; // the run ended: retrying cannot help
      throw new Error(msg);
    }
    setCallsState('live', true);
    w.retry = 0;
    await readSSE(resp, (name, data) => {
      if (name !== 'call') return;
      let c;
      try { c = JSON.parse(data); } catch (e) { return; }
      addCallRow(w, c);
    });
  } catch (e) {
    if (ctl.signal.aborted) return;
  }
  if (ctl.signal.aborted || state.watch !== w) return;
  const delay = Math.min(10000, 500 * 2 ** w.retry++);
  setCallsState('disconnected; reconnecting', false);
  setTimeout(() => { if (state.watch === w) streamCalls(w); }, delay);
}

function duration(ms) {
  if (ms < 1) return '<1 ms';
  if (ms < 1000) return Math.round(ms) + ' ms';
  if (ms < 60000) return (ms / 1000).toFixed(1) + ' s';
  return Math.floor(ms / 60000) + ' min ' + Math.round((ms % 60000) / 1000) + ' s';
}

function addCallRow(w, c) {
  if (w.seen.has(c.seq)) return;
  w.seen.add(c.seq);
  const body = $('#call-log tbody');
  const tr = document.createElement('tr');
  tr.dataset.seq = String(c.seq);
  const out = textCell(c.outcome);
  out.className = 'outcome-' + c.outcome;
  const args = textCell(c.args);
  args.className = 'args';
  const diag = textCell(c.diagnostics === undefined ? '' : c.diagnostics + ' new');
  diag.className = 'diagnostics';
  tr.append(timeCell(c.started_at), textCell(c.tool), args, textCell(duration(c.duration_ms)), out, diag);
  tr.title = 'call ' + c.seq + ' of this run (level ' + c.level + ')';
  // Newest first; at most 200 rows, as the server keeps.
  body.prepend(tr);
  while (body.rows.length > 200) body.deleteRow(body.rows.length - 1);
  tr.classList.add('fresh');
  setTimeout(() => tr.classList.remove('fresh'), 3000);
}

// ---- start -----------------------------------------------------------------------

document.addEventListener('DOMContentLoaded', () => {
  $('#signin-form').addEventListener('submit', (ev) => {
    ev.preventDefault();
    signIn($('#token').value.trim());
  });
  $('#signout').addEventListener('click', signOut);
  $('#space-form').addEventListener('submit', (ev) => {
    ev.preventDefault();
    const s = $('#space').value.trim();
    if (s) openSpace(s);
  });
  $('#refresh').addEventListener('click', refreshOverview);
  $('#call-form').addEventListener('submit', (ev) => {
    ev.preventDefault();
    if (!state.call) callTool();
  });
  $('#call-stop').addEventListener('click', () => { if (state.call) state.call.abort(); });
  setInterval(tickExpiry, 1000);
  setInterval(tickTimes, 10000);
  setInterval(() => { if (state.token) refreshOverview(); }, 15000);
  setInterval(refreshStats, 5000);
  if (state.token) signIn(state.token); else signOut();
});
