// sandboxd web console, the page router, and a sandbox's page
// (#sandbox=ID): its long-lived processes with the output of one of them
// live, its listening ports with preview links, and a terminal (a pty
// process driven by xterm.js).
//
// Each live output is one streaming fetch(), and a browser keeps at most six
// connections to one origin over HTTP/1.1: the page streams the terminal
// and one process's output at a time, besides the question stream, so the
// API calls still get through.
'use strict';

const TERM_KEY = 'sandboxd.terminal.'; // + sandbox id -> process id, kept across reloads
const OUTPUT_CAP = 1 << 20;            // characters of a process's output kept on the page

const sbx = {
  id: '',          // the sandbox shown
  procs: [],       // its last process listing
  view: null,      // {pid, ctl, cursor, retry} of the output shown
  term: null,      // {pid, ctl, cursor, retry, sending, queue} of the terminal's process
  xterm: null,     // the Terminal, made once
  fit: null,       // its fit addon
  resizeTimer: 0,
  timer: 0,        // the listings' refresh
};

const utf8 = new TextEncoder();
const sbPath = (rest) => '/v1/sandboxes/' + encodeURIComponent(sbx.id) + rest;

// ---- the page --------------------------------------------------------------------

function hashParams() { return new URLSearchParams(location.hash.slice(1)); }

function setHashParam(key, value) {
  const p = hashParams();
  if (value) p.set(key, value); else p.delete(key);
  const s = p.toString();
  history.replaceState(null, '', s ? '#' + s : location.pathname + location.search);
  navLinks();
}

function sandboxHref(id) {
  const p = hashParams();
  p.set('sandbox', id);
  return '#' + p.toString();
}

// route shows the page the address names: the audit record (#audit), a
// sandbox's (#sandbox=ID), or the overview. The questions stay on every
// page: a person answering them should not miss one while looking around.
function route() {
  const p = state.token ? hashParams() : new URLSearchParams();
  const audit = state.token !== '' && p.has('audit');
  const id = audit ? '' : (p.get('sandbox') || '');
  for (const sel of ['#call', '#overview', '#calls']) $(sel).hidden = audit || !!id;
  $('#sandbox').hidden = !id;
  navLinks();
  routeAudit(audit);
  routeSandbox(id);
}

// navLinks points the header's links at the overview and the audit page,
// keeping the address's other parameters (the space).
function navLinks() {
  const audit = hashParams().has('audit');
  const to = (page) => {
    const p = hashParams();
    p.delete('sandbox');
    p.delete('audit');
    const rest = p.toString();
    if (page) return '#audit' + (rest ? '&' + rest : '');
    return '#' + rest;
  };
  $('#nav-console').href = to(false);
  $('#nav-audit').href = to(true);
  $('#nav-audit').classList.toggle('current', audit);
  $('#nav-console').classList.toggle('current', !audit);
}

// routeSandbox shows sandbox id's page ("": none).
function routeSandbox(id) {
  if (id === sbx.id) return;
  leaveSandbox();
  if (!id) return;
  sbx.id = id;
  $('#sb-id').textContent = id;
  $('#sb-conv').textContent = '';
  for (const sel of ['#sb-error', '#procs-error', '#ports-error', '#term-error']) $(sel).textContent = '';
  $('#procs tbody').replaceChildren();
  $('#ports tbody').replaceChildren();
  refreshSandbox();
  sbx.timer = setInterval(() => { if (!document.hidden) refreshSandbox(); }, 3000);
  const pid = localStorage.getItem(TERM_KEY + id);
  if (pid) attachTerminal(pid);
  else setTermState('no terminal yet: Open terminal starts a shell in the sandbox', false);
}

function leaveSandbox() {
  clearInterval(sbx.timer);
  closeOutput();
  detachTerminal();
  sbx.id = '';
  sbx.procs = [];
}

async function refreshSandbox() {
  const id = sbx.id;
  try {
    const info = await api('GET', sbPath(''));
    if (id !== sbx.id) return;
    $('#sb-conv').textContent = 'conversation ' + info.conversation + ', ' + info.backend + ', ' + info.state;
    $('#sb-error').textContent = '';
  } catch (e) {
    if (e.status === 401) { signOut(); return; }
    if (id === sbx.id) $('#sb-error').textContent = e.message;
    return;
  }
  await Promise.all([refreshProcesses(), refreshPorts()]);
}

// ---- processes ---------------------------------------------------------------------

async function refreshProcesses() {
  const id = sbx.id;
  try {
    const list = await api('GET', sbPath('/processes'));
    if (id !== sbx.id) return;
    sbx.procs = list;
    fillProcesses(list);
    $('#procs-error').textContent = '';
  } catch (e) {
    if (e.status === 401) { signOut(); return; }
    if (id === sbx.id) $('#procs-error').textContent = e.message;
  }
}

