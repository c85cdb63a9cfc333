// sandboxd web console, a sandbox's terminal: a pty process running a shell
// in the sandbox, drawn by xterm.js (vendored by make build). Keystrokes go
// to the process's input, its output stream is written to the terminal, and
// a new size of the page's terminal is the process's new size. The process
// id is kept in localStorage per sandbox, so a reload attaches to the same
// shell and replays its output from the start the agent still keeps.
'use strict';

function setTermState(text, live) {
  const el = $('#term-state');
  el.textContent = text;
  el.classList.toggle('live', !!live);
}

// makeTerminal creates the page's xterm once; false when this sandboxd was
// built without it.
function makeTerminal() {
  if (sbx.xterm) return true;
  if (typeof Terminal !== 'function') {
    $('#term-error').textContent = window.sandboxdTerminalMissing || 'terminal unavailable: run make build';
    return false;
  }
  const term = new Terminal({
    cursorBlink: true,
    fontFamily: 'ui-monospace, monospace',
    fontSize: 13,
    scrollback: 5000,
    theme: { background: '#1d1d1f', foreground: '#e8e8e8' },
  });
  sbx.xterm = term;
  if (window.FitAddon) {
    sbx.fit = new FitAddon.FitAddon();
    term.loadAddon(sbx.fit);
  }
  term.open($('#terminal'));
  term.onData((d) => sendInput(d));
  term.onResize((size) => {
    clearTimeout(sbx.resizeTimer);
    sbx.resizeTimer = setTimeout(() => resizeProcess(size), 150);
  });
  new ResizeObserver(() => fitTerminal()).observe($('#terminal'));
  // For tests and for people debugging: the terminal's text, row by row.
  window.sandboxdTerminal = {
    text() {
      const b = term.buffer.active, rows = [];
      for (let i = 0; i < b.length; i++) rows.push(b.getLine(i).translateToString(true));
      return rows.join('\n');
    },
    pid: () => (sbx.term ? sbx.term.pid : ''),
    size: () => ({ rows: term.rows, cols: term.cols }),
    // The size the process was last told, once sandboxd took it.
    applied: () => (sbx.term && sbx.term.applied) || null,
  };
  return true;
}

// showTerminal shows the terminal's box, laid out before xterm measures it.
function showTerminal() {
  $('#terminal-box').hidden = false;
  if (!makeTerminal()) {
    $('#terminal-box').hidden = true;
    return false;
  }
  fitTerminal();
  return true;
}

function fitTerminal() {
  if (!sbx.fit || $('#terminal-box').hidden) return;
  try { sbx.fit.fit(); } catch (e) { /* not laid out yet */ }
}

function detachTerminal() {
  if (sbx.term) sbx.term.ctl.abort();
  sbx.term = null;
  $('#terminal-box').hidden = true;
  $('#term-new').textContent = 'Open terminal';
  setTermState('', false);
}

// openTerminal starts a shell on a terminal of the page's size: bash, or
// sh in an image without bash.
async function openTerminal(shell) {
  shell = shell || 'bash';
  $('#term-error').textContent = '';
  if (!showTerminal()) return;
  const size = { rows: sbx.xterm.rows, cols: sbx.xterm.cols };
  try {
    const p = await api('POST', sbPath('/processes'), { command: shell, pty: size });
    localStorage.setItem(TERM_KEY + sbx.id, p.id);
    attachTerminal(p.id, shell);
    refreshProcesses();
  } catch (e) {
    if (e.status === 401) { signOut(); return; }
    $('#term-error').textContent = e.message;
  }
}

// attachTerminal shows the terminal process pid: its whole kept output,
// then what it prints, and the page's keystrokes go to it.
function attachTerminal(pid, shell) {
  if (!showTerminal()) return;
  if (sbx.term) sbx.term.ctl.abort();
  const s = { pid, shell, ctl: new AbortController(), cursor: 0, retry: 0, sending: false, queue: '' };
  sbx.term = s;
  localStorage.setItem(TERM_KEY + sbx.id, pid);
  $('#term-new').textContent = 'New terminal';
  $('#term-pid').textContent = pid;
  $('#term-error').textContent = '';
  const term = sbx.xterm;
  term.reset();
  fitTerminal();
  term.focus();
  setTermState('connecting…', false);
  resizeProcess({ rows: term.rows, cols: term.cols });
  const mine = (t, live) => { if (sbx.term === s) setTermState(t, live); };
  followOutput(s, mine, {
    chunk: (b) => { if (sbx.term === s) term.write(b); },
    dropped: (n) => { if (sbx.term === s) term.write('\x1b[2m[' + bytes(n) + ' of earlier output no longer kept]\x1b[0m\r\n'); },
    exit: (x) => {
      if (sbx.term === s && s.shell === 'bash' && x.code === 127) { openTerminal('sh'); return; } // no bash here
      mine('the shell ended: ' + x.status + '; New terminal starts another', false);
      if (sbx.term === s) s.ended = true;
      refreshProcesses();
    },
    gone: (msg) => {
      if (sbx.term !== s) return;
      localStorage.removeItem(TERM_KEY + sbx.id);
      detachTerminal();
      setTermState('the terminal is gone (' + msg + '); Open terminal starts a new one', false);
    },
  });
  refreshProcesses();
}

// sendInput sends keystrokes in order: one request at a time, and what was
// typed meanwhile goes with the next one.
async function sendInput(text) {
  const s = sbx.term;
  if (!s || s.ended) return;
  s.queue += text;
  if (s.sending) return;
  s.sending = true;
  try {
    while (s.queue && sbx.term === s) {
      const chunk = s.queue;
      s.queue = '';
      try {
        await api('POST', sbPath('/processes/' + encodeURIComponent(s.pid) + '/input'), { text: chunk });
      } catch (e) {
        if (e.status === 401) { signOut(); return; }
        $('#term-error').textContent = 'typing did not reach the shell: ' + e.message;
      }
    }
  } finally {
    s.sending = false;
  }
}

// resizeProcess tells the process its terminal's size, one request after
// the other so the last size given is the last one set.
function resizeProcess(size) {
  const s = sbx.term;
  if (!s || s.ended) return;
  s.resizing = (s.resizing || Promise.resolve()).then(() => setSize(s, size));
}

async function setSize(s, size) {
  if (sbx.term !== s || s.ended) return;
  try {
    await api('POST', sbPath('/processes/' + encodeURIComponent(s.pid) + '/resize'), { rows: size.rows, cols: size.cols });
    s.applied = { rows: size.rows, cols: size.cols };
  } catch (e) {
    if (e.status === 401) { signOut(); return; }
    if (sbx.term === s) $('#term-error').textContent = 'the terminal could not be resized: ' + e.message;
  }
}