function smallButton(label, cls, onClick) {
  const b = document.createElement('button');
  b.type = 'button';
  b.className = 'watch ' + cls;
  b.textContent = label;
  b.addEventListener('click', onClick);
  return b;
}

function fillProcesses(list) {
  const body = $('#procs tbody');
  body.replaceChildren();
  if (!list.length) { emptyRow(body, 5); return; }
  // Newest first: the one just started is at the top.
  for (const p of [...list].reverse()) {
    const tr = document.createElement('tr');
    tr.dataset.id = p.id;
    tr.classList.toggle('shown', !!sbx.view && sbx.view.pid === p.id);
    const status = textCell(p.status);
    status.className = 'status state-' + p.state;
    const cmd = textCell(p.command + (p.pty ? '  (terminal)' : ''));
    cmd.className = 'command';
    const act = document.createElement('td');
    act.className = 'actions';
    act.append(smallButton('Output', 'show-output', () => showOutput(p.id)));
    if (p.pty && p.state === 'running' && (!sbx.term || sbx.term.pid !== p.id)) {
      act.append(' ', smallButton('Attach terminal', 'attach', () => attachTerminal(p.id)));
    }
    if (p.state === 'running') act.append(' ', smallButton('Kill', 'kill', () => killProcess(p.id)));
    tr.append(textCell(p.id), status, cmd, timeCell(p.started_at), act);
    body.append(tr);
  }
}

async function startProcess(command) {
  $('#procs-error').textContent = '';
  try {
    const p = await api('POST', sbPath('/processes'), { command });
    $('#proc-command').value = '';
    await refreshProcesses();
    showOutput(p.id);
  } catch (e) {
    if (e.status === 401) { signOut(); return; }
    $('#procs-error').textContent = e.message;
  }
}

async function killProcess(pid) {
  $('#procs-error').textContent = '';
  try {
    await api('DELETE', sbPath('/processes/' + encodeURIComponent(pid)));
  } catch (e) {
    if (e.status === 401) { signOut(); return; }
    $('#procs-error').textContent = e.message;
  }
  refreshProcesses();
}

// followOutput streams a process's output from s.cursor (a byte offset),
// calling onChunk(bytes, stream) with only the bytes past the cursor, so a
// reconnect neither repeats nor skips; onDropped(n) when the start of the
// output was no longer kept; onExit(exit). It reconnects while s is live
// and returns once the process exited or s was aborted.
async function followOutput(s, setState, on) {
  while (!s.ctl.signal.aborted) {
    let ended = false;
    try {
      const resp = await fetch(sbPath('/processes/' + encodeURIComponent(s.pid) + '/output?since=' + s.cursor), {
        headers: { 'Authorization': 'Bearer ' + state.token, 'Accept': 'text/event-stream' },
        cache: 'no-store',
        signal: s.ctl.signal,
      });
      if (!resp.ok) {
        let msg = 'sandboxd answered HTTP ' + resp.status;
        try { msg = (await resp.json()).error.message; } catch (e) { /* keep the status */ }
        if (resp.status === 401) { signOut(); return; }
        if (resp.status === 400 || resp.status === 404) { on.gone(msg); return; } // retrying cannot help
        throw new Error(msg);
      }
      setState('live', true);
      s.retry = 0;
      await readSSE(resp, (name, data) => {
        let v;
        try { v = JSON.parse(data); } catch (e) { return; }
        if (name === 'output') {
          const all = utf8.encode(v.text);
          if (v.offset + all.length <= s.cursor) return;
          const b = v.offset < s.cursor ? all.subarray(s.cursor - v.offset) : all;
          s.cursor = v.offset + all.length;
          on.chunk(b, v.stream);
        } else if (name === 'dropped') {
          on.dropped(v.bytes);
        } else if (name === 'exit') {
          ended = true;
          on.exit(v);
        } else if (name === 'error') {
          setState(v.error.message, false);
        }
      });
    } catch (e) {
      if (s.ctl.signal.aborted) return;
      setState('disconnected: ' + e.message, false);
    }
    if (ended || s.ctl.signal.aborted) return;
    const delay = Math.min(10000, 500 * 2 ** s.retry++);
    setState('disconnected; reconnecting', false);
    await new Promise((r) => setTimeout(r, delay));
  }
}

function setViewState(text, live) {
  const el = $('#proc-view-state');
  el.textContent = text;
  el.classList.toggle('live', !!live);
}

function closeOutput() {
  if (sbx.view) sbx.view.ctl.abort();
  sbx.view = null;
  $('#proc-view').hidden = true;
  $('#proc-output').replaceChildren();
}

function showOutput(pid) {
  closeOutput();
  const s = { pid, ctl: new AbortController(), cursor: 0, retry: 0 };
  sbx.view = s;
  $('#proc-view').hidden = false;
  $('#proc-view-id').textContent = pid;
  const p = sbx.procs.find((q) => q.id === pid);
  $('#proc-view-cmd').textContent = p ? p.command : '';
  document.querySelectorAll('#procs tbody tr').forEach((tr) => tr.classList.toggle('shown', tr.dataset.id === pid));
  setViewState('connecting…', false);
  const out = $('#proc-output');
  const dec = { stdout: new TextDecoder(), stderr: new TextDecoder(), pty: new TextDecoder() };
  let kept = 0;
  const add = (text, cls) => {
    const span = document.createElement('span');
    if (cls) span.className = cls;
    span.textContent = text;
    const atEnd = out.scrollTop + out.clientHeight >= out.scrollHeight - 4;
    out.append(span);
    kept += text.length;
    while (kept > OUTPUT_CAP && out.firstChild) {
      kept -= out.firstChild.textContent.length;
      out.firstChild.remove();
    }
    if (atEnd) out.scrollTop = out.scrollHeight;
  };
  followOutput(s, (t, live) => { if (sbx.view === s) setViewState(t, live); }, {
    chunk: (b, stream) => add((dec[stream] || dec.stdout).decode(b, { stream: true }), stream === 'stderr' ? 'stderr' : ''),
    dropped: (n) => add('[' + bytes(n) + ' of earlier output no longer kept]\n', 'note'),
    exit: (x) => { if (sbx.view === s) setViewState(x.status, false); refreshProcesses(); },
    gone: (msg) => { if (sbx.view === s) setViewState(msg, false); },
  });
}

// ---- ports and previews ------------------------------------------------------------

async function refreshPorts() {
  const id = sbx.id;
  try {
    const list = await api('GET', sbPath('/ports'));
    if (id !== sbx.id) return;
    fillPorts(list || []);
    $('#ports-error').textContent = '';
  } catch (e) {
    if (e.status === 401) { signOut(); return; }
    if (id === sbx.id) $('#ports-error').textContent = e.message;
  }
}

function fillPorts(list) {
  const body = $('#ports tbody');
  // Keep a row's link to its preview across refreshes.
  const links = new Map([...body.querySelectorAll('tr[data-port]')].map((tr) => [tr.dataset.port, $('.preview-link', tr)]));
  body.replaceChildren();
  if (!list.length) { emptyRow(body, 4); return; }
  for (const l of list) {
    const tr = document.createElement('tr');
    tr.dataset.port = String(l.port);
    const proc = l.pid ? l.pid + ' ' + (l.command || '') : '';
    const act = document.createElement('td');
    act.append(smallButton('Open preview', 'preview', () => openPreview(l.port, act)));
    const link = links.get(String(l.port));
    if (link) act.append(' ', link);
    tr.append(textCell(l.port), textCell(l.address), textCell(proc), act);
    body.append(tr);
  }
}

// openPreview makes a link to the port (valid without the token, for the
// link's lifetime) and opens it in a new tab; the link also stays on the
// row, for a browser that blocked the tab.
async function openPreview(port, cell) {
  $('#ports-error').textContent = '';
  try {
    const p = await api('POST', sbPath('/previews'), { port });
    window.open(p.url, '_blank', 'noopener,noreferrer');
    let a = $('.preview-link', cell);
    if (!a) {
      a = document.createElement('a');
      a.className = 'preview-link';
      a.target = '_blank';
      a.rel = 'noopener noreferrer';
      cell.append(' ', a);
    }
    a.href = p.url;
    a.textContent = p.url;
    a.title = 'valid until ' + new Date(Date.parse(p.expires_at)).toLocaleString();
  } catch (e) {
    if (e.status === 401) { signOut(); return; }
    $('#ports-error').textContent = e.message;
  }
}

document.addEventListener('DOMContentLoaded', () => {
  window.addEventListener('hashchange', route);
  $('#sb-back').addEventListener('click', (ev) => {
    ev.preventDefault();
    setHashParam('sandbox', '');
    route();
    refreshOverview();
  });
  $('#proc-form').addEventListener('submit', (ev) => {
    ev.preventDefault();
    const c = $('#proc-command').value.trim();
    if (c) startProcess(c);
  });
  $('#term-new').addEventListener('click', () => openTerminal('bash'));
});
